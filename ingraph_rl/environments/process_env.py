"""Any `VectorEnv` in a subprocess, so its Python code does not hold the
GIL that actor and learner threads need.

    env = ProcessVectorEnv(functools.partial(make_vector_env, "dmlab:...",
                                             4, seed=0))

`make_env` runs in the child (a "spawn" process: forking a process that
runs TF threads is unsafe) and must be picklable, e.g. a module-level
function or a `functools.partial` of one. Commands and results travel over
a local `multiprocessing` pipe between this process and its own child; no
data from the network is ever unpickled.
"""

import multiprocessing

from ingraph_rl.environments.vector_env import StepResult, VectorEnv


def _serve(conn, make_env):
  """The child: builds the env, then answers commands until "close"."""
  try:
    env = make_env()
  except BaseException as e:          # pylint: disable=broad-except
    conn.send(("error", repr(e)))
    conn.close()
    return
  conn.send(("ok", (env.num_envs, env.observation_space, env.action_space)))
  try:
    while True:
      try:
        command, arg = conn.recv()
      except EOFError:                # The parent is gone.
        break
      try:
        if command == "reset":
          conn.send(("ok", env.reset(seed=arg)))
        elif command == "step":
          conn.send(("ok", tuple(env.step(arg))))
        elif command == "close":
          conn.send(("ok", None))
          break
        else:
          conn.send(("error", f"unknown command {command!r}"))
      except KeyboardInterrupt:
        # A terminal's Ctrl-C reaches the whole process group: the parent
        # decides when to stop, so keep serving until it says "close".
        conn.send(("error", "KeyboardInterrupt in the env process"))
      except Exception as e:          # pylint: disable=broad-except
        conn.send(("error", repr(e)))
  finally:
    env.close()
    conn.close()


class ProcessVectorEnv(VectorEnv):
  """Steps `make_env()` (a `VectorEnv`) in a child process."""

  def __init__(self, make_env, start_timeout_s=120.0):
    ctx = multiprocessing.get_context("spawn")
    self._conn, child = ctx.Pipe()
    self._proc = ctx.Process(target=_serve, args=(child, make_env),
                             daemon=True, name="ingraph_rl-env")
    self._proc.start()
    child.close()
    if not self._conn.poll(start_timeout_s):
      self._proc.kill()
      raise RuntimeError(f"the env process did not start within "
                         f"{start_timeout_s} s")
    self.num_envs, self.observation_space, self.action_space = \
        self._result()
    self._closed = False

  def _result(self):
    try:
      status, value = self._conn.recv()
    except EOFError:
      raise RuntimeError(f"the env process exited (code "
                         f"{self._proc.exitcode})") from None
    if status != "ok":
      raise RuntimeError(f"env process: {value}")
    return value

  def _call(self, command, arg=None):
    if self._closed:
      raise RuntimeError("the env process is closed")
    self._conn.send((command, arg))
    return self._result()

  @property
  def pid(self):
    return self._proc.pid

  def reset(self, seed=None):
    return self._call("reset", seed)

  def step(self, actions):
    return StepResult(*self._call("step", actions))

  def close(self, timeout_s=5.0):
    if self._closed:
      return
    try:
      self._call("close")
    except (OSError, RuntimeError):
      pass                            # The child is already gone.
    self._closed = True
    self._proc.join(timeout_s)
    if self._proc.is_alive():
      self._proc.kill()
      self._proc.join(timeout_s)
    self._conn.close()
