"""Cluster specs for IMPALA jobs: `ps`, `learner`, `actor`.

A spec comes from `--cluster` (JSON, e.g. '{"ps": ["127.0.0.1:2222"],
"learner": ["127.0.0.1:2223"], "actor": ["127.0.0.1:2224"]}', or the short
form "ps=127.0.0.1:2222;learner=127.0.0.1:2223;actor=127.0.0.1:2224,...")
or from the `TF_CONFIG` environment variable ({"cluster": {...}, "task":
{"type": "actor", "index": 1}}).

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

JOBS = ("ps", "learner", "actor")


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
    """The spec this task connects with. Actors get a sparse one (the
    learner and themselves), so actors can come and go without the learner
    or each other knowing (DESIGN.md section 6)."""
    if self.job == "actor":
      return tf.train.ClusterSpec(
        {
          "learner": self.cluster["learner"],
          "actor": {self.index: self.address},
        }
      )
    spec = {"learner": self.cluster["learner"]}
    if self.cluster.get("ps"):
      spec["ps"] = self.cluster["ps"]
    return tf.train.ClusterSpec(spec)


def task_from_flags(job_name, task, cluster_text):
  """A `Task` from flags, falling back to TF_CONFIG when --cluster is not
  given."""
  if cluster_text:
    return Task(parse_cluster(cluster_text), job_name, int(task))
  config = os.environ.get("TF_CONFIG")
  if not config:
    raise ClusterError("--job_name needs --cluster or TF_CONFIG")
  try:
    config = json.loads(config)
    cluster = parse_cluster(json.dumps(config["cluster"]))
    info = config.get("task", {})
  except (json.JSONDecodeError, KeyError, TypeError) as e:
    raise ClusterError(f"bad TF_CONFIG: {e!r}") from None
  return Task(
    cluster,
    job_name or info.get("type"),
    int(info.get("index", task) if not job_name else task),
  )


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


def local_cluster(num_ps, num_actors, host="127.0.0.1"):
  """A loopback cluster spec with free ports."""
  ports = free_ports(num_ps + 1 + num_actors, host)
  addresses = [f"{host}:{p}" for p in ports]
  spec = {"learner": [addresses[num_ps]]}
  if num_ps:
    spec["ps"] = addresses[:num_ps]
  spec["actor"] = addresses[num_ps + 1 :]
  return spec
