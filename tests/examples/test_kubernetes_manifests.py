"""examples/kubernetes: the TFJob manifests make the clusters they say.

Every replica gets the TF_CONFIG the Kubeflow training operator writes
(`<job>-<type>-<index>.<namespace>.svc:<port>` addresses), which must map
to one task of our jobs (`cluster.from_tfjob`): each task once, remote
addresses refused without --allow_remote_hosts. The replicas' args must
parse as the experiment's flags (in a subprocess: absl flags are global,
and the two experiments define the same names) with the Worker count's
split into replay shards and actors.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ingraph_rl.distributed.cluster import ClusterError, task_from_flags
from ingraph_rl.testing.fresh_process import ROOT

MANIFESTS = ROOT / "examples" / "kubernetes"
NAMESPACE = "default"
DEFAULT_PORT = 2222  # The operator's when no port is named tfjob-port.

# manifest: (experiment, the tasks of each of our jobs)
EXPECTED = {
  "impala_tfjob.yaml": ("impala", {"learner": 1, "ps": 1, "actor": 4}),
  "apex_tfjob.yaml": (
    "apex",
    {"learner": 1, "ps": 1, "replay": 2, "actor": 4},
  ),
}

# The experiment's settings from the args, as its main() makes them;
# num_replay_shards is what its cluster_main passes to task_from_flags
# (IMPALA: none).
PARSE_ARGS = """
import importlib, json, sys
from absl import flags
from experiments import configs
agent, args = sys.argv[1], json.loads(sys.argv[2])
importlib.import_module(f"experiments.{agent}")
flags.FLAGS(["prog", *args])
settings = getattr(configs, f"{agent}_settings")(
  getattr(configs, f"{agent}_values")()
)
print(json.dumps({
  "job_name": settings.job_name,
  "task": settings.task,
  "cluster": settings.cluster,
  "logdir": settings.logdir,
  "allow_remote_hosts": settings.allow_remote_hosts,
  "env": settings.env,
  "num_actors": settings.num_actors,
  "num_replay_shards": getattr(settings, "num_replay_shards", 0),
  "has_replay_flag": "num_replay_shards" in flags.FLAGS,
}))
"""


def load(name):
  docs = [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]
  assert len(docs) == 1, f"{name}: one document, the TFJob"
  return docs[0]


def container(replica):
  (main,) = [
    c
    for c in replica["template"]["spec"]["containers"]
    if c["name"] == "tensorflow"  # The operator's container.
  ]
  return main


def tfjob_port(replica):
  ports = [
    p["containerPort"]
    for p in container(replica).get("ports", [])
    if p.get("name") == "tfjob-port"
  ]
  return ports[0] if ports else DEFAULT_PORT


def args_of(name):
  """The args every replica runs with (asserted the same)."""
  specs = load(name)["spec"]["tfReplicaSpecs"]
  args = {tuple(container(spec)["args"]) for spec in specs.values()}
  assert len(args) == 1, f"{name}: the replicas' args differ: {args}"
  return list(args.pop())


def operator_tf_configs(job):
  """[(type, index, TF_CONFIG)] the operator gives the job's replicas."""
  name = job["metadata"]["name"]
  cluster = {}
  for replica_type, spec in job["spec"]["tfReplicaSpecs"].items():
    kind = replica_type.lower()
    cluster[kind] = [
      f"{name}-{kind}-{i}.{NAMESPACE}.svc:{tfjob_port(spec)}"
      for i in range(spec["replicas"])
    ]
  return [
    (
      kind,
      i,
      {
        "cluster": cluster,
        "task": {"type": kind, "index": i},
        "environment": "cloud",
      },
    )
    for kind, addresses in cluster.items()
    for i in range(len(addresses))
  ]


@pytest.fixture(scope="module")
def parsed():
  """{manifest: the experiment's settings from its args}; both parsed at
  once (each subprocess imports TensorFlow)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_CONFIG", None)
  procs = {
    name: subprocess.Popen(
      [sys.executable, "-c", PARSE_ARGS, agent, json.dumps(args_of(name))],
      cwd=ROOT,  # Flagfile paths are relative to the repo root.
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for name, (agent, _) in EXPECTED.items()
  }
  results = {}
  for name, proc in procs.items():
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"{name}: its args do not parse:\n{err}"
    results[name] = json.loads(out.strip().splitlines()[-1])
  return results


def test_every_manifest_is_tested():
  assert sorted(p.name for p in MANIFESTS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_tfjob_whose_replicas_run_the_same_command(name):
  agent, jobs = EXPECTED[name]
  job = load(name)
  assert job["apiVersion"] == "kubeflow.org/v1"
  assert job["kind"] == "TFJob"
  specs = job["spec"]["tfReplicaSpecs"]
  assert set(specs) <= {"Chief", "PS", "Worker"}
  assert specs["Chief"]["replicas"] == 1
  # The same command and flags everywhere: only TF_CONFIG differs.
  mains = [container(spec) for spec in specs.values()]
  for key in ("image", "command", "args", "workingDir", "env"):
    assert len({json.dumps(c.get(key)) for c in mains}) == 1, key
  assert mains[0]["command"] == ["python", "-m", f"experiments.{agent}"]
  args = mains[0]["args"]
  assert "--allow_remote_hosts" in args
  for flag in ("--job_name", "--task", "--cluster"):
    assert not any(a.startswith(flag + "=") for a in args), flag
  # --logdir is on one shared claim that every replica mounts.
  (logdir,) = [a.split("=", 1)[1] for a in args if a.startswith("--logdir=")]
  for spec in specs.values():
    volumes = {
      v["name"]: v["persistentVolumeClaim"]["claimName"]
      for v in spec["template"]["spec"]["volumes"]
      if "persistentVolumeClaim" in v
    }
    claims = {
      volumes[m["name"]]
      for m in container(spec)["volumeMounts"]
      if m["name"] in volumes
      and logdir.startswith(m["mountPath"].rstrip("/") + "/")
    }
    assert claims == {"ingraph-rl-runs"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replicas_map_to_each_task_once(name, parsed, monkeypatch):
  _, jobs = EXPECTED[name]
  shards = parsed[name]["num_replay_shards"]
  assert shards == jobs.get("replay", 0)
  tasks, clusters = [], []
  for kind, index, tf_config in operator_tf_configs(load(name)):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    task = task_from_flags(None, 0, None, num_replay_shards=shards)
    # It serves on its own replica's address.
    assert task.address == tf_config["cluster"][kind][index]
    expected = {
      "chief": ("learner", index),
      "ps": ("ps", index),
      "worker": (
        ("replay", index) if index < shards else ("actor", index - shards)
      ),
    }[kind]
    assert (task.job, task.index) == expected, (kind, index)
    assert task.num_replay_shards == jobs.get("replay", 0)
    with pytest.raises(ClusterError, match="non-loopback"):
      task.check_addresses()
    task.check_addresses(allow_remote=True)
    tasks.append((task.job, task.index))
    clusters.append(task.cluster)
  assert sorted(tasks) == sorted(
    (job, i) for job, count in jobs.items() for i in range(count)
  )
  assert all(c == clusters[0] for c in clusters)
  assert {job: len(a) for job, a in clusters[0].items()} == jobs


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_args_are_the_experiments_flags(name, parsed):
  agent, jobs = EXPECTED[name]
  settings = parsed[name]
  workers = load(name)["spec"]["tfReplicaSpecs"]["Worker"]["replicas"]
  # A task of the cluster TF_CONFIG describes, on a remote network.
  assert settings["job_name"] is None
  assert settings["cluster"] is None
  assert settings["task"] == 0
  assert settings["allow_remote_hosts"] is True
  assert settings["logdir"].startswith("/runs/")
  assert settings["env"] == "atari:pong"
  # The Workers are the replay shards and the actors.
  assert settings["num_replay_shards"] == jobs.get("replay", 0)
  assert settings["num_actors"] == jobs["actor"]
  assert workers == settings["num_replay_shards"] + settings["num_actors"]
  assert settings["has_replay_flag"] == (agent == "apex")
