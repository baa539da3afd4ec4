"""Evolutionary: an update from antithetic random perturbations of the
weights, with loss evaluations only (no gradients)."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.optimizers import hash_random
from ingraph_rl.components.optimizers.composable import (
  ComposableOptimizer,
  float_paths,
)
from ingraph_rl.core import api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class Evolutionary(ComposableOptimizer):
  """For each of `num_samples` noise vectors e ~ N(0, I) (over all float
  weights), the loss at w + noise_std * e and at w - noise_std * e; then
  w <- w + learning_rate * mean(c * e), with c = sign(L- - L+) (`shaping=
  "sign"`, TensorForce's rule: scale-free) or c = (L- - L+) / (2 *
  noise_std) (`"difference"`: the antithetic estimate of -gradient, as
  in OpenAI's evolution strategies). The noise is counter-based
  (`hash_random`): both executors draw the same.

  Own stats: "perturbed_loss" (float32, the mean loss of the perturbed
  weights).
  """

  own_stats = {"perturbed_loss": tf.float32}

  def __init__(
    self,
    learning_rate,
    num_samples=8,
    noise_std=0.05,
    shaping="sign",
    seed=0,
    scope="evolutionary",
  ):
    super().__init__(scope=scope)
    if not learning_rate > 0 or not noise_std > 0 or int(num_samples) < 1:
      raise BuildError(
        f"'{scope}': needs learning_rate > 0, noise_std > 0, num_samples "
        f">= 1; got {learning_rate}, {noise_std}, {num_samples}"
      )
    if shaping not in ("sign", "difference"):
      raise BuildError(
        f"'{scope}': shaping must be 'sign' or 'difference', got {shaping!r}"
      )
    self.learning_rate, self.noise_std = float(learning_rate), float(noise_std)
    self.num_samples, self.shaping, self.seed = (
      int(num_samples),
      shaping,
      int(seed),
    )

  def create_variables(self, input_spaces):
    self.draws = self.add_variable("draws", (), np.int64, trainable=False)

  @api
  def get_iterations(self):
    return self._graph_fn_draws()

  @graph_fn
  def _graph_fn_draws(self):
    return tf.identity(self.draws)

  @_graph_fn_draws.torch
  def _graph_fn_draws(self):
    return self.draws.clone()

  def _weight(self, plus, minus, xp_sign):
    if self.shaping == "sign":
      return xp_sign(minus - plus)
    return (minus - plus) / (2.0 * self.noise_std)

  def tf_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    sizes = [int(np.prod(p.shape)) for p in params]
    before = [p.read_value() for p in params]
    outputs = problem.loss()
    draw = self.draws.read_value()  # Advanced after the update (below).

    def noise(s):
      flat = hash_random.tf_normal(
        self.seed, draw, sum(sizes), tf.cast(s, tf.int64)
      )
      parts = tf.split(flat, sizes)
      return [
        tf.cast(tf.reshape(e, p.shape), p.dtype) for e, p in zip(parts, params)
      ]

    def loss_at(eps, sign):
      for p, b, e in zip(params, before, eps):
        p.assign(b + sign * self.noise_std * e)
      return tf.cast(problem.loss()["loss"], tf.float32)

    def body(s, total, spread):
      eps = noise(s)
      plus = loss_at(eps, 1.0)
      minus = loss_at(eps, -1.0)
      c = self._weight(plus, minus, tf.sign)
      total = [t + tf.cast(c, t.dtype) * e for t, e in zip(total, eps)]
      return s + 1, total, spread + plus + minus

    with tf.control_dependencies(tf.nest.flatten(outputs)):
      zeros = [tf.zeros_like(b) for b in before]
    _, total, spread = tf.while_loop(
      lambda s, total, spread: s < self.num_samples,
      body,
      (tf.constant(0), zeros, tf.constant(0.0)),
      parallel_iterations=1,
    )
    scale = self.learning_rate / self.num_samples
    writes = [p.assign(b + scale * t) for p, b, t in zip(params, before, total)]
    with tf.control_dependencies(writes):
      writes.append(self.draws.assign_add(1))
    with tf.control_dependencies(writes):
      perturbed = spread / (2.0 * self.num_samples)
    return self.merge_stats(outputs, {"perturbed_loss": perturbed})

  def torch_update(self, problem, settings):
    params = problem.params(float_paths(problem.variables))
    sizes = [p.numel() for p in params]
    with torch.no_grad():
      before = [p.detach().clone() for p in params]
      outputs = {k: v.detach() for k, v in problem.loss().items()}
      draw = self.draws.clone()
      total = [torch.zeros_like(b) for b in before]
      spread = torch.tensor(0.0)
      for s in range(self.num_samples):
        flat = hash_random.torch_normal(self.seed, draw, sum(sizes), s)
        eps = [
          e.reshape(b.shape).to(b.dtype)
          for e, b in zip(torch.split(flat, sizes), before)
        ]
        losses = []
        for sign in (1.0, -1.0):
          for p, b, e in zip(params, before, eps):
            p.copy_(b + sign * self.noise_std * e)
          losses.append(problem.loss()["loss"].to(torch.float32))
        c = self._weight(losses[0], losses[1], torch.sign)
        total = [t + c.to(t.dtype) * e for t, e in zip(total, eps)]
        spread = spread + losses[0] + losses[1]
      scale = self.learning_rate / self.num_samples
      for p, b, t in zip(params, before, total):
        p.copy_(b + scale * t)
      self.draws += 1
    perturbed = spread / (2.0 * self.num_samples)
    return self.merge_stats(outputs, {"perturbed_loss": perturbed})
