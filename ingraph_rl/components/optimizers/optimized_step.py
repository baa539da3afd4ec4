"""OptimizedStep: a backtracking line search along the step an inner
optimizer proposes (TRPO's line search)."""

import tensorflow as tf

from ingraph_rl.components.optimizers import solvers
from ingraph_rl.components.optimizers.composable import (
  ComposableOptimizer,
  float_paths,
)
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.gradients import (
  tf_local_gradients,
  torch_local_gradients,
)
from ingraph_rl.utils.lazy import torch


class OptimizedStep(ComposableOptimizer):
  """Lets `inner` take its step d from weights w, then tries w + f d for
  f = 1, backtrack, backtrack^2, ... (at most `max_iterations`) and keeps
  the first whose actual improvement L(w) - L(w + f d) is > 0 and at least
  `accept_ratio` times the expected one, f * (-g . d) with g the gradient
  at w (Schulman's TRPO line search). If none is accepted the weights
  stay at w.

  Own stats: "line_search_fraction" (float32; 0 when nothing was
  accepted) and "line_search_steps" (int32, losses evaluated).
  """

  own_stats = {
    "line_search_fraction": tf.float32,
    "line_search_steps": tf.int32,
  }

  def __init__(
    self,
    inner,
    max_iterations=10,
    accept_ratio=0.1,
    backtrack=0.5,
    scope="optimized_step",
  ):
    super().__init__(scope=scope)
    if not isinstance(inner, ComposableOptimizer):
      raise BuildError(
        f"'{scope}': inner must be an optimizer with the callable form "
        f"(a ComposableOptimizer), got {inner!r}"
      )
    if int(max_iterations) < 1 or not 0 < backtrack < 1:
      raise BuildError(
        f"'{scope}': needs max_iterations >= 1 and 0 < backtrack < 1, got "
        f"{max_iterations}, {backtrack}"
      )
    self.inner = inner
    self.max_iterations = int(max_iterations)
    self.accept_ratio, self.backtrack = float(accept_ratio), float(backtrack)

  def _prepare(self, variables):
    return {"inner": self.inner.prepare(variables)}

  def stats_spec(self, loss_spec):
    own = {k: tf.TensorSpec([], v) for k, v in self.own_stats.items()}
    return self.merge_stats(self.inner.stats_spec(loss_spec), own)

  def tf_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    before = [p.read_value() for p in params]
    outputs, grads = tf_local_gradients(problem.loss, params)
    grads = [
      tf.zeros_like(p) if g is None else g for g, p in zip(grads, params)
    ]
    loss0 = outputs["loss"]
    with tf.control_dependencies([loss0] + grads):
      stats = self.inner.tf_update(problem, settings["inner"])
    with tf.control_dependencies(tf.nest.flatten(stats)):
      step = [p.read_value() - b for p, b in zip(params, before)]
    expected = -tf.cast(solvers.dot(grads, step), loss0.dtype)

    def body(k, accepted, fraction):
      f = tf.pow(
        tf.constant(self.backtrack, loss0.dtype), tf.cast(k, loss0.dtype)
      )
      for p, b, s in zip(params, before, step):
        p.assign(b + tf.cast(f, p.dtype) * s)
      actual = loss0 - problem.loss()["loss"]
      ok = (actual > 0) & (actual >= self.accept_ratio * f * expected)
      return k + 1, ok, f

    steps, accepted, fraction = tf.while_loop(
      lambda k, accepted, f: (
        (k < self.max_iterations) & tf.logical_not(accepted)
      ),
      body,
      (tf.constant(0), tf.constant(False), tf.constant(0.0, loss0.dtype)),
      parallel_iterations=1,
    )
    fraction = tf.where(accepted, fraction, 0.0)
    for p, b, s in zip(params, before, step):
      p.assign(b + tf.cast(fraction, p.dtype) * s)
    own = {
      "line_search_fraction": tf.cast(fraction, tf.float32),
      "line_search_steps": steps,
    }
    return self.merge_stats(stats, own)

  def torch_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    before = [p.detach().clone() for p in params]
    outputs, grads = torch_local_gradients(problem.loss, params)
    grads = [
      torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)
    ]
    loss0 = outputs["loss"].detach()
    stats = self.inner.torch_update(problem, settings["inner"])
    with torch.no_grad():
      step = [p - b for p, b in zip(params, before)]
      expected = -solvers.dot(grads, step)
      fraction, steps = 0.0, 0
      while steps < self.max_iterations:
        f = self.backtrack**steps
        for p, b, s in zip(params, before, step):
          p.copy_(b + f * s)
        actual = loss0 - problem.loss()["loss"]
        steps += 1
        if bool(actual > 0) and bool(
          actual >= self.accept_ratio * f * expected
        ):
          fraction = f
          break
      for p, b, s in zip(params, before, step):
        p.copy_(b + fraction * s)
    own = {
      "line_search_fraction": torch.tensor(fraction, dtype=torch.float32),
      "line_search_steps": torch.tensor(steps, dtype=torch.int32),
    }
    return self.merge_stats(stats, own)
