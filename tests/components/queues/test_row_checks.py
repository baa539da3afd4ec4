"""RowChecks against a NumPy reading of the same rules, and RejectionLog:
each cause of dropped received rows is logged once, every row counted
(issue 40 item 1)."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.queues import row_checks
from ingraph_rl.components.queues.row_checks import RejectionLog, RowChecks
from ingraph_rl.spaces import Dict, FloatBox, IntBox

ROW = Dict(action=IntBox(3), obs=FloatBox((2,)), priority=FloatBox())


def checks():
  return RowChecks(
    ROW,
    [
      (
        "priority <= 0",
        lambda r: tf.math.is_nan(r["priority"]) | (r["priority"] > 0),
      )
    ],
    prefix="insert",
  )


def test_tf_check_marks_the_rows_and_the_rules_they_break():
  c = checks()
  rows = {
    "action": np.array([0, 3, 2, -1, 1], np.int32),
    "obs": np.array([[0, 0], [1, 1], [np.inf, 0], [0, 0], [2, 2]], np.float32),
    "priority": np.array([1, 1, 1, 1, -2], np.float32),
  }
  ok, mask = c.tf_check(rows)
  # NumPy: which row breaks which rule.
  broken = {
    "insert ['action']: integers out of [0, 3)": (rows["action"] < 0)
    | (rows["action"] >= 3),
    "insert ['obs']: NaN or inf": ~np.isfinite(rows["obs"]).all(1),
    "insert ['priority']: NaN or inf": ~np.isfinite(rows["priority"]),
    "insert: priority <= 0": rows["priority"] <= 0,
  }
  assert sorted(c.causes) == sorted(broken)
  want_ok = ~np.any(list(broken.values()), axis=0)
  np.testing.assert_array_equal(ok.numpy(), want_ok)
  assert set(c.causes_of(mask)) == {k for k, v in broken.items() if v.any()}
  kept = row_checks.keep_rows(rows, ok)
  np.testing.assert_array_equal(kept["action"].numpy(), [0])


def test_rejection_log_logs_each_cause_once_and_counts_every_row(monkeypatch):
  logged = []
  monkeypatch.setattr(
    row_checks.logging, "warning", lambda fmt, *a: logged.append(fmt % a)
  )
  log = RejectionLog("replay shard 1", ["a", "b", "c"])
  assert log.add(np.int32(2), np.int64(0b011)) == 2
  assert log.add(1, 0b001) == 1  # "a" again: counted, not logged.
  log.add_result({"rejected_rows": 3, "rejected_causes": 0b110})
  log.add_result({"loss": 1.0})  # No rejections reported: ignored.
  assert log.total == 6
  assert len(logged) == 3
  for line, cause in zip(logged, "abc"):
    assert line.startswith(f"replay shard 1: dropped received rows: {cause} ")
