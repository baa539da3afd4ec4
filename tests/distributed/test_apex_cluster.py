"""Real loopback Ape-X clusters started by experiments/launch_local.py: 1
ps, 1 learner, 2 replay shards and 2 actors, each its own process with its
own TF server.

Checks that the cluster learns CartPole (greedy >= 195 over 20 episodes),
and the fault cases of issue 14: kill -9 of an actor (the others go on, it
rejoins), of a replay shard (the learner keeps training on the other
shard's samples; the restarted shard starts empty and refills), of the
learner (it resumes from its checkpoint; the shards keep their contents);
Ctrl-C of the launcher leaves no process behind within 10 s.
"""

import os
import re
import time

import pytest

from ingraph_rl.testing.local_cluster import LocalCluster

UPDATES = r"env steps +(\d+) +SPS +\d+ +updates +(\d+)"


def apex_cluster(logdir, *task_args):
  return LocalCluster(
    logdir,
    ["--agent=apex", "--num_ps=1", "--num_actors=2", "--num_replay_shards=2"],
    ["--seed=0", "--log_every_seconds=1", *task_args],
  )


def last_update(cluster):
  """The learner's latest logged update count."""
  found = re.findall(UPDATES, cluster.log("learner:0"))
  return int(found[-1][1]) if found else 0


def wait_for_more_updates(cluster, than, timeout_s=120):
  deadline = time.monotonic() + timeout_s
  while last_update(cluster) <= than:
    assert time.monotonic() < deadline, cluster.tail()
    assert cluster.proc.poll() is None, cluster.tail()
    time.sleep(0.5)
  return last_update(cluster)


@pytest.mark.slow  # ~2.5 min; the single-process learning test is in make test.
def test_cluster_with_two_shards_learns_cartpole(tmp_path):
  cluster = apex_cluster(
    str(tmp_path / "learn"), "--total_env_steps=100000", "--eval_episodes=20"
  )
  out = cluster.proc.communicate(timeout=600)[0]
  assert cluster.proc.returncode == 0, out[-2000:] + cluster.tail()
  learner = cluster.log("learner:0")
  assert "variables on ['/job:ps/replica:0/task:0/device:CPU:0']" in learner
  m = re.search(r"greedy eval return ([\d.]+) over 20 episodes", learner)
  assert m, learner[-3000:]
  assert float(m.group(1)) >= 195.0
  for shard in ("replay:0", "replay:1"):
    sizes = [int(s) for s in re.findall(r"size (\d+)", cluster.log(shard))]
    assert sizes and max(sizes) > 10_000  # Both shards were fed.
  for actor in ("actor:0", "actor:1"):
    versions = re.findall(r"weights v(\d+)", cluster.log(actor))
    assert versions and int(versions[-1]) > 100  # Published weights.


@pytest.mark.slow  # ~3 min.
def test_faults_restarts_and_teardown(tmp_path):
  """Unthrottled, as in the paper (`--training_intensity=0`): the actors
  restart after a shard is lost (their remote context is gone with it),
  and a learner held to the intensity would wait for them rather than go
  on training on the other shard's samples."""
  logdir = str(tmp_path / "faults")
  cluster = apex_cluster(
    logdir,
    "--total_env_steps=100000000",
    "--eval_episodes=0",
    "--checkpoint_every_minutes=0.05",
    "--training_intensity=0",
  )
  try:
    cluster.wait_for("learner:0", UPDATES, 180)
    cluster.wait_for("actor:0", r"rollouts 100 ", 120)

    # 1. kill -9 an actor: the learner keeps training, the actor rejoins.
    offset = len(cluster.log("actor:0"))
    cluster.kill9("actor:0")
    wait_for_more_updates(cluster, last_update(cluster))
    cluster.wait_for("actor:0", r"connected; rolling out", 120, after=offset)
    cluster.wait_for("actor:0", r"rollouts 100 ", 120, after=offset)

    # 2. kill -9 a replay shard: the learner keeps sampling from the other
    #    shard; the restarted shard is empty and refills.
    offset = len(cluster.log("replay:1"))
    before = last_update(cluster)
    cluster.kill9("replay:1")
    restart = cluster.wait_for(
      "replay:1", r"serving; generation \d+; (\S+)", 120, after=offset
    )
    assert restart.group(1) == "empty"
    # Trained while shard 1 was gone (its restart takes seconds).
    assert last_update(cluster) > before
    m = cluster.wait_for(
      "replay:1", r"size ([1-9]\d*) ", 120, after=restart.end()
    )
    assert int(m.group(1)) > 0

    # 3. kill -9 the learner: restarted, it resumes from its checkpoint;
    #    the shards save their contents and restore them.
    cluster.wait_for_checkpoint(os.path.join("checkpoints", "learner"))
    offset = len(cluster.log("learner:0"))
    shard_offset = len(cluster.log("replay:0"))
    cluster.kill9("learner:0")
    m = cluster.wait_for(
      "learner:0",
      r"resumed from \S+ckpt-(\d+) at update (\d+), env step (\d+)",
      180,
      after=offset,
    )
    resumed_at = int(m.group(2))
    assert resumed_at == int(m.group(1)) > 0 and int(m.group(3)) > 0
    saved = cluster.wait_for(
      "replay:0", r"saved (\d+) transitions", 120, after=shard_offset
    )
    restored = cluster.wait_for(
      "replay:0", r"restored (\d+) transitions", 120, after=saved.end()
    )
    assert int(restored.group(1)) == int(saved.group(1)) > 0
    m = cluster.wait_for("learner:0", UPDATES, 180, after=offset)
    assert int(m.group(2)) > resumed_at  # Counts on from the restore.
  except BaseException:
    print(cluster.tail())
    raise
  finally:
    # 4. Ctrl-C of the launcher: everything is gone within 10 s.
    cluster.assert_no_orphans_after_ctrl_c()
