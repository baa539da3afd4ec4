"""A real loopback cluster for tests: experiments/launch_local.py as a
subprocess, its tasks' pids and logs.

    cluster = LocalCluster(logdir, ["--num_actors=2"], ["--seed=0"])
    cluster.wait_for("learner:0", r"env steps", timeout_s=120)
    cluster.kill9("actor:0")
    out = cluster.stop()   # Ctrl-C of the launcher
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil

from ingraph_rl.testing.fresh_process import ROOT

LAUNCHER = str(ROOT / "experiments" / "launch_local.py")


class LocalCluster:
  """A running launcher (`launcher_args`, then `--` and `task_args`) and
  its tasks' logs."""

  def __init__(self, logdir, launcher_args, task_args):
    self.logdir = logdir
    self.proc = subprocess.Popen(
      [
        sys.executable,
        LAUNCHER,
        f"--logdir={logdir}",
        *launcher_args,
        "--",
        *task_args,
      ],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
      start_new_session=True,
    )
    self.pids = {}
    self.output = []
    for line in self.proc.stdout:
      self.output.append(line)
      m = re.match(r"\[launch\] (\w+:\d+) +pid +(\d+)", line)
      if m:
        self.pids[m.group(1)] = int(m.group(2))
      if m and self._all_started():
        break

  def _all_started(self):
    path = os.path.join(self.logdir, "cluster.json")
    if not os.path.exists(path):
      return False
    with open(path) as f:
      cluster = json.load(f)
    return len(self.pids) == sum(len(v) for v in cluster.values())

  def log(self, task):
    path = os.path.join(self.logdir, "logs", f"{task.replace(':', '-')}.log")
    with open(path, errors="replace") as f:
      return f.read()

  def wait_for(self, task, pattern, timeout_s, after=0):
    """The first match of `pattern` in `task`'s log at offset >= after."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
      text = self.log(task)
      m = re.compile(pattern).search(text, after)
      if m:
        return m
      assert self.proc.poll() is None, self.tail()
      time.sleep(0.5)
    raise AssertionError(
      f"no {pattern!r} in {task} within {timeout_s} s:\n"
      + self.log(task)[-3000:]
    )

  def wait_for_checkpoint(self, directory, timeout_s=60):
    """Waits until `directory` (under the logdir) holds a checkpoint."""
    path = os.path.join(self.logdir, directory)
    deadline = time.monotonic() + timeout_s
    while not (
      os.path.isdir(path)
      and any(f.endswith(".index") for f in os.listdir(path))
    ):
      assert time.monotonic() < deadline, f"no checkpoint in {path}"
      time.sleep(0.5)

  def task_pids(self):
    """Live pids of the launcher's children (tasks and their children)."""
    try:
      return {
        p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)
      }
    except psutil.NoSuchProcess:
      return set()

  def kill9(self, task):
    pid = self.current_pid(task)
    os.kill(pid, signal.SIGKILL)
    return pid

  def current_pid(self, task):
    job, index = task.split(":")
    for p in psutil.Process(self.proc.pid).children():
      cmd = " ".join(p.cmdline())
      if f"--job_name={job}" in cmd and f"--task={index}" in cmd:
        return p.pid
    raise AssertionError(f"{task} is not running")

  def tail(self):
    return "\n".join(
      f"== {t}\n{self.log(t)[-1500:]}"
      for t in sorted(self.pids)
      if os.path.exists(
        os.path.join(self.logdir, "logs", f"{t.replace(':', '-')}.log")
      )
    )

  def stop(self):
    """Ctrl-C of the launcher; returns its output."""
    if self.proc.poll() is None:
      os.killpg(self.proc.pid, signal.SIGINT)
    try:
      return "".join(self.output) + self.proc.communicate(timeout=30)[0]
    finally:
      if self.proc.poll() is None:
        os.killpg(self.proc.pid, signal.SIGKILL)

  def assert_no_orphans_after_ctrl_c(self, within_s=10.0):
    """Ctrl-C of the launcher: every task is gone within `within_s`."""
    pids = self.task_pids()
    start = time.monotonic()
    out = self.stop()
    elapsed = time.monotonic() - start
    assert elapsed < within_s, out[-2000:]
    assert "[launch] all tasks stopped" in out, out[-2000:]
    alive = [
      p
      for p in pids
      if psutil.pid_exists(p)
      and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert not alive, alive
