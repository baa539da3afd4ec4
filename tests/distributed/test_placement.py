"""PSExecutor shards variables over ps devices greedily by byte size (two
logical CPU devices stand in for two ps tasks)."""

import subprocess
import sys

import pytest

from ingraph_rl.testing.fresh_process import ROOT

SCRIPT = r"""
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.distributed.placement import PSExecutor
from ingraph_rl.environments import make_vector_env
env = make_vector_env("CartPole-v1", 1)
config = IMPALAConfig(num_actions=2, lstm_units=32)
root = IMPALABuilder(config).make_learner(env.observation_space, "placement")
devices = ["/device:CPU:0", "/device:CPU:1"]
ex = PSExecutor(root.component, {}, api_names=["update", "get_weights"],
                ps_devices=devices)
sizes = {d: 0 for d in devices}
for path, var in ex.variables().items():
  assert ex.placement[path] in devices
  assert var.device.endswith(ex.placement[path][len("/device:"):]), \
      (path, var.device)
  sizes[ex.placement[path]] += var.numpy().nbytes
total = sum(sizes.values())
largest = max(v.numpy().nbytes for v in ex.variables().values())
# Greedy by size: the two shards differ by at most the largest variable.
assert abs(sizes[devices[0]] - sizes[devices[1]]) <= largest, sizes
assert min(sizes.values()) > 0
print("ok", sizes)
"""


@pytest.mark.slow
def test_variables_are_sharded_by_size():
  out = subprocess.run(
    [sys.executable, "-c", SCRIPT],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.startswith("ok")
