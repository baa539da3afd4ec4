"""A ps task ends once the learner's run has ended (issue 40): it serves
while no learner has come yet and while the learner is up, and exits 0
when the learner, once seen, has been gone `--ps_linger_s`. A real ps
task (`python -m experiments.impala --job_name=ps`); the learner's address
is a plain TCP listener the test opens and closes."""

import json
import socket
import subprocess
import sys
import time

import pytest

from ingraph_rl.distributed.cluster import local_cluster
from ingraph_rl.testing.fresh_process import ROOT


def listen(address):
  host, port = address.rsplit(":", 1)
  sock = socket.socket()
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
  sock.bind((host, int(port)))
  sock.listen()
  return sock


@pytest.mark.slow  # ~20 s: the ps imports TensorFlow.
def test_the_ps_exits_once_the_learner_is_gone():
  cluster = local_cluster(1, 1)
  ps = subprocess.Popen(
    [
      sys.executable,
      "-m",
      "experiments.impala",
      "--job_name=ps",
      "--task=0",
      f"--cluster={json.dumps(cluster)}",
      "--ps_linger_s=2",
    ],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  try:
    for line in ps.stdout:
      if "serving at" in line:
        break
    time.sleep(3)
    assert ps.poll() is None  # No learner yet: it waits for one.
    learner = listen(cluster["learner"][0])
    time.sleep(4)
    assert ps.poll() is None  # The learner is up.
    learner.close()
    t0 = time.monotonic()
    out, _ = ps.communicate(timeout=30)
    assert ps.returncode == 0, out
    assert time.monotonic() - t0 < 15
    assert "has been gone 2 s: its run ended" in out
  finally:
    ps.kill()
