"""MultiStep: an inner optimizer's update k times, the loss evaluated anew
on the weights each step left (PPO's epochs)."""

import tensorflow as tf

from ingraph_rl.components.optimizers.composable import (
  ComposableOptimizer,
  tf_loop,
  tf_zeros,
)
from ingraph_rl.errors import BuildError


class MultiStep(ComposableOptimizer):
  """`num_steps` updates of `inner` in one `tf.while_loop`.

  Early stop: with `stop_key`, the loop ends after a step whose stats
  (the inner's, e.g. the loss output "approx_kl" of its last minibatch)
  have `stats[stop_key] > stop_above`, as CleanRL's PPO checks
  `target_kl` after each epoch. Own stats: "steps" (int32), the steps
  run.
  """

  own_stats = {"steps": tf.int32}

  def __init__(
    self,
    inner,
    num_steps,
    stop_key=None,
    stop_above=None,
    scope="multi_step",
  ):
    super().__init__(scope=scope)
    if not isinstance(inner, ComposableOptimizer):
      raise BuildError(
        f"'{scope}': inner must be an optimizer with the callable form "
        f"(a ComposableOptimizer), got {inner!r}"
      )
    if int(num_steps) < 1:
      raise BuildError(f"'{scope}': num_steps must be >= 1, got {num_steps}")
    if (stop_key is None) != (stop_above is None):
      raise BuildError(
        f"'{scope}': give both stop_key and stop_above, or neither"
      )
    self.inner = inner
    self.num_steps = int(num_steps)
    self.stop_key = stop_key
    self.stop_above = None if stop_above is None else float(stop_above)

  def _prepare(self, variables):
    return {"inner": self.inner.prepare(variables)}

  def stats_spec(self, loss_spec):
    return self.merge_stats(
      self.inner.stats_spec(loss_spec), {"steps": tf.TensorSpec([], tf.int32)}
    )

  def _check_stop_key(self, stats):
    if self.stop_key is not None and self.stop_key not in stats:
      raise BuildError(
        f"'{self.path}': stop_key '{self.stop_key}' is not among the inner "
        f"optimizer's stats {sorted(stats)}"
      )

  def tf_update(self, problem, settings):
    spec = self.inner.stats_spec(problem.spec)
    self._check_stop_key(spec)

    def body(i, stats, stop):
      stats = self.inner.tf_update(problem, settings["inner"])
      if self.stop_key is not None:
        stop = tf.reshape(stats[self.stop_key] > self.stop_above, [])
      return i + 1, stats, stop

    steps, stats, _ = tf_loop(
      lambda i, stats, stop: (i < self.num_steps) & tf.logical_not(stop),
      body,
      (tf.constant(0), tf_zeros(spec), tf.constant(False)),
      spec,
    )
    return self.merge_stats(stats, {"steps": steps})

  def torch_update(self, problem, settings):
    import torch

    steps = 0
    while steps < self.num_steps:
      stats = self.inner.torch_update(problem, settings["inner"])
      steps += 1
      self._check_stop_key(stats)
      if self.stop_key is not None and bool(
        stats[self.stop_key] > self.stop_above
      ):
        break
    return self.merge_stats(
      stats, {"steps": torch.tensor(steps, dtype=torch.int32)}
    )
