"""Cluster specs: parsing, TF_CONFIG, loopback-only by default."""

import json

import pytest

from ingraph_rl.distributed.cluster import (
  ClusterError,
  Task,
  from_tfjob,
  in_cluster,
  local_cluster,
  parse_cluster,
  task_from_flags,
)

SPEC = {
  "ps": ["127.0.0.1:2000", "127.0.0.1:2001"],
  "learner": ["127.0.0.1:2002"],
  "actor": ["127.0.0.1:2003"],
}


def test_json_and_short_forms_agree():
  short = (
    "ps=127.0.0.1:2000,127.0.0.1:2001;learner=127.0.0.1:2002;"
    "actor=127.0.0.1:2003"
  )
  assert parse_cluster(json.dumps(SPEC)) == SPEC
  assert parse_cluster(short) == SPEC


@pytest.mark.parametrize(
  "text,match",
  [
    ("", "empty"),
    ("{not json", "JSON"),
    ('{"worker": ["a:1"]}', "unknown"),
    ('{"ps": ["a:1"]}', "exactly one learner"),
    ('{"learner": ["a:1", "b:2"]}', "exactly one learner"),
  ],
)
def test_bad_specs_are_named(text, match):
  with pytest.raises(ClusterError, match=match):
    parse_cluster(text)


def test_task_checks_its_index_and_builds_sparse_actor_specs():
  with pytest.raises(ClusterError, match="task 1 of job 'actor'"):
    Task(SPEC, "actor", 1)
  two = dict(SPEC, actor=["127.0.0.1:2003", "127.0.0.1:2004"])
  actor = Task(two, "actor", 1)
  # The actor knows only the learner and itself.
  assert actor.tf_cluster_spec().as_dict() == {
    "learner": ["127.0.0.1:2002"],
    "actor": {1: "127.0.0.1:2004"},
  }
  learner = Task(SPEC, "learner", 0)
  assert learner.tf_cluster_spec().as_dict() == {
    "learner": ["127.0.0.1:2002"],
    "ps": SPEC["ps"],
  }
  assert learner.ps_devices() == [
    "/job:ps/replica:0/task:0/device:CPU:0",
    "/job:ps/replica:0/task:1/device:CPU:0",
  ]


def test_remote_hosts_are_refused_unless_allowed():
  spec = dict(SPEC, actor=["10.0.0.7:2003"])
  task = Task(spec, "learner", 0)
  with pytest.raises(ClusterError, match="no authentication"):
    task.check_addresses()
  task.check_addresses(allow_remote=True)
  Task(
    dict(SPEC, actor=["localhost:1", "[::1]:2"]), "learner", 0
  ).check_addresses()


def test_tf_config(monkeypatch):
  monkeypatch.setenv(
    "TF_CONFIG",
    json.dumps({"cluster": SPEC, "task": {"type": "ps", "index": 1}}),
  )
  task = task_from_flags(None, 0, None)
  assert (task.job, task.index, task.address) == ("ps", 1, "127.0.0.1:2001")
  monkeypatch.setenv("TF_CONFIG", "{bad")
  with pytest.raises(ClusterError, match="TF_CONFIG"):
    task_from_flags("ps", 0, None)


def test_local_cluster_has_distinct_loopback_ports():
  spec = local_cluster(2, 3)
  addresses = [a for v in spec.values() for a in v]
  assert len(addresses) == 6 == len(set(addresses))
  assert all(a.startswith("127.0.0.1:") for a in addresses)
  assert "replay" not in spec
  spec = local_cluster(0, 2, num_replay=2)
  assert [len(spec[j]) for j in ("learner", "replay", "actor")] == [1, 2, 2]
  assert "ps" not in spec
  assert len({a for v in spec.values() for a in v}) == 5


REPLAY = dict(SPEC, replay=["127.0.0.1:2010", "127.0.0.1:2011"])


def test_replay_tasks_and_their_actors_get_sparse_specs():
  shard = Task(REPLAY, "replay", 1)
  # A shard knows the learner (its sample and update queues) and itself.
  assert shard.tf_cluster_spec().as_dict() == {
    "learner": ["127.0.0.1:2002"],
    "replay": {1: "127.0.0.1:2011"},
  }
  assert shard.num_replay_shards == 2
  # An actor also knows every shard (it enqueues on their insert queues).
  two = dict(REPLAY, actor=["127.0.0.1:2003", "127.0.0.1:2004"])
  actor = Task(two, "actor", 1)
  assert actor.tf_cluster_spec().as_dict() == {
    "learner": ["127.0.0.1:2002"],
    "replay": REPLAY["replay"],
    "actor": {1: "127.0.0.1:2004"},
  }
  assert (
    actor.device("replay", 1) == "/job:replay/replica:0/task:1/device:CPU:0"
  )
  # The learner knows neither: shards and actors come and go.
  assert "replay" not in Task(REPLAY, "learner", 0).tf_cluster_spec().jobs


TFJOB = {
  "chief": ["job-chief-0:2222"],
  "ps": ["job-ps-0:2222"],
  "worker": [f"job-worker-{i}:2222" for i in range(5)],
}


@pytest.mark.parametrize(
  "task_type,index,job,ours",
  [
    ("chief", 0, "learner", 0),
    ("ps", 0, "ps", 0),
    ("worker", 0, "replay", 0),
    ("worker", 1, "replay", 1),
    ("worker", 2, "actor", 0),
    ("worker", 4, "actor", 2),
  ],
)
def test_tfjob_replicas_map_to_our_jobs(
  monkeypatch, task_type, index, job, ours
):
  monkeypatch.setenv(
    "TF_CONFIG",
    json.dumps({"cluster": TFJOB, "task": {"type": task_type, "index": index}}),
  )
  assert in_cluster(None)
  task = task_from_flags(None, 0, None, num_replay_shards=2)
  assert (task.job, task.index) == (job, ours)
  assert task.cluster == {
    "learner": TFJOB["chief"],
    "ps": TFJOB["ps"],
    "replay": TFJOB["worker"][:2],
    "actor": TFJOB["worker"][2:],
  }
  assert (
    task.address
    == (TFJOB["chief"] + TFJOB["ps"] + TFJOB["worker"])[
      {"chief": 0, "ps": 1, "worker": 2}[task_type] + index
    ]
  )
  with pytest.raises(ClusterError, match="no authentication"):
    task.check_addresses()  # Pod addresses are not loopback.


def test_tfjob_without_shards_has_only_actors_and_bad_jobs_are_named():
  cluster, job, index = from_tfjob(
    {"master": ["m:1"], "worker": ["w:1", "w:2"]}, "worker", 1
  )
  assert cluster == {"learner": ["m:1"], "actor": ["w:1", "w:2"]}
  assert (job, index) == ("actor", 1)
  with pytest.raises(ClusterError, match="as many TFJob workers"):
    from_tfjob(TFJOB, "worker", 0, num_replay_shards=6)
  with pytest.raises(ClusterError, match="evaluator takes no part"):
    from_tfjob(dict(TFJOB, evaluator=["e:1"]), "evaluator", 0)
  with pytest.raises(ClusterError, match="TFJob's TF_CONFIG has jobs"):
    from_tfjob(dict(TFJOB, launcher=["l:1"]), "chief", 0)


def test_in_cluster_needs_a_job_name_or_tf_config(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert not in_cluster(None)
  assert in_cluster("actor")
