"""experiments/__init__.py: a run shows our INFO lines, not TF's."""

import logging

import pytest
import tensorflow as tf
from absl import logging as absl_logging

import experiments
from ingraph_rl.utils.checkpoints import CheckpointSaver


class Capture(logging.Handler):
  def __init__(self):
    super().__init__(logging.DEBUG)
    self.records = []

  def emit(self, record):
    self.records.append(record)


@pytest.fixture
def captured():
  logger = absl_logging.get_absl_logger()
  handler, verbosity = Capture(), absl_logging.get_verbosity()
  logger.addHandler(handler)
  absl_logging.set_verbosity(absl_logging.INFO)  # What app.run sets.
  try:
    yield handler.records
  finally:
    absl_logging.set_verbosity(verbosity)
    logger.removeHandler(handler)


def test_a_checkpoint_save_logs_nothing_at_info(captured, tmp_path):
  saver = CheckpointSaver(
    tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path)
  )
  saver.save(checkpoint_number=1)
  absl_logging.info("env steps %d", 8)
  assert [r.getMessage() for r in captured] == ["env steps 8"]


def test_debug_verbosity_and_tf_warnings_still_show(captured, tmp_path):
  for logger in (absl_logging.get_absl_logger(), tf.get_logger()):
    assert experiments.quiet_tensorflow_info in logger.filters
  saver = CheckpointSaver(
    tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path)
  )
  absl_logging.set_verbosity(absl_logging.DEBUG)
  saver.save(checkpoint_number=1)
  assert any("Sharding callback" in r.getMessage() for r in captured)
  absl_logging.set_verbosity(absl_logging.INFO)
  for level, shown in ((logging.WARNING, True), (logging.INFO, False)):
    record = logging.LogRecord("absl", level, tf.__file__, 1, "m", (), None)
    assert experiments.quiet_tensorflow_info(record) is shown
