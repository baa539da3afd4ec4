"""Real loopback clusters started by experiments/launch_local.py: 1 ps, 1
learner, 2 actors, each its own process with its own TF server.

Checks that the cluster learns CartPole, and the fault cases: kill -9 of an
actor (the learner keeps training; the actor is restarted and rejoins), of
the learner (restarted, it resumes from its checkpoint; actors reconnect)
and of the ps (the learner exits with a clear message, and on restart the
variables come back from the checkpoint); Ctrl-C of the launcher leaves no
process behind.
"""

import re

import pytest

from ingraph_rl.testing.local_cluster import LocalCluster


def impala_cluster(logdir, frames, extra=()):
  """1 ps, 1 learner, 2 IMPALA actors."""
  return LocalCluster(
    logdir,
    ["--num_ps=1", "--num_actors=2"],
    [
      f"--total_environment_frames={frames}",
      "--num_envs_per_actor=8",
      *extra,
    ],
  )


def frames_logged(text):
  return [int(f) for f in re.findall(r"\[impala\] frames +(\d+)", text)]


@pytest.mark.slow  # ~50 s; the driver's learning test stays in make test.
def test_cluster_learns_cartpole(tmp_path):
  """1 ps + 1 learner + 2 actors reach a greedy return >= 150 (CartPole's
  maximum is 500). Seen: 492 after 200k frames in ~75 s."""
  cluster = impala_cluster(
    str(tmp_path / "learn"), 200_000, ["--eval_episodes=10"]
  )
  out = cluster.proc.communicate(timeout=600)[0]
  assert cluster.proc.returncode == 0, out[-2000:] + cluster.tail()
  learner = cluster.log("learner:0")
  assert "variables on ['/job:ps/replica:0/task:0/device:CPU:0']" in learner
  m = re.search(
    r"greedy return of the exported policy in a fresh process: "
    r"([\d.]+) over 10 episodes",
    learner,
  )
  assert m, learner[-3000:]
  assert float(m.group(1)) >= 150.0
  # Both actors trained with published weights (version > 1).
  for actor in ("actor:0", "actor:1"):
    versions = [
      int(v) for v in re.findall(r"weights v(\d+)", cluster.log(actor))
    ]
    assert versions and max(versions) > 10


# ~35 s: make test-all (make test's margin went to the Ape-X tests).
@pytest.mark.slow
def test_faults_restarts_and_teardown(tmp_path):
  logdir = str(tmp_path / "faults")
  cluster = impala_cluster(
    logdir,
    100_000_000,
    [
      "--log_every_seconds=1",
      "--eval_episodes=0",
      "--checkpoint_every_minutes=0.05",
    ],
  )
  try:
    cluster.wait_for("learner:0", r"\[impala\] frames", 180)
    cluster.wait_for("actor:0", r"unrolls 50 ", 120)

    # 1. kill -9 an actor: the learner keeps training, the actor rejoins.
    cluster.kill9("actor:0")
    before = frames_logged(cluster.log("learner:0"))[-1]
    offset = len(cluster.log("actor:0"))
    cluster.wait_for("actor:0", r"connected; unrolling", 120, after=offset)
    cluster.wait_for("actor:0", r"unrolls 50 ", 120, after=offset)
    assert frames_logged(cluster.log("learner:0"))[-1] > before

    # 2. kill -9 the learner: restarted, it resumes from its checkpoint,
    #    and the actors reconnect.
    cluster.wait_for_checkpoint("checkpoints")
    offset = len(cluster.log("learner:0"))
    actor_offset = len(cluster.log("actor:1"))
    cluster.kill9("learner:0")
    m = cluster.wait_for(
      "learner:0",
      r"resumed from \S+ckpt-(\d+) at frame "
      r"(\d+)",
      180,
      after=offset,
    )
    resumed_at = int(m.group(2))
    assert resumed_at == int(m.group(1)) > 0
    cluster.wait_for("actor:1", r"the learner is gone", 120, after=actor_offset)
    cluster.wait_for(
      "actor:1", r"connected; unrolling", 180, after=actor_offset
    )
    m = cluster.wait_for(
      "learner:0", r"\[impala\] frames +(\d+)", 180, after=offset
    )
    assert int(m.group(1)) > resumed_at  # Counts on from the restore.

    # 3. kill -9 the ps: the learner exits with a clear message; restarted
    #    (with the ps), it restores the variables from the checkpoint.
    offset = len(cluster.log("learner:0"))
    cluster.kill9("ps:0")
    cluster.wait_for(
      "learner:0",
      r"lost a ps task or the queue .*exiting "
      r"with code 4",
      120,
      after=offset,
    )
    cluster.wait_for(
      "learner:0", r"resumed from \S+ckpt-\d+ at frame", 180, after=offset
    )
    cluster.wait_for(
      "learner:0",
      r"\[impala\] frames",
      180,
      after=len(cluster.log("learner:0")) - 1,
    )
  except BaseException:
    print(cluster.tail())
    raise
  finally:
    # 4. Ctrl-C of the launcher: everything is gone within 10 s.
    cluster.assert_no_orphans_after_ctrl_c()
