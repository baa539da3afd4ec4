"""The env worker process of `WorkerVectorEnv` (see workers.py):

    python -m ingraph_rl.environments.worker_main --fd=<socket fd> \
        --parent_pid=<pid> --spec='{"env_id": ..., "num_envs": ..., ...}'

It builds `make_vector_env(env_id, num_envs, seed, processes=False,
**kwargs)`, sends a hello (num_envs, spaces, levels) and then answers the
parent's commands until "close" or until the parent is gone. It imports
neither tensorflow nor torch (DM Lab crashes next to tensorflow).
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback


def _watch_parent(parent_pid, period_s=1.0):
  """Exits this process once the parent is gone, even while an env call
  blocks the main thread (a dead parent's socket EOF is seen only between
  calls)."""

  def loop():
    while True:
      time.sleep(period_s)
      if os.getppid() != parent_pid:
        os._exit(3)

  threading.Thread(target=loop, daemon=True, name="parent-watch").start()


class Server:
  """Answers one parent's commands over `sock` for one vector env."""

  def __init__(self, sock, spec):
    from ingraph_rl.environments import worker_protocol

    self.protocol = worker_protocol
    self.sock, self.spec = sock, spec
    self.env = None
    self.layout = self.views = self.shm = None

  def build(self):
    from ingraph_rl.environments import make_vector_env

    spec = self.spec
    self.env = make_vector_env(
      spec["env_id"],
      spec["num_envs"],
      seed=spec["seed"],
      processes=False,
      **spec["kwargs"],
    )
    levels = getattr(self.env, "levels", None)
    hello = {
      "num_envs": int(self.env.num_envs),
      "observation_space": self.protocol.space_to_json(
        self.env.observation_space
      ),
      "action_space": self.protocol.space_to_json(self.env.action_space),
      "levels": None if levels is None else list(levels),
    }
    self.reply(os.getpid(), json.dumps(hello).encode())

  def reply(self, arg=0, payload=b""):
    self.protocol.send_message(self.sock, self.protocol.OK, arg, payload)

  def attach(self, name, size):
    self.layout = self.protocol.Layout(
      self.env.num_envs,
      self.env.observation_space,
      self.env.action_space,
      self.spec["text_bytes"],
    )
    if self.layout.size != size:
      raise RuntimeError(
        f"the parent's layout has {size} bytes, ours {self.layout.size}"
      )
    self.shm = self.protocol.attach_shared_memory(name)
    # Both sides have it mapped: the name is no longer needed, and
    # unlinking now leaves nothing behind whoever dies first.
    self.protocol.unlink_shared_memory(self.shm)
    self.views = self.layout.views(self.shm.buf)

  def step(self):
    views, layout = self.views, self.layout
    result = self.env.step(views["actions"].copy())
    layout.write_obs(views, "obs", result.obs)
    done = (result.terminated | result.truncated).astype(bool)
    if done.any():
      layout.write_obs(views, "final", result.final_obs, rows=done)
    views["rewards"][...] = result.rewards
    views["terminated"][...] = result.terminated
    views["truncated"][...] = result.truncated
    views["episode_returns"][...] = result.episode_returns
    views["episode_lengths"][...] = result.episode_lengths

  def serve(self):
    p = self.protocol
    while True:
      message = p.recv_message(self.sock)
      if message is None:
        return  # The parent is gone.
      code, arg, payload = message
      try:
        if code == p.STEP:
          self.step()
          self.reply()
        elif code == p.RESET:
          obs = self.env.reset(seed=None if arg < 0 else int(arg))
          self.layout.write_obs(self.views, "obs", obs)
          self.reply()
        elif code == p.ATTACH:
          self.attach(payload.decode(), arg)
          self.reply()
        elif code == p.MODULES:
          self.reply(0, json.dumps(sorted(sys.modules)).encode())
        elif code == p.CLOSE:
          self.close()
          return
        else:
          raise ValueError(f"unknown command {code}")
      except Exception as e:
        p.send_message(
          self.sock, p.ERROR, 0, p.error_payload(e, traceback.format_exc())
        )

  def close(self):
    env, self.env = self.env, None
    self.views = None
    if env is not None:
      env.close()
    if self.shm is not None:
      try:
        self.shm.close()
      except BufferError:
        pass


def main(argv=None):
  # A terminal's Ctrl-C reaches the whole process group: the parent
  # decides when its workers stop.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  parser = argparse.ArgumentParser()
  parser.add_argument("--fd", type=int, required=True)
  parser.add_argument("--parent_pid", type=int, required=True)
  parser.add_argument("--spec", required=True)
  args = parser.parse_args(argv)
  _watch_parent(args.parent_pid)
  sock = socket.socket(fileno=args.fd)
  spec = json.loads(args.spec)
  from ingraph_rl.environments import worker_protocol

  server = None
  try:
    server = Server(sock, spec)
    server.build()
  except BaseException as e:
    try:
      worker_protocol.send_message(
        sock,
        worker_protocol.ERROR,
        0,
        worker_protocol.error_payload(e, traceback.format_exc()),
      )
    except OSError:
      pass
    if server is not None:
      server.close()
    return 1
  try:
    server.serve()
  finally:
    server.close()
    try:
      worker_protocol.send_message(sock, worker_protocol.OK)  # Closed.
    except OSError:
      pass
    sock.close()
  return 0


if __name__ == "__main__":
  code = main()
  sys.stdout.flush()
  sys.stderr.flush()
  # The env is closed: skip the interpreter's teardown (numpy, gymnasium,
  # ...), which makes a parent's close() wait ~0.1 s per worker on 2 cores.
  os._exit(code)
