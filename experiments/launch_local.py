"""Starts a whole IMPALA, Ape-X or PPO cluster as subprocesses on loopback.

    python experiments/launch_local.py --num_ps=1 --num_actors=2 \
        --logdir=runs/cluster -- \
        --flagfile=experiments/flagfiles/impala_cartpole.cfg
    python experiments/launch_local.py --agent=apex --num_replay_shards=2 \
        --num_actors=2 --logdir=runs/apex_cluster
    python experiments/launch_local.py --agent=ppo --num_actors=2 \
        --logdir=runs/ppo_cluster -- --num_envs=4

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
outlives the launcher and teardown takes under 10 s. If the launcher itself
dies (`kill -9`, its terminal closed), every task gets SIGKILL from the
kernel (a parent-death signal, prctl PR_SET_PDEATHSIG) and their env
workers follow them (their watchdog).

Crash loops: a task that exits within `--crash_window_s` of its start
`--crash_loop_restarts` times in a row (a bad flag, a missing package) is
not restarted again: the launcher prints the end of its log, stops the
cluster and exits 1.

`--help` (or `--helpshort`, `--helpfull`) lists the launcher's flags; the
tasks' flags are the experiment's (`python -m experiments.impala
--helpfull`).
"""

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ingraph_rl.distributed.cluster import local_cluster  # noqa: E402

# --agent -> the experiments module every task runs.
MODULES = {"impala": "impala", "apex": "apex", "ppo": "ppo_cluster"}

PR_SET_PDEATHSIG = 1  # linux/prctl.h
LOG_TAIL_LINES = 25  # Of a crash-looping task, printed when it stops.


def die_with(parent_pid):
  """A `preexec_fn`: the child gets SIGKILL when `parent_pid` (the thread
  that started it: the launcher's main thread) dies."""

  def set_parent_death_signal():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
      os._exit(127)
    if os.getppid() != parent_pid:  # It died before prctl: go now.
      os._exit(1)

  return set_parent_death_signal


class Task:
  """One supervised subprocess."""

  def __init__(self, job, index, argv, log_path, env):
    self.job, self.index = job, index
    self.argv, self.log_path, self.env = argv, log_path, env
    self.proc = None
    self.restarts = 0
    self.started_at = 0.0
    self.quick_exits = 0  # In a row, each within the crash window.

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
    # Own session: the launcher alone decides which signal each task gets
    # (and the kernel, should the launcher die).
    self.proc = subprocess.Popen(
      self.argv,
      cwd=ROOT,
      stdout=log,
      stderr=subprocess.STDOUT,
      env=self.env,
      start_new_session=True,
      preexec_fn=die_with(os.getpid()),
    )
    log.close()
    self.started_at = time.monotonic()

  def exited(self, crash_window_s):
    """Counts an exit (call once per exit): True when it came within
    `crash_window_s` of the start, as the one before."""
    quick = time.monotonic() - self.started_at < crash_window_s
    self.quick_exits = self.quick_exits + 1 if quick else 0
    return quick

  def log_tail(self, lines=LOG_TAIL_LINES):
    try:
      with open(self.log_path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])
    except OSError as e:
      return f"(its log {self.log_path} is unreadable: {e})\n"

  def poll(self):
    return None if self.proc is None else self.proc.poll()

  def signal(self, sig):
    if self.proc is not None and self.proc.poll() is None:
      try:
        os.killpg(self.proc.pid, sig)
      except ProcessLookupError:
        pass


def parse_args(argv):
  parser = argparse.ArgumentParser(
    description=__doc__.splitlines()[0],
    epilog="Arguments after -- go to every task: the experiment's flags "
    "(python -m experiments.<agent> --helpfull lists them).",
  )
  # absl's names of help: the launcher's own, never passed to the tasks.
  parser.add_argument("--helpshort", "--helpfull", action="help")
  parser.add_argument("--num_ps", type=int, default=1)
  parser.add_argument("--num_actors", type=int, default=2)
  parser.add_argument(
    "--agent",
    choices=tuple(MODULES),
    default="impala",
    help="experiments/<agent>.py runs every task (ppo: "
    "experiments/ppo_cluster.py, synchronous)",
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
    "--crash_window_s",
    type=float,
    default=30.0,
    help="an exit this soon after a task's start counts toward a crash "
    "loop (a task imports TensorFlow first: seconds)",
  )
  parser.add_argument(
    "--crash_loop_restarts",
    type=int,
    default=5,
    help="quick exits in a row of one task that stop the cluster",
  )
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
        f"experiments.{MODULES[args.agent]}",
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
      if task.exited(args.crash_window_s) and (
        task.quick_exits >= args.crash_loop_restarts
      ):
        print(
          f"[launch] {task.name} exited with {status} within "
          f"{args.crash_window_s:g} s of its start {task.quick_exits} times "
          f"in a row: a crash loop; stopping the cluster. The end of "
          f"{task.log_path}:\n{task.log_tail()}",
          flush=True,
        )
        code = 1
        stopping["signal"] = "crash loop"
        break
      task.restarts += 1
      print(
        f"[launch] {task.name} exited with {status}: restart {task.restarts}",
        flush=True,
      )
      task.start()
    if stopping["signal"] in ("learner", "crash loop"):
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
