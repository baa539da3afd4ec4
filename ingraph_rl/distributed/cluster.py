"""Cluster specs: jobs `ps`, `learner`, `replay` (Ape-X's replay shards)
and `actor`.

A spec comes from `--cluster` (JSON, e.g. '{"ps": ["127.0.0.1:2222"],
"learner": ["127.0.0.1:2223"], "actor": ["127.0.0.1:2224"]}', or the short
form "ps=127.0.0.1:2222;learner=127.0.0.1:2223;actor=127.0.0.1:2224,...")
or from the `TF_CONFIG` environment variable ({"cluster": {...}, "task":
{"type": "actor", "index": 1}}). Kubernetes' TFJob knows only the
replica types Chief, PS and Worker (and Evaluator), so a TF_CONFIG with
"chief"/"worker" jobs is mapped: chief -> learner, ps -> ps, the first
`num_replay_shards` workers -> replay tasks, the other workers -> actors
(`from_tfjob`).

Security: TensorFlow's gRPC servers have NO authentication: anyone who can
reach a port can run ops in that process. Every address must therefore be a
loopback address unless `allow_remote=True` (`--allow_remote_hosts`), and
then the cluster must run on a trusted network.
"""

import dataclasses
import ipaddress
import json
import os
import socket

import tensorflow as tf

JOBS = ("ps", "learner", "replay", "actor")
# TFJob replica types (lower case, as in TF_CONFIG).
TFJOB_TYPES = ("chief", "master", "ps", "worker", "evaluator")


class ClusterError(ValueError):
  """A bad cluster spec or task."""


def parse_cluster(text):
  """{job: [address, ...]} from JSON or "job=a,b;job=c"."""
  text = (text or "").strip()
  if not text:
    raise ClusterError("empty cluster spec")
  if text.startswith("{"):
    try:
      spec = json.loads(text)
    except json.JSONDecodeError as e:
      raise ClusterError(f"cluster spec is not valid JSON: {e}") from None
  else:
    spec = {}
    for part in text.split(";"):
      if not part.strip():
        continue
      job, _, addresses = part.partition("=")
      spec[job.strip()] = [a.strip() for a in addresses.split(",") if a.strip()]
  if not isinstance(spec, dict):
    raise ClusterError(
      f"cluster spec must map job names to address lists, got {spec!r}"
    )
  unknown = set(spec) - set(JOBS)
  if unknown:
    raise ClusterError(f"unknown jobs {sorted(unknown)}; jobs are {JOBS}")
  if len(spec.get("learner", [])) != 1:
    raise ClusterError("the cluster needs exactly one learner address")
  return {job: list(addresses) for job, addresses in spec.items()}


def _is_loopback(address):
  host = address.rsplit(":", 1)[0].strip("[]")
  if host == "localhost":
    return True
  try:
    return ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


@dataclasses.dataclass(frozen=True)
class Task:
  """This process's place in the cluster."""

  cluster: dict  # {job: [address, ...]}
  job: str
  index: int

  def __post_init__(self):
    if self.job not in JOBS:
      raise ClusterError(f"job_name must be one of {JOBS}, got {self.job!r}")
    addresses = self.cluster.get(self.job, [])
    if not 0 <= self.index < len(addresses):
      raise ClusterError(
        f"task {self.index} of job {self.job!r} is not in "
        f"the cluster spec ({len(addresses)} tasks)"
      )

  @property
  def address(self):
    return self.cluster[self.job][self.index]

  @property
  def learner_device(self):
    return "/job:learner/replica:0/task:0/device:CPU:0"

  def device(self, job, index):
    return f"/job:{job}/replica:0/task:{index}/device:CPU:0"

  @property
  def num_replay_shards(self):
    return len(self.cluster.get("replay", []))

  def ps_devices(self):
    return [
      f"/job:ps/replica:0/task:{i}/device:CPU:0"
      for i in range(len(self.cluster.get("ps", [])))
    ]

  def check_addresses(self, allow_remote=False):
    if allow_remote:
      return
    remote = [
      a
      for addresses in self.cluster.values()
      for a in addresses
      if not _is_loopback(a)
    ]
    if remote:
      raise ClusterError(
        f"non-loopback addresses {remote}: TF's gRPC servers have no "
        f"authentication; pass --allow_remote_hosts only on a trusted "
        f"network"
      )

  def tf_cluster_spec(self):
    """The spec this task connects with. Actors and replay tasks get a
    sparse one (the learner, an actor also the replay tasks it feeds, and
    themselves), so they can come and go without the learner or each other
    knowing (DESIGN.md section 6)."""
    if self.job in ("actor", "replay"):
      spec = {
        "learner": self.cluster["learner"],
        self.job: {self.index: self.address},
      }
      if self.job == "actor" and self.cluster.get("replay"):
        spec["replay"] = self.cluster["replay"]
      return tf.train.ClusterSpec(spec)
    spec = {"learner": self.cluster["learner"]}
    if self.cluster.get("ps"):
      spec["ps"] = self.cluster["ps"]
    return tf.train.ClusterSpec(spec)


def in_cluster(job_name):
  """Whether a process is a cluster task: `--job_name` was given, or
  TF_CONFIG is set (as Kubernetes' TFJob sets it for every replica)."""
  return bool(job_name) or bool(os.environ.get("TF_CONFIG"))


def from_tfjob(cluster, task_type, index, num_replay_shards=0):
  """(cluster, job, index) in our jobs from a TFJob's TF_CONFIG cluster
  ({"chief": [...], "ps": [...], "worker": [...]}) and task: chief (or
  the older "master") -> learner; the first `num_replay_shards` workers
  -> replay; the other workers -> actors (evaluators take no part)."""
  unknown = set(cluster) - set(TFJOB_TYPES)
  if unknown:
    raise ClusterError(
      f"a TFJob's TF_CONFIG has jobs {TFJOB_TYPES}, got {sorted(unknown)}"
    )
  workers = list(cluster.get("worker", []))
  if not 0 <= num_replay_shards <= len(workers):
    raise ClusterError(
      f"{num_replay_shards} replay shards need as many TFJob workers, "
      f"got {len(workers)}"
    )
  ours = {"learner": list(cluster.get("chief", cluster.get("master", [])))}
  for job, addresses in (
    ("ps", cluster.get("ps", [])),
    ("replay", workers[:num_replay_shards]),
    ("actor", workers[num_replay_shards:]),
  ):
    if addresses:
      ours[job] = list(addresses)
  if task_type == "evaluator":
    raise ClusterError(
      "a TFJob evaluator takes no part in training: evaluate with "
      "experiments/play_policy.py or the experiment's own evaluation"
    )
  if task_type in ("chief", "master"):
    job = "learner"
  elif task_type == "worker":
    job = "replay" if index < num_replay_shards else "actor"
    index = index if job == "replay" else index - num_replay_shards
  else:
    job = task_type
  return parse_cluster(json.dumps(ours)), job, int(index)


def task_from_flags(job_name, task, cluster_text, num_replay_shards=0):
  """A `Task` from flags, falling back to TF_CONFIG (ours or a TFJob's,
  see `from_tfjob`) when --cluster is not given."""
  if cluster_text:
    return Task(parse_cluster(cluster_text), job_name, int(task))
  config = os.environ.get("TF_CONFIG")
  if not config:
    raise ClusterError("--job_name needs --cluster or TF_CONFIG")
  try:
    config = json.loads(config)
    spec = config["cluster"]
    info = config.get("task", {})
    job = job_name or info.get("type")
    index = int(info.get("index", task) if not job_name else task)
    if {"chief", "master", "worker"} & set(spec):
      return Task(*from_tfjob(spec, job, index, num_replay_shards))
    cluster = parse_cluster(json.dumps(spec))
  except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
    if isinstance(e, ClusterError):
      raise
    raise ClusterError(f"bad TF_CONFIG: {e!r}") from None
  return Task(cluster, job, index)


def free_ports(n, host="127.0.0.1"):
  """`n` distinct free TCP ports on `host` (for local clusters)."""
  sockets, ports = [], []
  for _ in range(n):
    s = socket.socket()
    s.bind((host, 0))
    sockets.append(s)
    ports.append(s.getsockname()[1])
  for s in sockets:
    s.close()
  return ports


def local_cluster(num_ps, num_actors, host="127.0.0.1", num_replay=0):
  """A loopback cluster spec with free ports."""
  counts = {"ps": num_ps, "learner": 1, "replay": num_replay}
  counts["actor"] = num_actors
  ports = iter(free_ports(sum(counts.values()), host))
  return {
    job: [f"{host}:{next(ports)}" for _ in range(n)]
    for job, n in counts.items()
    if n
  }
