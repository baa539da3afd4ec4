"""experiments/launch_local.py when things go wrong, with real processes
(issue 40): its tasks die with it, a crash loop stops the cluster, and its
help is its own."""

import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ingraph_rl.testing.fresh_process import ROOT

LAUNCHER = str(ROOT / "experiments" / "launch_local.py")


def start(logdir, *args):
  return subprocess.Popen(
    [sys.executable, LAUNCHER, f"--logdir={logdir}", *args],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    start_new_session=True,
  )


def alive(pid):
  try:
    return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
  except psutil.NoSuchProcess:
    return False


@pytest.mark.slow
def test_help_lists_the_launchers_flags_and_starts_nothing(tmp_path):
  for flag in ("--helpshort",):  # --help alike (argparse's), not forwarded
    out = subprocess.run(
      [sys.executable, LAUNCHER, flag, f"--logdir={tmp_path}/run"],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (
      "--crash_loop_restarts" in out.stdout and "--num_actors" in out.stdout
    )
    assert "[launch]" not in out.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_kill_9_of_the_launcher_leaves_no_task_running(tmp_path):
  """The tasks (ps, learner, actor) get the kernel's SIGKILL when the
  launcher dies: none runs 10 s later."""
  proc = start(tmp_path, "--num_actors=1", "--", "--eval_episodes=0")
  pids = []
  try:
    for line in proc.stdout:
      m = re.match(r"\[launch\] (\w+:\d+) +pid +(\d+)", line)
      if m:
        pids.append(int(m.group(2)))
      if len(pids) == 3:
        break
    assert len(pids) == 3 and all(alive(p) for p in pids)
    time.sleep(2)  # Running (importing TensorFlow), not just forked.
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
      time.sleep(0.2)
    assert not [p for p in pids if alive(p)]
  finally:
    for p in pids:
      if alive(p):
        psutil.Process(p).kill()
    proc.kill()


@pytest.mark.slow  # ~1 min: each try imports TensorFlow.
def test_a_crash_loop_stops_the_cluster_with_the_tasks_log(tmp_path):
  """Every task exits 2 at once (a usage error): after 2 quick exits in a
  row the launcher stops, printing the log's end, instead of restarting
  them forever. The window is wide: three tasks importing TensorFlow at
  once on a loaded 2-core machine took over the default 30 s to exit."""
  proc = start(
    tmp_path,
    "--num_actors=1",
    "--crash_loop_restarts=2",
    "--crash_window_s=150",
    "--",
    "--env=NoSuchEnv-v0",
  )
  try:
    out, _ = proc.communicate(timeout=300)
  finally:
    proc.kill()
  assert proc.returncode == 1, out
  assert "a crash loop; stopping the cluster" in out, out
  assert "error: --env=NoSuchEnv-v0" in out, out
  assert out.count(": restart 1") >= 1 and ": restart 2" not in out, out
  assert "[launch] all tasks stopped" in out
