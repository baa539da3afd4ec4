"""experiments/apex.py as a user runs it: flagfile, TensorBoard scalars
(CleanRL names and per-shard replay scalars), the learner's and each
shard's checkpoints, the complete agent's SavedModel, and resuming from
--logdir with the shards' data."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.export import load as export_load
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.references import numpy_q_values
from ingraph_rl.testing.tensorboard import scalar_tags, scalars


def shard_size(checkpoint):
  """The replay size stored in a shard's checkpoint."""
  reader = tf.train.load_checkpoint(checkpoint)
  (key,) = [
    k
    for k in reader.get_variable_to_shape_map()
    if k.endswith("memory.Ssize/.ATTRIBUTES/VARIABLE_VALUE")
  ]
  return int(reader.get_tensor(key))


def online_path(key):
  """The online network's variable path of a learner checkpoint key, or
  None (e.g. "learner/.../online/torso/dense_0/kernel")."""
  name = key.split("/.ATTRIBUTES")[0].replace(".S", "/")
  if "/online/" not in name:
    return None
  return name.split("/online/", 1)[1]


def run(logdir, total):
  cmd = [
    sys.executable,
    "-m",
    "experiments.apex",
    "--flagfile=experiments/flagfiles/apex_cartpole.cfg",
    f"--total_env_steps={total}",
    "--eval_episodes=2",
    "--log_every_seconds=0.5",
    f"--logdir={logdir}",
  ]
  out = subprocess.run(
    cmd, cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out


@pytest.mark.slow  # ~60 s: two runs of 5 executors' builds each.
def test_scalars_checkpoints_and_resume_with_the_shards_data(tmp_path):
  logdir = str(tmp_path / "run")
  out = run(logdir, 4000)
  steps = int(re.search(r"apex: (\d+) env steps, (\d+) updates", out.stdout)[1])
  assert 4000 <= steps < 4000 + 2 * 100 + 1
  # experiments/progress.py's plain lines (issue 40 item 8), not absl's
  # prefixed INFO lines.
  progress = re.findall(
    r"^\[apex\] env steps +(\d+)  SPS .*  wall [\d.]+$", out.stdout, re.M
  )
  assert progress and int(progress[-1]) <= steps, out.stdout[-2000:]
  assert not re.search(
    r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] .*env steps",
    out.stdout + out.stderr,
    re.M,
  )
  tags = scalar_tags(logdir)
  for tag in (
    "charts/episodic_return",
    "charts/episodic_return_last100",
    "charts/SPS",
    "losses/td_loss",
    "losses/q_values",
    "replay/shard_0/size",
    "replay/shard_1/mean_priority",
    "replay/shard_1/rejected_rows",
    "eval/episodic_return",
  ):
    assert tag in tags, tag
  root = pathlib.Path(logdir) / "checkpoints"
  paths = {
    part: tf.train.latest_checkpoint(str(root / part))
    for part in ("learner", "shard_0", "shard_1")
  }
  assert all(paths.values()), paths
  sizes = {part: shard_size(paths[part]) for part in ("shard_0", "shard_1")}
  # Both shards were fed; together they hold (about) every transition.
  assert all(s > 500 for s in sizes.values()), sizes
  # No faulty peer here: no received row was dropped.
  assert all(
    v == 0
    for i in (0, 1)
    for _, v in scalars(logdir, f"replay/shard_{i}/rejected_rows")
  )
  # The complete agent's SavedModel acts greedily with the learner's
  # weights: the same actions as the learner's last checkpoint's Q-values.
  saved = pathlib.Path(logdir) / "saved_agent"
  assert f"exported the complete agent (act, observe, update) to {saved}" in (
    out.stdout
  )
  agent = export_load(str(saved))
  assert {"action", "observe", "update"} <= set(agent.signatures)
  states = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
  got = agent.signatures["action"](
    states=tf.constant(states), explore=tf.constant(False)
  )
  reader = tf.train.load_checkpoint(paths["learner"])
  online = {
    path: reader.get_tensor(key)
    for key in reader.get_variable_to_shape_map()
    for path in [online_path(key)]
    if path
  }
  want = numpy_q_values(states, online)
  np.testing.assert_allclose(got["q_values"].numpy(), want, rtol=1e-4)
  np.testing.assert_array_equal(got["actions"].numpy(), want.argmax(1))
  out = run(logdir, 6000)
  assert "apex: resumed from" in out.stdout
  resumed_at = int(re.search(r"env step (\d+)", out.stdout)[1])
  assert resumed_at == steps
  # The shards came back with their data and went on filling: each holds
  # what it held plus about half of the 2000 new transitions.
  for part, before in sizes.items():
    after = shard_size(tf.train.latest_checkpoint(str(root / part)))
    assert after >= before + 500, (part, before, after)
  assert scalars(logdir, "replay/shard_1/size")
