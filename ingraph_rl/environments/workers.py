"""A `VectorEnv` whose environments step in worker processes.

    env = WorkerVectorEnv("dmlab:seekavoid_arena_01", 8, seed=0)
    env = WorkerVectorEnv("CartPole-v1", 8, seed=0, envs_per_worker=4)

Each worker is a FRESH interpreter (`python -m
ingraph_rl.environments.worker_main`), not a multiprocessing child: spawn
and forkserver children re-import the parent's `__main__` (which imports
tensorflow in our launchers), and real DeepMind Lab segfaults in any process
that has imported tensorflow. A worker imports `ingraph_rl.environments`
(which never imports tensorflow or torch) and builds its envs from data --
`make_vector_env(env_id, num_envs, seed, processes=False, **kwargs)` with
JSON-able kwargs (a `WorkerSpec`) -- not from a pickled callable.

Data path (worker_protocol.py, which the workers import too): every
per-step array (actions in; observations, final observations, rewards,
terminated, truncated, episode returns and lengths out) lives in one
`multiprocessing.shared_memory` segment per worker, preallocated from the
spaces and written in place. The control channel is a socketpair carrying
fixed 13-byte headers ("step", "reset with seed s", "ok"), so a step costs
one tiny message each way per worker. `step` writes all actions, sends to
all workers, then waits for all: the workers step in parallel.

Observation spaces: boxes, or `Dict`s whose leaves are boxes or `TextBox`
(strings travel as UTF-8 in fixed `text_bytes` slots: a longer text is an
error that says so). Dict observations are dicts of [N, ...] arrays,
strings as object arrays of str.

Failures: a worker that dies (a crash, `kill -9`, a segfault) makes the
next (or the pending) call raise `RuntimeError` naming the worker, its envs
and its exit code; it never hangs. A worker that stops answering (a hung
simulator, SIGSTOP) for `step_timeout_s` (default 300 s; experiments:
--env_step_timeout_s) in a step or reset is killed, and the call raises
`WorkerDiedError` naming it, its envs and the timeout. Errors inside a
worker (bad actions, a
failed construction) are raised here with the worker's message, as the
same exception class where it is a common one (ValueError, ImportError,
`EnvironmentNotAvailableError`, ...). Workers ignore SIGINT (a terminal's
Ctrl-C reaches the whole process group; the parent decides when to stop),
and exit when the parent dies (their control socket reaches EOF, and a
watchdog thread sees the parent pid change). `close()` ends every worker
within `timeout_s` (killing those that do not exit); unclosed envs are
closed when they are garbage collected or the interpreter exits.

Shared memory names are unlinked as soon as both sides have mapped the
segment (the memory lives on while mapped), so neither a crash nor a
`kill -9` of the parent leaves segments behind in /dev/shm.

Worker output: a worker's stdout and stderr (DM Lab's levels print maps
and instructions) go to `<log_dir>/<log_name><worker index>.log`, not to
the console; an error about a worker that died ends with the tail of its
log. Without `log_dir` the logs live in a temporary directory that
`close()` removes unless a worker died. DM Lab workers get
`LP_NUM_THREADS=0` unless it is set (OSMesa's llvmpipe then rasterizes on
the calling thread: +27% raw frames/s on 2 cores, issue 39).
"""

import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from typing import NamedTuple

import numpy as np

from ingraph_rl.environments.dmlab import is_dmlab_id
from ingraph_rl.environments.vector_env import StepResult, VectorEnv
from ingraph_rl.environments.worker_protocol import (
  ATTACH,
  CLOSE,
  COMMAND_NAMES,
  ERROR,
  MODULES,
  RESET,
  STEP,
  Layout,
  create_shared_memory,
  interrupts_after,
  lookup_path,
  nest_values,
  recv_message,
  send_message,
  space_from_json,
  unlink_shared_memory,
)
from ingraph_rl.errors import EnvironmentNotAvailableError, SpaceError

WORKER_MODULE = "ingraph_rl.environments.worker_main"
TEXT_BYTES = 512  # Default slot size of a text leaf, in bytes.
MAX_SEED = 2**63 - 1  # Seeds travel in the int64 of a control message.
# How long a step or reset waits for a worker (WorkerVectorEnv.step_timeout_s).
DEFAULT_STEP_TIMEOUT_S = 300.0
LOG_TAIL_BYTES = 3000  # How much of a dead worker's log its error shows.
_ENV_COUNT = itertools.count()  # Default log names: env<k>_worker<i>.log.

# Exceptions re-raised here as their own class (else RuntimeError).
_ERROR_TYPES = {
  cls.__name__: cls
  for cls in (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    NotImplementedError,
    ImportError,
    ModuleNotFoundError,
    RuntimeError,
    SpaceError,
    EnvironmentNotAvailableError,
  )
}


class WorkerSpec(NamedTuple):
  """What one worker builds: `make_vector_env(env_id, num_envs, seed,
  processes=False, **kwargs)`; kwargs must be JSON-able."""

  env_id: str
  num_envs: int
  seed: object = 0
  kwargs: dict = {}


def split_specs(env_id, num_envs, seed=0, envs_per_worker=1, **kwargs):
  """Specs of `ceil(num_envs / envs_per_worker)` workers, env i seeded with
  `seed + i` (worker w's first env index is its seed offset)."""
  num_envs, k = int(num_envs), int(envs_per_worker)
  if num_envs < 1 or k < 1:
    raise ValueError(
      f"num_envs and envs_per_worker must be >= 1, got "
      f"{num_envs} and {envs_per_worker}"
    )
  return [
    WorkerSpec(
      env_id,
      min(k, num_envs - a),
      None if seed is None else int(seed) + a,
      dict(kwargs),
    )
    for a in range(0, num_envs, k)
  ]


# --- the parent side ---------------------------------------------------------


def _exit_text(code):
  if code is None:
    return "still running"
  if code < 0:
    try:
      return f"exit code {code} ({signal.Signals(-code).name})"
    except ValueError:
      pass
  return f"exit code {code}"


def check_seed(seed, num_envs):
  """ValueError unless `seed` is None or an int whose env seeds (seed + i,
  sent as int64) all fit."""
  if seed is None:
    return
  highest = MAX_SEED - (int(num_envs) - 1)
  if (
    isinstance(seed, (bool, np.bool_))
    or not isinstance(seed, (int, np.integer))
    or not 0 <= seed <= highest
  ):
    raise ValueError(
      f"seed must be None or an int in [0, {highest}] (env i is seeded "
      f"seed + i, sent as int64), got {seed!r}"
    )


class WorkerDiedError(RuntimeError):
  """A worker process exited (crashed, was killed) or stopped answering."""


class _Worker:
  """One worker process: its control socket, segment and array views."""

  def __init__(
    self,
    index,
    spec,
    first_env,
    total_envs,
    text_bytes,
    python,
    environ,
    log_path,
  ):
    self.index, self.spec, self.first_env = index, spec, first_env
    self.total_envs = total_envs
    self.text_bytes = text_bytes
    self.sock, self.proc, self.shm, self.views = None, None, None, None
    self.pending = 0  # Replies sent for but not read yet.
    self.levels = None
    self.log_path = log_path
    self.crashed = False
    payload = json.dumps(
      {
        "env_id": spec.env_id,
        "num_envs": int(spec.num_envs),
        "seed": spec.seed,
        "kwargs": spec.kwargs,
        "text_bytes": text_bytes,
      }
    )
    parent, child = socket.socketpair()
    log = open(log_path, "ab")  # noqa: SIM115 (the child keeps it open)
    try:
      self.proc = subprocess.Popen(
        [
          python,
          "-m",
          WORKER_MODULE,
          "--fd",
          str(child.fileno()),
          "--parent_pid",
          str(os.getpid()),
          "--spec",
          payload,
        ],
        pass_fds=(child.fileno(),),
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
      )
    except BaseException:
      parent.close()
      raise
    finally:
      child.close()
      log.close()
    self.sock = parent

  def describe(self):
    last = self.first_env + int(self.spec.num_envs) - 1
    envs = (
      f"env {last}"
      if last == self.first_env
      else f"envs {self.first_env}..{last}"
    )
    pid = self.proc.pid if self.proc is not None else "?"
    levels = sorted(set(self.levels or ()))
    what = self.spec.env_id + (
      f" {levels}"
      if levels and (len(levels) > 1 or levels[0] not in self.spec.env_id)
      else ""
    )
    return (
      f"env worker {self.index} (pid {pid}; {envs} of "
      f"{self.total_envs}: {what})"
    )

  def send(self, code, arg=0, payload=b""):
    with interrupts_after():
      try:
        send_message(self.sock, code, arg, payload)
      except OSError as e:
        raise self.died(
          f"while sending {COMMAND_NAMES.get(code, code)!r}", e
        ) from None
      self.pending += 1

  def died(self, when, cause=None):
    try:
      code = self.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
      code = None
    extra = f" ({cause!r})" if cause is not None else ""
    self.crashed = True  # Its log is kept.
    return WorkerDiedError(
      f"{self.describe()} died {when}: {_exit_text(code)}{extra}"
      + self.log_tail()
    )

  def log_tail(self):
    """The end of this worker's log, as a paragraph of an error."""
    try:
      with open(self.log_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - LOG_TAIL_BYTES))
        tail = f.read().decode("utf-8", "replace")
    except OSError as e:
      return f"\n(its log {self.log_path} is unreadable: {e})"
    if not tail.strip():
      return f"\n(its log {self.log_path} is empty)"
    cut = "..." if size > LOG_TAIL_BYTES else ""
    return f"\n(the end of its log {self.log_path}:)\n{cut}{tail.rstrip()}"

  def receive(self, timeout_s=None, when="while stepping"):
    """The next reply's (arg, payload); raises if the worker died, sent an
    error, or (with `timeout_s`) did not answer in time."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
      # Poll first, so a worker that died without closing its socket (or
      # hangs) is noticed: check its exit status once a second.
      wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
      ready, _, _ = select.select([self.sock], [], [], max(wait, 0.0))
      if ready:
        break
      if self.proc.poll() is not None:
        raise self.died(when)
      if deadline is not None and time.monotonic() >= deadline:
        # Stopped or hung: what it would still do is unknown, so it ends
        # here, and the env's next call finds it dead.
        self.proc.kill()
        raise WorkerDiedError(
          f"{self.describe()} did not answer within {timeout_s:g} s {when} "
          "(killed it)"
        )
    with interrupts_after():
      try:
        message = recv_message(self.sock)
      except OSError as e:
        raise self.died(when, e) from None
      if message is None:
        raise self.died(when)
      self.pending -= 1
    code, arg, payload = message
    if code == ERROR:
      raise self.error(payload)
    return arg, payload

  def error(self, payload):
    info = json.loads(payload.decode())
    cls = _ERROR_TYPES.get(info["type"], RuntimeError)
    message = f"{self.describe()}: {info['type']}: {info['message']}"
    if info.get("traceback"):
      message += "\n(worker traceback)\n" + info["traceback"].rstrip()
    if issubclass(cls, ImportError):
      return cls(message, name=info.get("name"))
    try:
      return cls(message)
    except TypeError:
      return RuntimeError(message)

  def drain(self):
    """Reads the replies an interrupted call (e.g. by Ctrl-C) left unread,
    so the next reply is the next call's."""
    while self.pending:
      try:
        self.receive()
      except WorkerDiedError:
        raise
      except Exception:
        pass  # The old call's error, not this one's.

  def attach(self, layout):
    self.shm = create_shared_memory(layout.size)
    self.views = layout.views(self.shm.buf)
    self.send(ATTACH, layout.size, self.shm.name.encode())

  def release(self):
    self.views = None
    if self.shm is not None:
      unlink_shared_memory(self.shm)
      try:
        self.shm.close()
      except BufferError:
        pass  # A view is still alive; GC frees it.
      self.shm = None


def _shutdown(workers, timeout_s, temp_log_dir=None):
  """Asks every worker to close, waits up to `timeout_s` in all, kills the
  rest; releases sockets and shared memory; removes `temp_log_dir` unless a
  worker died. Safe to call twice."""
  for w in workers:
    if w.proc is not None and w.proc.poll() is None and w.sock is not None:
      try:
        send_message(w.sock, CLOSE)
      except OSError:
        pass
  deadline = time.monotonic() + timeout_s
  for w in workers:
    if w.proc is None:
      continue
    try:
      w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      w.proc.kill()
      try:
        w.proc.wait(timeout=5.0)
      except subprocess.TimeoutExpired:
        pass
  for w in workers:
    if w.sock is not None:
      w.sock.close()
      w.sock = None
    w.release()
  if temp_log_dir is not None and not any(w.crashed for w in workers):
    shutil.rmtree(temp_log_dir, ignore_errors=True)


def _package_root():
  import ingraph_rl

  return os.path.dirname(os.path.dirname(os.path.abspath(ingraph_rl.__file__)))


class WorkerVectorEnv(VectorEnv):
  """`num_envs` envs of `env_id` stepped in worker processes.

  Args:
    env_id: any `make_vector_env` id ("dmlab:<level>", "CartPole-v1",
      "atari:pong", ...); each worker builds `make_vector_env(env_id, k,
      seed + first env index, processes=False, **env_kwargs)`.
    num_envs: number of envs in all.
    seed: env i is seeded with `seed + i` (None: unseeded).
    envs_per_worker: k envs per worker process (default 1, one process per
      env as scalable_agent does; the last worker may get fewer).
    text_bytes: shared-memory slot size of each text observation.
    start_timeout_s: how long workers may take to build their envs.
    log_dir: where the workers' stdout and stderr go
      (`<log_dir>/<log_name><worker index>.log`, appended to); None: a
      temporary directory, removed at close unless a worker died.
    log_name: the log files' prefix (default `env<k>_worker`, k counting
      this process's WorkerVectorEnvs).
    load_progress: a `LoadProgress` told of each worker whose envs are
      built (DM Lab workers: levels loaded), e.g. shared by the vector
      envs of several actors built at once.
    **env_kwargs: JSON-able keyword arguments of the env (e.g.
      `num_action_repeats=4`, `lab_module="some.fake_module"`).

  `WorkerVectorEnv.from_specs([WorkerSpec(...), ...])` makes one worker per
  spec (the workers' envs, concatenated in order, are env 0..N-1; their
  spaces must agree). `levels` holds each env's DM Lab level (None for
  envs without levels); `pids` the worker pids; `worker_modules()` the
  `sys.modules` keys of each worker.

  `step_timeout_s`: how long a step or reset waits for a worker before
  it is declared dead (a hung or stopped simulator); generous by default,
  as a DM Lab reset may load a level. Set it per env (None: forever).
  """

  step_timeout_s = DEFAULT_STEP_TIMEOUT_S

  def __init__(
    self,
    env_id,
    num_envs,
    seed=0,
    *,
    envs_per_worker=1,
    text_bytes=TEXT_BYTES,
    start_timeout_s=300.0,
    log_dir=None,
    log_name=None,
    load_progress=None,
    **env_kwargs,
  ):
    self._init(
      split_specs(env_id, num_envs, seed, envs_per_worker, **env_kwargs),
      text_bytes,
      start_timeout_s,
      log_dir,
      log_name,
      load_progress,
    )

  @classmethod
  def from_specs(
    cls,
    specs,
    *,
    text_bytes=TEXT_BYTES,
    start_timeout_s=300.0,
    log_dir=None,
    log_name=None,
    load_progress=None,
  ):
    env = cls.__new__(cls)
    env._init(
      list(specs), text_bytes, start_timeout_s, log_dir, log_name, load_progress
    )
    return env

  def _init(
    self, specs, text_bytes, start_timeout_s, log_dir, log_name, load_progress
  ):
    self._workers, self._closed = [], True
    self._temp_log_dir = None
    self._load_progress = load_progress
    if not specs:
      raise ValueError("WorkerVectorEnv needs at least one worker spec")
    for spec in specs:
      try:
        json.dumps(spec.kwargs)
        json.dumps(spec.seed)
      except (TypeError, ValueError) as e:
        raise TypeError(
          f"worker env kwargs must be JSON-able (the worker "
          f"builds its env from data), got {spec.kwargs!r} "
          f"seed {spec.seed!r}: {e}"
        ) from None
      if int(spec.num_envs) < 1:
        raise ValueError(f"a worker needs num_envs >= 1, got {spec}")
    self.specs = tuple(
      WorkerSpec(s.env_id, int(s.num_envs), s.seed, dict(s.kwargs))
      for s in specs
    )
    self.env_id = self.specs[0].env_id
    self.num_envs = sum(s.num_envs for s in self.specs)
    self.text_bytes = int(text_bytes)
    environ = dict(os.environ)
    # Workers import ingraph_rl from wherever this process did (also when
    # run with `python -I` or from another directory).
    root = _package_root()
    old = environ.get("PYTHONPATH", "")
    environ["PYTHONPATH"] = os.pathsep.join([root] + ([old] if old else []))
    if any(is_dmlab_id(s.env_id) for s in self.specs):
      # llvmpipe rasterizes on the stepping thread, not one thread per core.
      environ.setdefault("LP_NUM_THREADS", "0")
    if log_dir is None:
      log_dir = self._temp_log_dir = tempfile.mkdtemp(
        prefix="ingraph_rl_env_workers_"
      )
    else:
      os.makedirs(log_dir, exist_ok=True)
    if log_name is None:
      log_name = f"env{next(_ENV_COUNT)}_worker"
    self.log_dir = os.path.abspath(log_dir)
    firsts = np.cumsum([0] + [s.num_envs for s in self.specs])[:-1]
    self._finalizer = None
    try:
      # Closes the workers when the env is garbage collected, or at exit.
      self._finalizer = weakref.finalize(
        self, _shutdown, self._workers, 5.0, self._temp_log_dir
      )
      for i, (spec, first) in enumerate(zip(self.specs, firsts)):
        self._workers.append(
          _Worker(
            i,
            spec,
            int(first),
            self.num_envs,
            self.text_bytes,
            sys.executable,
            environ,
            os.path.join(self.log_dir, f"{log_name}{i}.log"),
          )
        )
      self._closed = False
      self._start(start_timeout_s)
    except BaseException:
      self.close()
      raise

  def _start(self, timeout_s):
    hellos = self._hellos(timeout_s)
    first = hellos[0]
    self.observation_space = space_from_json(first["observation_space"])
    self.action_space = space_from_json(first["action_space"])
    for w, hello in zip(self._workers, hellos):
      w.levels = hello.get("levels")
      for key, mine in (
        ("observation_space", self.observation_space),
        ("action_space", self.action_space),
      ):
        theirs = space_from_json(hello[key])
        if theirs != mine:
          raise SpaceError(
            f"{w.describe()} has {key} {theirs!r}, but "
            f"worker 0 has {mine!r}: all envs of a "
            f"WorkerVectorEnv need the same spaces"
          )
      if hello["num_envs"] != w.spec.num_envs:
        raise RuntimeError(f"{w.describe()} built {hello['num_envs']} envs")
    levels = [w.levels for w in self._workers]
    self.levels = (
      None
      if any(lv is None for lv in levels)
      else tuple(name for lv in levels for name in lv)
    )
    self._layouts = [
      Layout(
        w.spec.num_envs,
        self.observation_space,
        self.action_space,
        self.text_bytes,
      )
      for w in self._workers
    ]
    for w, layout in zip(self._workers, self._layouts):
      w.attach(layout)
    for w in self._workers:
      w.receive(timeout_s, when="while attaching its shared memory")
      unlink_shared_memory(w.shm)  # The worker unlinked it already.
    self._leaves = self._layouts[0].leaves
    space = self.action_space
    self._action_shape = (self.num_envs,) + tuple(space.shape)
    self._int_actions = space.dtype.kind in "iu"
    self._action_low = space.low if self._int_actions else None
    self._action_high = space.high if self._int_actions else None

  def _hellos(self, timeout_s):
    """Each worker's hello, read as they come (the workers build their
    envs at once), telling `load_progress` of each."""
    when = "while building its envs"
    deadline = time.monotonic() + timeout_s
    waiting, hellos = list(self._workers), {}
    while waiting:
      left = deadline - time.monotonic()
      ready, _, _ = select.select(
        [w.sock for w in waiting], [], [], max(0.0, min(1.0, left))
      )
      done = [w for w in waiting if w.sock in ready]
      if not done:
        for w in waiting:
          if w.proc.poll() is not None:
            raise w.died(when)
        if left <= 0:
          raise WorkerDiedError(
            f"{waiting[0].describe()} did not answer within "
            f"{timeout_s:.0f} s {when}"
          )
      for w in done:
        w.pending += 1  # The hello.
        _, payload = w.receive(max(left, 1.0), when=when)
        hellos[w.index] = json.loads(payload.decode())
        waiting.remove(w)
        if self._load_progress is not None:
          self._load_progress.loaded(w.spec.num_envs)
    return [hellos[w.index] for w in self._workers]

  @property
  def pids(self):
    return [w.proc.pid for w in self._workers]

  @property
  def num_workers(self):
    return len(self._workers)

  def worker_of_env(self, i):
    """Index of the worker that steps env i."""
    for w in self._workers:
      if w.first_env <= i < w.first_env + w.spec.num_envs:
        return w.index
    raise IndexError(f"env {i} out of range [0, {self.num_envs})")

  # --- calls -------------------------------------------------------------

  def _check_open(self):
    if self._closed:
      raise RuntimeError("WorkerVectorEnv is closed")

  def _drain(self):
    """Reads the replies of a call that was interrupted (e.g. by Ctrl-C)
    before its replies were read; after this, workers are idle."""
    self._check_open()
    for w in self._workers:
      if w.pending:
        w.drain()

  def _call_all(self, code, args=None, when="while stepping"):
    """Sends `code` to every worker (all first), then waits for all."""
    self._drain()
    for i, w in enumerate(self._workers):
      w.send(code, 0 if args is None else args[i])
    replies = []
    for w in self._workers:
      replies.append(w.receive(self.step_timeout_s, when=when))
    return replies

  def reset(self, seed=None):
    # Checked before any worker is sent a seed: all reset, or none.
    check_seed(seed, self.num_envs)
    args = [
      -1 if seed is None else int(seed) + w.first_env for w in self._workers
    ]
    self._call_all(RESET, args, when="while resetting")
    return self._gather_obs()

  def step(self, actions):
    actions = np.asarray(actions)
    if actions.shape != self._action_shape:
      raise ValueError(
        f"expected actions of shape {self._action_shape}, got {actions.shape}"
      )
    if self._int_actions:
      if actions.dtype.kind not in "iub":
        raise ValueError(
          f"expected {self.num_envs} integer actions, got dtype {actions.dtype}"
        )
      low, high = self._action_low, self._action_high
      if (low is not None and np.any(actions < low)) or (
        high is not None and np.any(actions >= high)
      ):
        raise ValueError(
          f"actions must be in [{low}, {high}), got {actions.tolist()}"
        )
    self._drain()  # Idle workers: actions can be written.
    for w in self._workers:
      a = w.first_env
      np.copyto(
        w.views["actions"], actions[a : a + w.spec.num_envs], casting="unsafe"
      )
    self._call_all(STEP)
    ws = self._workers

    def cat(name):
      if len(ws) == 1:
        return ws[0].views[name].copy()
      return np.concatenate([w.views[name] for w in ws])

    terminated, truncated = cat("terminated"), cat("truncated")
    obs = self._gather_obs()
    done = terminated | truncated
    final_obs = self._final_obs(obs, done) if done.any() else obs
    return StepResult(
      obs,
      cat("rewards"),
      terminated,
      truncated,
      final_obs,
      cat("episode_returns"),
      cat("episode_lengths"),
    )

  def _gather_obs(self):
    """The observation [N, ...] (one copy out of the segments)."""
    values = []
    for leaf in self._leaves:
      if leaf.is_text:
        parts = [
          layout.read_text(w.views, "obs", leaf)
          for w, layout in zip(self._workers, self._layouts)
        ]
      else:
        parts = [w.views[("obs", leaf.name)] for w in self._workers]
      values.append(
        parts[0].copy() if len(parts) == 1 else np.concatenate(parts)
      )
    return nest_values(self._leaves, values)

  def _final_obs(self, obs, done):
    """obs, with the rows of ended envs from the workers' "final" arrays
    (workers write only those rows)."""
    values = []
    flat = (
      [obs]
      if self._leaves[0].path == ()
      else [lookup_path(obs, leaf.path) for leaf in self._leaves]
    )
    for leaf, value in zip(self._leaves, flat):
      value = value.copy()
      for w, layout in zip(self._workers, self._layouts):
        a, b = w.first_env, w.first_env + w.spec.num_envs
        rows = done[a:b]
        if not rows.any():
          continue
        if leaf.is_text:
          src = layout.read_text(w.views, "final", leaf, rows)
        else:
          src = w.views[("final", leaf.name)]
        value[a:b][rows] = src[rows]
      values.append(value)
    return nest_values(self._leaves, values)

  def worker_modules(self):
    """The `sys.modules` keys of each worker process (sorted lists)."""
    replies = self._call_all(MODULES, when="while listing its modules")
    return [json.loads(payload.decode()) for _, payload in replies]

  def close(self, timeout_s=5.0):
    """Ends every worker within `timeout_s` (those that do not exit are
    killed) and releases the shared memory. Idempotent."""
    if self._closed and not self._workers:
      return
    self._closed = True
    workers, self._workers = self._workers, []
    if self._finalizer is not None:
      self._finalizer.detach()
    _shutdown(workers, timeout_s, self._temp_log_dir)

  def __repr__(self):
    return (
      f"WorkerVectorEnv({self.env_id!r}, num_envs={self.num_envs}, "
      f"workers={len(self._workers)})"
    )
