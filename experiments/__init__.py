"""absl-flag experiments: `python -m experiments.<name>` (README.md)."""

import os

# TF's import otherwise loads Keras 3, and with it matplotlib: ~1 s more
# at the start of every run, cluster task and evaluation process. Nothing
# here uses Keras (TF_USE_LEGACY_KERAS=0 keeps Keras 3 as tf.keras).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
