"""Cluster specs: parsing, TF_CONFIG, loopback-only by default."""

import json

import pytest

from ingraph_rl.distributed.cluster import (
  ClusterError,
  Task,
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
