"""WorkerVectorEnv: envs in fresh worker processes, arrays in shared memory.

Same results as the env stepped in this process; spaces as data; worker
deaths, parent deaths, Ctrl-C and close() never hang or leave processes or
shared memory behind. (DM Lab through workers: test_dmlab.py.)
"""

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from ingraph_rl.environments import (
  WorkerDiedError,
  WorkerSpec,
  WorkerVectorEnv,
  make_vector_env,
  worker_protocol,
)
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.testing.processes import default_sigint


def _same_steps(a, b, actions):
  for t, act in enumerate(actions):
    x, y = a.step(act), b.step(act)
    for field, u, v in zip(x._fields, x, y):
      assert u.dtype == v.dtype, (t, field)
      np.testing.assert_array_equal(u, v, err_msg=f"step {t} {field}")


@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_cartpole_in_workers_matches_in_process(envs_per_worker):
  local = make_vector_env("CartPole-v1", 3, seed=5, max_episode_steps=7)
  remote = WorkerVectorEnv(
    "CartPole-v1",
    3,
    seed=5,
    envs_per_worker=envs_per_worker,
    max_episode_steps=7,
  )
  try:
    assert remote.num_workers == (3 if envs_per_worker == 1 else 2)
    assert remote.num_envs == 3 and remote.levels is None
    assert remote.observation_space == local.observation_space
    assert remote.action_space == local.action_space
    np.testing.assert_array_equal(remote.reset(), local.reset())
    actions = np.random.default_rng(0).integers(0, 2, (20, 3))
    _same_steps(remote, local, actions)  # Crosses truncations at 7.
    # reset(seed) seeds env i with seed + i in every worker.
    np.testing.assert_array_equal(remote.reset(seed=40), local.reset(seed=40))
    _same_steps(remote, local, actions[:9])
    np.testing.assert_array_equal(remote.reset(), local.reset())
    _same_steps(remote, local, actions[:3])
    procs = [psutil.Process(pid) for pid in remote.pids]
    assert all(p.is_running() for p in procs)
  finally:
    remote.close()
    local.close()
  psutil.wait_procs(procs, timeout=5)
  assert not any(
    p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs
  )
  with pytest.raises(RuntimeError, match="closed"):
    remote.step(np.zeros(3, np.int64))
  remote.close()  # Idempotent.


@pytest.mark.slow
def test_atari_in_one_worker_matches_in_process():
  local = make_vector_env("atari:pong", 2, seed=1)
  remote = make_vector_env(
    "atari:pong", 2, seed=1, processes=True, envs_per_worker=2
  )
  try:
    assert remote.num_workers == 1
    obs = remote.reset()
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs, local.reset())
    _same_steps(remote, local, np.random.default_rng(1).integers(0, 6, (10, 2)))
  finally:
    remote.close()
    local.close()


def test_workers_import_neither_tensorflow_nor_torch():
  import tensorflow  # noqa: F401  (the parent may; its workers must not)

  with WorkerVectorEnv("CartPole-v1", 2) as env:
    for modules in env.worker_modules():
      assert "ingraph_rl.environments.workers" in modules
      assert "gymnasium" in modules
      assert not [
        m for m in modules if m.split(".")[0] in ("tensorflow", "torch")
      ]


def test_errors_in_workers_are_raised_with_their_context():
  with pytest.raises(Exception, match=r"env worker 0 .*NoSuchEnv-v0") as info:
    WorkerVectorEnv("NoSuchEnv-v0", 1)
  assert "(worker traceback)" in str(info.value)
  with pytest.raises(TypeError, match="JSON-able"):
    WorkerVectorEnv("CartPole-v1", 1, render_mode=object())
  with WorkerVectorEnv("CartPole-v1", 2) as env:
    env.reset()
    with pytest.raises(ValueError, match="shape"):
      env.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="integer actions"):
      env.step(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
      env.step(np.array([0, 2]))
    env.step(np.array([0, 1]))  # Still fine afterwards.
  with pytest.raises(Exception, match="same spaces"):
    WorkerVectorEnv.from_specs(
      [WorkerSpec("CartPole-v1", 1, 0), WorkerSpec("Acrobot-v1", 1, 1)]
    )


def test_an_interrupted_call_does_not_shift_the_replies():
  local = make_vector_env("CartPole-v1", 2, seed=3)
  with WorkerVectorEnv("CartPole-v1", 2, seed=3) as env:
    np.testing.assert_array_equal(env.reset(), local.reset())
    # As if Ctrl-C hit between sending a step and reading its replies.
    np.copyto(env._workers[0].views["actions"], [1])
    np.copyto(env._workers[1].views["actions"], [0])
    for w in env._workers:
      w.send(worker_protocol.STEP)
    local.step(np.array([1, 0]))
    _same_steps(env, local, [np.array([0, 1]), np.array([1, 1])])


def test_close_kills_a_worker_that_does_not_answer():
  env = WorkerVectorEnv("CartPole-v1", 2)
  env.reset()
  stuck = psutil.Process(env.pids[0])
  os.kill(stuck.pid, signal.SIGSTOP)
  start = time.monotonic()
  env.close(timeout_s=1.0)
  assert time.monotonic() - start < 4
  assert not stuck.is_running() or stuck.status() == psutil.STATUS_ZOMBIE


def test_a_killed_worker_is_an_error_naming_it():
  env = WorkerVectorEnv("CartPole-v1", 3, envs_per_worker=2)
  try:
    env.reset()
    os.kill(env.pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
      env.step(np.zeros(3, np.int64))
    assert time.monotonic() - start < 5
    assert (
      "env worker 1" in str(info.value)
      and "env 2 of 3" in str(info.value)
      and "exit code -9 (SIGKILL)" in str(info.value)
    )
  finally:
    env.close()


PARENT = """
import os, sys, time
import numpy as np
from ingraph_rl.environments import WorkerVectorEnv
env = WorkerVectorEnv("CartPole-v1", 3, envs_per_worker=1)
env.reset()
try:
  # Inside the try: Ctrl-C may come as soon as the pids are out.
  print(" ".join(map(str, env.pids)), flush=True)
  while True:
    env.step(np.zeros(3, np.int64))
    time.sleep(0.01)
except KeyboardInterrupt:
  # Ctrl-C reached the whole group: the workers are still there.
  env.step(np.ones(3, np.int64))
  print("stepped after Ctrl-C", flush=True)
  env.close()
  print("closed", flush=True)
"""


# Ctrl-C at any moment of a call: the parent steps on after each one.
MANY_INTERRUPTS = """
import numpy as np
from ingraph_rl.environments import WorkerVectorEnv
env = WorkerVectorEnv("CartPole-v1", 3, envs_per_worker=1)
want = env.reset(seed=5)
print(" ".join(map(str, env.pids)), flush=True)
for caught in range(1, 26):
  try:
    while True:
      env.step(np.zeros(3, np.int64))
  except KeyboardInterrupt:
    print("caught", caught, flush=True)
# Replies line up with calls: a seeded reset gives the seeded obs.
env.step(np.ones(3, np.int64))
assert np.array_equal(env.reset(seed=5), want)
env.close()
print("closed", flush=True)
"""


def _start_parent(script=PARENT):
  proc = subprocess.Popen(
    [sys.executable, "-c", textwrap.dedent(script)],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
    preexec_fn=default_sigint,  # Even when run with SIGINT ignored.
  )
  line = proc.stdout.readline()
  assert line.strip(), proc.stderr.read()[-3000:]
  return proc, [psutil.Process(int(p)) for p in line.split()]


def test_repeated_ctrl_c_never_desynchronizes_the_workers():
  proc, children = _start_parent(MANY_INTERRUPTS)
  try:
    rng = np.random.default_rng(0)
    for caught in range(1, 26):
      # At a random moment of the stepping loop (workers ignore SIGINT).
      time.sleep(rng.uniform(0.002, 0.02))
      proc.send_signal(signal.SIGINT)
      assert proc.stdout.readline().split() == ["caught", str(caught)]
    proc.wait(timeout=20)  # (communicate would miss buffered lines)
    out, err = proc.stdout.read(), proc.stderr.read()
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
  assert proc.returncode == 0, err[-3000:]
  assert "closed" in out
  gone, alive = psutil.wait_procs(children, timeout=5)
  assert not alive


def _shm_of(pid):
  return glob.glob(f"/dev/shm/{worker_protocol.SHM_PREFIX}{pid}_*")


@pytest.mark.slow
def test_parent_death_leaves_no_workers_and_no_shared_memory():
  proc, children = _start_parent()
  try:
    assert len(children) == 3 and all(c.is_running() for c in children)
    # Names are unlinked as soon as both sides mapped them.
    assert not _shm_of(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, alive
  finally:
    if proc.poll() is None:
      proc.kill()
    for c in children:
      if c.is_running():
        c.kill()
  assert not _shm_of(proc.pid)


@pytest.mark.slow
def test_ctrl_c_does_not_kill_workers_the_parent_closes_them():
  proc, children = _start_parent()
  try:
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=20)
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
  assert proc.returncode == 0, err[-3000:]
  assert "stepped after Ctrl-C" in out and "closed" in out
  gone, alive = psutil.wait_procs(children, timeout=5)
  assert not alive
