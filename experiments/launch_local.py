"""Starts a whole IMPALA or Ape-X cluster as subprocesses on loopback.

    python experiments/launch_local.py --num_ps=1 --num_actors=2 \
        --logdir=runs/cluster -- \
        --flagfile=experiments/flagfiles/impala_cartpole.cfg
    python experiments/launch_local.py --agent=apex --num_replay_shards=2 \
        --num_actors=2 --logdir=runs/apex_cluster

Every task is `python -m experiments.<agent> --job_name=<ps|learner|
replay|actor> --task=<i> --cluster=<spec> --logdir=<logdir>` plus the
arguments after `--` (Ape-X's also get --num_actors and
--num_replay_shards). Each logs to `<logdir>/logs/<job>-<i>.log` (printed
at start).

Supervision: a task that dies (killed, or an actor whose learner went
away, or a learner that lost a ps task) is restarted with the same address;
a restarted learner resumes from its latest checkpoint. When the learner
finishes its frame budget, the launcher stops the rest and exits with the
learner's exit code.

Ctrl-C (or SIGTERM): the learner gets SIGINT (it saves a checkpoint), the
others SIGTERM; whatever still runs after `--grace_s` is killed, so no task
outlives the launcher and teardown takes under 10 s.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ingraph_rl.distributed.cluster import local_cluster  # noqa: E402


class Task:
  """One supervised subprocess."""

  def __init__(self, job, index, argv, log_path, env):
    self.job, self.index = job, index
    self.argv, self.log_path, self.env = argv, log_path, env
    self.proc = None
    self.restarts = 0

  @property
  def name(self):
    return f"{self.job}:{self.index}"

  def start(self):
    log = open(self.log_path, "a")
    log.write(
      f"\n===== start {time.strftime('%H:%M:%S')} "
      f"(restart {self.restarts}) =====\n"
    )
    log.flush()
    # Own session: the launcher alone decides which signal each task gets.
    self.proc = subprocess.Popen(
      self.argv,
      cwd=ROOT,
      stdout=log,
      stderr=subprocess.STDOUT,
      env=self.env,
      start_new_session=True,
    )
    log.close()

  def poll(self):
    return None if self.proc is None else self.proc.poll()

  def signal(self, sig):
    if self.proc is not None and self.proc.poll() is None:
      try:
        os.killpg(self.proc.pid, sig)
      except ProcessLookupError:
        pass


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_ps", type=int, default=1)
  parser.add_argument("--num_actors", type=int, default=2)
  parser.add_argument(
    "--agent",
    choices=("impala", "apex"),
    default="impala",
    help="experiments/<agent>.py runs every task",
  )
  parser.add_argument(
    "--num_replay_shards",
    type=int,
    default=None,
    help="replay tasks (Ape-X; default 2 there, none for IMPALA)",
  )
  parser.add_argument("--logdir", default=None)
  parser.add_argument("--host", default="127.0.0.1")
  parser.add_argument(
    "--no_restart", action="store_true", help="do not restart tasks that die"
  )
  parser.add_argument("--max_restarts", type=int, default=20)
  parser.add_argument(
    "--grace_s",
    type=float,
    default=7.0,
    help="seconds tasks get to exit before SIGKILL",
  )
  args, rest = parser.parse_known_args(argv)
  if rest and rest[0] == "--":
    rest = rest[1:]
  return args, rest


def main(argv=None):
  args, forwarded = parse_args(sys.argv[1:] if argv is None else argv)
  logdir = os.path.abspath(
    args.logdir or os.path.join("runs", f"cluster__{int(time.time())}")
  )
  os.makedirs(os.path.join(logdir, "logs"), exist_ok=True)
  shards = args.num_replay_shards
  if args.agent == "apex":
    shards = 2 if shards is None else shards
    # After the forwarded flags: a flagfile there must not override them.
    forwarded = [
      *forwarded,
      f"--num_actors={args.num_actors}",
      f"--num_replay_shards={shards}",
    ]
  cluster = local_cluster(args.num_ps, args.num_actors, args.host, shards or 0)
  with open(os.path.join(logdir, "cluster.json"), "w") as f:
    json.dump(cluster, f)
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  tasks = []
  for job in ("ps", "learner", "replay", "actor"):
    for i, _ in enumerate(cluster.get(job, [])):
      argv = [
        sys.executable,
        "-m",
        f"experiments.{args.agent}",
        f"--job_name={job}",
        f"--task={i}",
        f"--cluster={json.dumps(cluster)}",
        f"--logdir={logdir}",
        *forwarded,
      ]
      tasks.append(
        Task(job, i, argv, os.path.join(logdir, "logs", f"{job}-{i}.log"), env)
      )
  stopping = {"signal": None}

  def on_signal(signum, _frame):
    stopping["signal"] = signum

  signal.signal(signal.SIGINT, on_signal)
  signal.signal(signal.SIGTERM, on_signal)
  for task in tasks:
    task.start()
    print(
      f"[launch] {task.name:10s} pid {task.proc.pid:7d}  "
      f"{cluster[task.job][task.index]}  log {task.log_path}",
      flush=True,
    )
  learner = next(t for t in tasks if t.job == "learner")
  code = 0
  while True:
    if stopping["signal"] is not None:
      print(
        f"[launch] signal {stopping['signal']}: stopping the cluster",
        flush=True,
      )
      code = 130
      break
    exit_code = learner.poll()
    if exit_code == 0:
      print("[launch] the learner finished", flush=True)
      break
    for task in tasks:
      status = task.poll()
      if status is None:
        continue
      if args.no_restart or task.restarts >= args.max_restarts:
        if task is learner:
          print(f"[launch] the learner exited with {status}", flush=True)
          code = status or 1
          stopping["signal"] = "learner"
        continue
      task.restarts += 1
      print(
        f"[launch] {task.name} exited with {status}: restart {task.restarts}",
        flush=True,
      )
      task.start()
    if stopping["signal"] == "learner":
      break
    time.sleep(0.5)
  teardown(tasks, learner, args.grace_s)
  return code


def teardown(tasks, learner, grace_s):
  """SIGINT to the learner (it checkpoints), SIGTERM to the actors and
  replay tasks (a shard saves its contents); the ps tasks get SIGTERM once
  the learner is gone (its last checkpoint reads their variables) or
  `grace_s` passed; whatever is left a second later is killed."""
  learner.signal(signal.SIGINT)
  for task in tasks:
    if task is not learner and task.job != "ps":
      task.signal(signal.SIGTERM)
  deadline = time.monotonic() + grace_s
  _wait([t for t in tasks if t.job != "ps"], deadline)
  for task in tasks:
    if task.job == "ps":
      task.signal(signal.SIGTERM)
  _wait(tasks, min(deadline, time.monotonic() + 1.0))
  for task in tasks:
    task.signal(signal.SIGKILL)
    if task.proc is not None:
      task.proc.wait()
  print("[launch] all tasks stopped", flush=True)


def _wait(tasks, deadline):
  for task in tasks:
    if task.proc is None:
      continue
    try:
      task.proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      pass


if __name__ == "__main__":
  sys.exit(main())
