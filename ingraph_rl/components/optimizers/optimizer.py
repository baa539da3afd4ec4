"""The optimizer base: gradients of a loss w.r.t. a component's variables,
optional global-norm clipping, and one update rule per subclass.

    class Regression(Component):
      def __init__(self):
        super().__init__(scope="regression")
        self.net = Dense(1)
        self.optimizer = Adam(learning_rate=1e-3)

      @api
      def update(self, x, y):
        loss = self._graph_fn_loss(self.net.call(x), y)
        stats = self.optimizer.step(loss, self.net.variables())
        return {"loss": loss, "grad_norm": stats["grad_norm"]}

The whole `update` is one graph: forward pass, gradients, clipping, apply.

The callable form (`composable.py`): the optimizer gets the loss API itself
and evaluates it, so optimizers compose (PPO's epochs x minibatches of Adam
steps as ONE graph call; TRPO's line search around a natural gradient):

    class PPOLearner(Component):
      def __init__(self):
        super().__init__(scope="learner")
        self.net = Dense(1)
        self.optimizer = MultiStep(
            SubsamplingStep(Adam(PolynomialDecay(3e-4, 0.0, total_steps),
                                 clip_global_norm=0.5), num_minibatches=4),
            num_steps=10, stop_key="approx_kl", stop_above=0.015)

      @api
      def loss(self, batch):        # ONE argument: a nest, batch-major
        return self._graph_fn_loss(self.net.call(batch["x"]), batch["y"])

      @api
      def update(self, x, y):
        return self.optimizer.minimize(
            inline(self.loss), self.net.variables(), {"x": x, "y": y})

`_graph_fn_loss` returns a dict with the scalar "loss" and any other
outputs (e.g. "approx_kl"); `update` returns those of the last minibatch
step plus each optimizer's stats ("grad_norm", "steps").
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.optimizers.composable import ComposableOptimizer
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.core.variables import to_torch_layout
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.checks import in_build_pass, tf_check, torch_check
from ingraph_rl.executors.gradients import (
  tf_gradients,
  tf_local_gradients,
  torch_gradients,
  torch_local_gradients,
)
from ingraph_rl.spaces import Dict
from ingraph_rl.utils.lazy import torch

NON_FINITE = (
  "the loss or its gradients are not finite (NaN or inf); no weight, "
  "slot or step count was written"
)


class Optimizer(ComposableOptimizer):
  """`step(loss, variables)` -> {"grad_norm": global norm before clipping};
  `minimize(loss_fn, variables, arguments)` -> the loss outputs and
  "grad_norm" (float32): one step, in the callable form (see module doc);
  `get_iterations()` -> int64 steps taken.

  `variables` is the output of a component's `variables()` API. Variables
  the loss does not reach get no update. Subclasses implement `_slots`
  (per-variable state) and the update rule in both backends.

  Args:
    learning_rate: a float, or a schedule component (e.g.
      `explorations.PolynomialDecay(4.8e-4, 0.0, steps)`, IMPALA's) whose
      `value(step)` is read at the optimizer's step count before each update.
    clip_global_norm: if set, gradients are scaled by
      clip / max(global_norm, clip) (tf.clip_by_global_norm).
  """

  variable_args = ("variables",)
  slot_names = ()
  own_stats = {"grad_norm": tf.float32}

  def __init__(self, learning_rate, clip_global_norm=None, scope="optimizer"):
    super().__init__(scope=scope)
    if isinstance(learning_rate, Component):
      self.lr_schedule = learning_rate
      self.learning_rate = None
    else:
      if learning_rate <= 0:
        raise BuildError(f"'{scope}': learning_rate must be > 0")
      self.lr_schedule = None
      self.learning_rate = float(learning_rate)
    self.clip_global_norm = clip_global_norm

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "variables", Dict)
    self.paths = sorted(space.keys())
    self.iterations = self.add_variable(
      "iterations", (), np.int64, trainable=False
    )
    # Slots keep the variable's TF-layout shape in both backends.
    self.slots = {
      name: [
        self.add_variable(
          f"{name}.{p.replace('/', '.')}",
          space[p].shape,
          space[p].dtype,
          trainable=False,
        )
        for p in self.paths
      ]
      for name in self.slot_names
    }

  @api
  def step(self, loss, variables):
    lr = (
      self.learning_rate
      if self.lr_schedule is None
      else self.lr_schedule.value(self._graph_fn_iterations())
    )
    return self._graph_fn_step(loss, variables, lr)

  def _prepare(self, variables):
    if self.lr_schedule is None:
      return {}
    return {"lr": self.lr_schedule.value(self._graph_fn_iterations())}

  @api
  def get_iterations(self):
    """int64: the steps taken so far (an agent's train step)."""
    return self._graph_fn_iterations()

  @graph_fn
  def _graph_fn_iterations(self):
    return tf.identity(self.iterations)

  @_graph_fn_iterations.torch
  def _graph_fn_iterations(self):
    return self.iterations.clone()

  # --- TF ----------------------------------------------------------------

  @graph_fn(needs_gradients=True)
  def _graph_fn_step(self, loss, variables, lr):
    params = [variables[p] for p in self.paths]
    grads = tf_gradients(loss, params)
    return self._tf_apply_gradients(loss, params, grads, lr)

  def tf_update(self, problem, settings):
    params = problem.params(self.paths)
    outputs, grads = tf_local_gradients(problem.loss, params)
    lr = settings.get("lr", self.learning_rate)
    stats = self._tf_apply_gradients(outputs["loss"], params, grads, lr)
    grad_norm = tf.cast(stats["grad_norm"], tf.float32)
    return self.merge_stats(outputs, {"grad_norm": grad_norm})

  def _tf_apply_gradients(self, loss, params, grads, lr):
    used = [i for i, g in enumerate(grads) if g is not None]
    grads = [grads[i] for i in used]
    norm = tf.linalg.global_norm(grads)
    if self.clip_global_norm is not None:
      grads, _ = tf.clip_by_global_norm(grads, self.clip_global_norm, norm)
    # Every write waits for the loss and the gradients, and for them to be
    # finite: a check that fails while they are computed (e.g. sampling
    # from an empty memory) or a non-finite update leaves the step count,
    # the slots and the variables as they were.
    # The global norm is finite exactly when every gradient is (short of
    # an overflow, which is divergence too): one test, not one per variable.
    finite = tf.reduce_all(tf.math.is_finite(loss)) & tf.math.is_finite(norm)
    ok = tf_check(finite, self, "step", "loss", NON_FINITE)
    with tf.control_dependencies([loss, norm, ok]):
      norm = tf.identity(norm)  # Callers that wait for it wait for `ok`.
      step = self.iterations.assign_add(1)
      for i, grad in zip(used, grads):
        self._tf_apply(
          params[i],
          grad,
          [s[i] for s in self.slots.values()],
          step,
          as_dtype(lr, params[i].dtype),
        )
    return {"grad_norm": norm}

  def _tf_apply(self, var, grad, slots, step, lr):
    raise NotImplementedError

  # --- torch -------------------------------------------------------------

  @_graph_fn_step.torch
  def _graph_fn_step(self, loss, variables, lr):
    params = [variables[p] for p in self.paths]
    return self._torch_apply_gradients(
      loss, params, torch_gradients(loss, params), lr
    )

  def torch_update(self, problem, settings):
    params = problem.params(self.paths)
    outputs, grads = torch_local_gradients(problem.loss, params)
    lr = settings.get("lr", self.learning_rate)
    stats = self._torch_apply_gradients(outputs["loss"], params, grads, lr)
    outputs = {k: v.detach() for k, v in outputs.items()}
    grad_norm = stats["grad_norm"].to(torch.float32)
    return self.merge_stats(outputs, {"grad_norm": grad_norm})

  def _torch_apply_gradients(self, loss, params, grads, lr):
    used = [i for i, g in enumerate(grads) if g is not None]
    grads = [grads[i] for i in used]
    norm = (
      torch.sqrt(sum(torch.sum(g * g) for g in grads))
      if grads
      else torch.tensor(0.0)
    )
    if self.clip_global_norm is not None:
      clip = self.clip_global_norm
      grads = [
        g * clip / torch.maximum(norm, torch.tensor(clip)) for g in grads
      ]
    if in_build_pass():
      # The build runs this body twice on sample losses; updating between
      # the two would invalidate the second pass's autograd graph.
      return {"grad_norm": norm.detach()}
    torch_check(
      bool(torch.isfinite(loss).all()) and bool(torch.isfinite(norm)),
      self,
      "step",
      "loss",
      NON_FINITE,
    )
    with torch.no_grad():
      self.iterations += 1
      step = int(self.iterations)
      lr = float(lr)
      for i, grad in zip(used, grads):
        self._torch_apply(
          params[i],
          grad.to(params[i].dtype),
          [s[i] for s in self.slots.values()],
          step,
          lr,
        )
    return {"grad_norm": norm.detach()}

  def _torch_apply(self, var, grad, slots, step, lr):
    raise NotImplementedError


def as_dtype(x, dtype):
  """`x` (a Python number or a tensor) as a tensor of `dtype`, without the
  float32 round trip of `tf.cast(python_float, float64)` (which converts
  the number to float32 first)."""
  if isinstance(x, (tf.Tensor, tf.Variable)):
    return tf.cast(x, dtype)
  return tf.constant(x, dtype)


def torch_layout(slot, var):
  """A slot kept in TF layout, viewed in the variable's torch layout
  (in-place updates of the view write the slot)."""
  return to_torch_layout(slot, getattr(var, "torch_permutation", None))
