"""NaturalGradient: the step F^-1 (-g) by conjugate gradient on
Fisher-vector products, scaled to a KL bound (TRPO's step)."""

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


class NaturalGradient(ComposableOptimizer):
  """Solves (F + damping I) x = -g with `cg_iterations` steps of conjugate
  gradient, F the Hessian of the loss output `kl_key` (the mean KL of the
  batch's old policy to the current one: at the start of the update the
  two agree and the Hessian is the Fisher matrix), then steps by
  x * sqrt(max_kl / (0.5 x^T (F + damping I) x)), so that the quadratic
  model of the KL of the step is `max_kl` (no step unless x^T F x > 0).

  Own stats: "cg_steps" (int32) and "quadratic_kl" (float32, the model's
  KL of the step taken: max_kl, or 0).
  """

  own_stats = {"cg_steps": tf.int32, "quadratic_kl": tf.float32}

  def __init__(
    self,
    max_kl=0.01,
    cg_iterations=10,
    cg_damping=0.1,
    kl_key="kl",
    scope="natural_gradient",
  ):
    super().__init__(scope=scope)
    if not max_kl > 0 or int(cg_iterations) < 1 or cg_damping < 0:
      raise BuildError(
        f"'{scope}': needs max_kl > 0, cg_iterations >= 1, cg_damping >= 0; "
        f"got {max_kl}, {cg_iterations}, {cg_damping}"
      )
    self.max_kl, self.cg_iterations = float(max_kl), int(cg_iterations)
    self.cg_damping, self.kl_key = float(cg_damping), kl_key

  def _check_kl(self, outputs):
    if self.kl_key not in outputs:
      raise BuildError(
        f"'{self.path}': the loss outputs {sorted(outputs)} have no "
        f"'{self.kl_key}' (the KL whose Hessian is the Fisher matrix)"
      )

  def tf_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    outputs, grads = tf_local_gradients(problem.loss, params)
    self._check_kl(outputs)
    grads = [
      tf.zeros_like(p) if g is None else g for g, p in zip(grads, params)
    ]

    def fvp(v):
      hv = solvers.tf_hessian_vector_product(
        lambda: problem.loss()[self.kl_key], params, v
      )
      return [h + self.cg_damping * x for h, x in zip(hv, v)]

    x, steps = solvers.tf_conjugate_gradient(
      fvp, [-g for g in grads], self.cg_iterations
    )
    shs = 0.5 * solvers.dot(x, fvp(x))
    # No step unless the curvature is positive (NaN from an empty batch
    # included: where, not a product, keeps the weights finite).
    ok = shs > 0.0
    scale = tf.sqrt(self.max_kl / tf.where(ok, shs, 1.0))
    for p, xi in zip(params, x):
      p.assign_add(tf.where(ok, scale * xi, tf.zeros_like(xi)))
    quad = tf.cast(tf.where(ok, scale * scale * shs, 0.0), tf.float32)
    return self.merge_stats(outputs, {"cg_steps": steps, "quadratic_kl": quad})

  def torch_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    outputs, grads = torch_local_gradients(problem.loss, params)
    self._check_kl(outputs)
    grads = [
      torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)
    ]

    def fvp(v):
      hv = solvers.torch_hessian_vector_product(
        lambda: problem.loss()[self.kl_key], params, v
      )
      return [h + self.cg_damping * x for h, x in zip(hv, v)]

    x, steps = solvers.torch_conjugate_gradient(
      fvp, [-g.detach() for g in grads], self.cg_iterations
    )
    shs = 0.5 * solvers.dot(x, fvp(x))
    ok = bool(shs > 0)
    scale = torch.sqrt(self.max_kl / shs) if ok else torch.zeros(())
    with torch.no_grad():
      for p, xi in zip(params, x):
        if ok:
          p.add_(scale * xi)
    shs = shs if ok else torch.zeros(())
    outputs = {k: v.detach() for k, v in outputs.items()}
    return self.merge_stats(
      outputs,
      {
        "cg_steps": torch.tensor(steps, dtype=torch.int32),
        "quadratic_kl": (scale * scale * shs).to(torch.float32),
      },
    )
