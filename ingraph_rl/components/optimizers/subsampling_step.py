"""SubsamplingStep: an inner optimizer's update on each minibatch of a
fresh shuffle of the batch (PPO's minibatches)."""

import numpy as np
import tensorflow as tf
import tree

from ingraph_rl.components.optimizers import hash_random
from ingraph_rl.components.optimizers.composable import (
  ComposableOptimizer,
  loss_spec_of,
  tf_loop,
  tf_zeros,
  torch_zero_stats,
)
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class SubsamplingStep(ComposableOptimizer):
  """One call = one epoch: the batch (every leaf of the arguments nest,
  along its leading dim) is shuffled afresh, cut into `num_minibatches`
  contiguous parts of the permutation (sizes differ by at most one; fewer
  parts when the batch is smaller) and `inner` updates on each in turn.
  Every sample is used exactly once per call.

  The shuffle is counter-based (`hash_random`, seeded by `seed`, the
  counter a variable): both executors draw the same minibatches.
  """

  def __init__(self, inner, num_minibatches, seed=0, scope="subsampling_step"):
    super().__init__(scope=scope)
    if not isinstance(inner, ComposableOptimizer):
      raise BuildError(
        f"'{scope}': inner must be an optimizer with the callable form "
        f"(a ComposableOptimizer), got {inner!r}"
      )
    if int(num_minibatches) < 1:
      raise BuildError(
        f"'{scope}': num_minibatches must be >= 1, got {num_minibatches}"
      )
    self.inner = inner
    self.num_minibatches = int(num_minibatches)
    self.seed = int(seed)

  def create_variables(self, input_spaces):
    self.draws = self.add_variable("draws", (), np.int64, trainable=False)

  def _prepare(self, variables):
    return {"inner": self.inner.prepare(variables)}

  def stats_spec(self, loss_spec):
    return self.inner.stats_spec(loss_spec)

  def tf_update(self, problem, settings):
    leaves = tf.nest.flatten(problem.arguments)
    n = tf.shape(leaves[0], out_type=tf.int32)[0]
    k = tf.minimum(self.num_minibatches, n)
    # The draw counter advances after the epoch, depending on its stats:
    # a check that fails in the loss (a refused batch) leaves it as it was.
    draw = self.draws.read_value()
    perm = hash_random.tf_permutation(self.seed, draw, n)
    spec = self.stats_spec(problem.spec)

    def body(j, stats):
      idx = perm[j * n // k : (j + 1) * n // k]
      minibatch = tf.nest.map_structure(
        lambda x: tf.gather(x, idx), problem.arguments
      )
      return j + 1, self.inner.tf_update(
        problem.on(minibatch), settings["inner"]
      )

    _, stats = tf_loop(
      lambda j, stats: j < k, body, (tf.constant(0), tf_zeros(spec)), spec
    )
    with tf.control_dependencies(tf.nest.flatten(stats)):
      advanced = self.draws.assign_add(1)
    with tf.control_dependencies([advanced]):
      return tf.nest.map_structure(tf.identity, stats)

  def torch_update(self, problem, settings):
    n = int(tree.flatten(problem.arguments)[0].shape[0])
    k = min(self.num_minibatches, n)
    if k == 0:  # As in TF: no step, zero stats, the counter advanced.
      stats = torch_zero_stats(self.stats_spec(loss_spec_of(problem)))
      with torch.no_grad():
        self.draws += 1
      return stats
    perm = hash_random.torch_permutation(self.seed, self.draws, n).long()
    for j in range(k):
      idx = perm[j * n // k : (j + 1) * n // k]
      minibatch = tree.map_structure(lambda x, i=idx: x[i], problem.arguments)
      stats = self.inner.torch_update(problem.on(minibatch), settings["inner"])
    with torch.no_grad():
      self.draws += 1
    return stats
