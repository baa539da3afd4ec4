"""Variables on parameter-server tasks, sharded by size.

`PSExecutor` is a `TFExecutor` that puts each new variable on the ps task
holding the fewest bytes so far (greedy load balancing, like TF1's
`GreedyLoadBalancingStrategy` by byte size); computation stays where the
device map or the current device puts it (the learner). Without ps tasks
it is a plain `TFExecutor`.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.executors.tensorflow import TFExecutor


class PSExecutor(TFExecutor):
  """TFExecutor(..., ps_devices=[...])."""

  def __init__(self, root, input_spaces, *, ps_devices=(), **kwargs):
    self.ps_devices = list(ps_devices)
    self.ps_bytes = [0] * len(self.ps_devices)
    self.placement = {}  # Variable path -> device.
    super().__init__(root, input_spaces, **kwargs)

  def make_variable(self, component, spec):
    if not self.ps_devices:
      return super().make_variable(component, spec)
    size = (
      int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
    )
    i = int(np.argmin(self.ps_bytes))
    self.ps_bytes[i] += max(size, 1)
    self.placement[spec.path] = self.ps_devices[i]
    with tf.device(self.ps_devices[i]):
      return super().make_variable(component, spec)
