"""absl-flag experiments: `python -m experiments.<name>` (README.md)."""

import importlib.util
import logging
import os
import sys

from absl import flags
from absl import logging as absl_logging

# TF's import otherwise loads Keras 3, and with it matplotlib: ~1 s more
# at the start of every run, cluster task and evaluation process. Nothing
# here uses Keras (TF_USE_LEGACY_KERAS=0 keeps Keras 3 as tf.keras).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def onednn_requested(argv):
  """Whether `argv` (flagfiles expanded; up to a `--`) turns --onednn on
  (the last of --onednn, --onednn=<bool>, --noonednn wins).

  >>> onednn_requested(["--seed=1", "--onednn"])
  True
  >>> onednn_requested(["--onednn=false", "--", "--onednn"])
  False
  >>> onednn_requested(["-k", "onednn"])
  False
  """
  try:
    args = flags.FLAGS.read_flags_from_files(list(argv), force_gnu=False)
  except (flags.Error, OSError):  # absl reports a bad flagfile later.
    return False
  on = False
  for arg in args:
    if arg == "--":
      break
    if not arg.startswith("-"):
      continue  # A positional argument, or the value of another flag.
    name, eq, value = arg.lstrip("-").partition("=")
    if name == "onednn":
      on = not eq or value.lower() in ("1", "t", "true", "y", "yes")
    elif name == "noonednn" and not eq:
      on = False
  return on


# --onednn (experiments/configs.py, RunSettings) must reach TF before it
# loads: TF reads TF_ENABLE_ONEDNN_OPTS once, at import.
if onednn_requested(sys.argv[1:]):
  os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"


def _tensorflow_dir():
  """TF's package folder, found without importing TF."""
  spec = importlib.util.find_spec("tensorflow")
  locations = spec.submodule_search_locations if spec else None
  return os.path.join(locations[0], "") if locations else None


_TF_DIR = _tensorflow_dir()


def quiet_tensorflow_info(record):
  """False for TF's own INFO records, unless --verbosity asks for debug.

  TF's Python logs through absl, which `app.run` shows from INFO: every
  checkpoint writes "Sharding callback duration: 8 microseconds", every
  export its assets folder, fingerprint path and the signatures' renamed
  input names.
  Our own INFO lines (the DQN and Ape-X progress) and TF's warnings stay.
  """
  if record.levelno > logging.INFO or _TF_DIR is None:
    return True
  if absl_logging.get_verbosity() >= absl_logging.DEBUG:
    return True
  return not record.pathname.startswith(_TF_DIR)


# TF's modules log through absl's logger or through tf.get_logger()'s.
absl_logging.get_absl_logger().addFilter(quiet_tensorflow_info)
logging.getLogger("tensorflow").addFilter(quiet_tensorflow_info)
