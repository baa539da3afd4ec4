"""Reading a run directory's TensorBoard event files back (what tests of
experiments check)."""

import glob
import os


def _values(logdir):
  import tensorflow as tf

  for path in glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        yield event, value


def scalar_tags(logdir):
  """The tags of every summary value in `logdir`."""
  return {value.tag for _, value in _values(logdir)}


def scalars(logdir, tag=None):
  """[(step, value)] of the scalar `tag`, in step order; without a tag,
  {tag: [(step, value)]} of every scalar (text summaries left out)."""
  import tensorflow as tf

  out = {}
  for event, value in _values(logdir):
    if tag is not None and value.tag != tag:
      continue
    if not value.HasField("tensor") or value.tensor.string_val:
      continue  # Text, not a scalar.
    out.setdefault(value.tag, []).append(
      (event.step, float(tf.make_ndarray(value.tensor)))
    )
  out = {k: sorted(v) for k, v in out.items()}
  return out.get(tag, []) if tag is not None else out
