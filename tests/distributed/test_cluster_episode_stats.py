"""In an IMPALA cluster the learner reports the actors' episodes (issue
40): its progress lines, its TensorBoard scalars and its last line show
real returns, as a one-process run does (they said `nan` and `0 of 0
episodes`). A real loopback cluster: 1 ps, 1 learner, 1 actor.

CartPole pays 1 per step, so an episode's return is its length: the
learner's mean return and mean length, added up by the actors separately,
must agree at every write."""

import math
import re

import pytest

from ingraph_rl.testing.local_cluster import LocalCluster
from ingraph_rl.testing.tensorboard import scalars


@pytest.mark.slow  # ~1 min: three processes import TensorFlow.
def test_the_learner_reports_the_actors_returns(tmp_path):
  logdir = str(tmp_path / "run")
  cluster = LocalCluster(
    logdir,
    ["--num_ps=1", "--num_actors=1"],
    [
      "--total_environment_frames=40000",
      "--num_envs_per_actor=8",
      "--log_every_seconds=1",
      "--summary_every_seconds=0",
      "--eval_episodes=0",
    ],
  )
  out = cluster.proc.communicate(timeout=600)[0]
  assert cluster.proc.returncode == 0, out[-2000:] + cluster.tail()
  learner = cluster.log("learner:0")
  returns = [
    float(r) for r in re.findall(r"\[impala\] frames .* return +(\S+)", learner)
  ]
  assert returns and all(math.isfinite(r) for r in returns), learner[-3000:]
  m = re.search(
    r"last-100 training return ([\d.]+) \((\d+) of (\d+) episodes\)", learner
  )
  assert m, learner[-3000:]
  mean, count, total = float(m[1]), int(m[2]), int(m[3])
  assert count == min(total, 100) and total > 20
  assert 8 <= mean <= 500  # CartPole's shortest and longest episodes.
  episodic_return = scalars(logdir, "charts/episodic_return")
  episodic_length = scalars(logdir, "charts/episodic_length")
  assert len(episodic_return) > 3
  assert [s for s, _ in episodic_return] == [s for s, _ in episodic_length]
  for (_, r), (_, n) in zip(episodic_return, episodic_length):
    assert r == pytest.approx(n, rel=1e-5)
  # The episodes the learner counted are the ones its scalars counted.
  episodes = scalars(logdir, "charts/episodes")
  assert sum(v for _, v in episodes) == total
