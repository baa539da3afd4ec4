"""ClippedStep: the step an inner optimizer took, clipped (elementwise or
by its global norm)."""

import tensorflow as tf

from ingraph_rl.components.optimizers.composable import (
  ComposableOptimizer,
  float_paths,
)
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class ClippedStep(ComposableOptimizer):
  """Runs `inner`, then moves the weights back so that the step (new -
  old weights) is clipped: each element to [-clip_value, clip_value], or
  the whole step to global norm `clip_norm` (exactly one of the two).
  Works around any inner optimizer (gradient-free ones too). Own stats:
  "step_norm" (float32), the global norm of the step before clipping.
  """

  own_stats = {"step_norm": tf.float32}

  def __init__(
    self, inner, clip_value=None, clip_norm=None, scope="clipped_step"
  ):
    super().__init__(scope=scope)
    if not isinstance(inner, ComposableOptimizer):
      raise BuildError(
        f"'{scope}': inner must be an optimizer with the callable form "
        f"(a ComposableOptimizer), got {inner!r}"
      )
    if (clip_value is None) == (clip_norm is None):
      raise BuildError(f"'{scope}': give exactly one of clip_value, clip_norm")
    bound = clip_value if clip_norm is None else clip_norm
    if not bound > 0:
      raise BuildError(f"'{scope}': the clip must be > 0, got {bound}")
    self.inner = inner
    self.clip_value, self.clip_norm = clip_value, clip_norm

  def _prepare(self, variables):
    return {"inner": self.inner.prepare(variables)}

  def stats_spec(self, loss_spec):
    return self.merge_stats(
      self.inner.stats_spec(loss_spec),
      {"step_norm": tf.TensorSpec([], tf.float32)},
    )

  def tf_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    before = [v.read_value() for v in params]
    stats = self.inner.tf_update(problem, settings["inner"])
    with tf.control_dependencies(tf.nest.flatten(stats)):
      steps = [v.read_value() - b for v, b in zip(params, before)]
    norm = tf.linalg.global_norm(steps)
    if self.clip_norm is not None:
      clipped, _ = tf.clip_by_global_norm(steps, self.clip_norm, norm)
    else:
      clipped = [
        tf.clip_by_value(s, -self.clip_value, self.clip_value) for s in steps
      ]
    for v, b, c in zip(params, before, clipped):
      v.assign(b + c)
    return self.merge_stats(stats, {"step_norm": tf.cast(norm, tf.float32)})

  def torch_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    before = [v.detach().clone() for v in params]
    stats = self.inner.torch_update(problem, settings["inner"])
    with torch.no_grad():
      steps = [v - b for v, b in zip(params, before)]
      norm = torch.sqrt(sum(torch.sum(s * s) for s in steps))
      if self.clip_norm is not None:
        scale = self.clip_norm / torch.maximum(
          norm, torch.tensor(self.clip_norm)
        )
        clipped = [s * scale for s in steps]
      else:
        clipped = [s.clamp(-self.clip_value, self.clip_value) for s in steps]
      for v, b, c in zip(params, before, clipped):
        v.copy_(b + c)
    return self.merge_stats(stats, {"step_norm": norm.to(torch.float32)})
