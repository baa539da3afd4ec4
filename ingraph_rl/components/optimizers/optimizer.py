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
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.core.variables import to_torch_layout
from ingraph_rl.errors import BuildError
from ingraph_rl.executors.checks import in_build_pass
from ingraph_rl.executors.gradients import tf_gradients, torch_gradients
from ingraph_rl.spaces import Dict
from ingraph_rl.utils.lazy import torch


class Optimizer(Component):
  """`step(loss, variables)` -> {"grad_norm": global norm before clipping};
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
    used = [i for i, g in enumerate(grads) if g is not None]
    grads = [grads[i] for i in used]
    norm = tf.linalg.global_norm(grads)
    if self.clip_global_norm is not None:
      grads, _ = tf.clip_by_global_norm(grads, self.clip_global_norm, norm)
    # Every write waits for the loss and the gradients: a check that fails
    # while they are computed (e.g. sampling from an empty memory) leaves
    # the step count, the slots and the variables as they were.
    with tf.control_dependencies([loss, norm]):
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
    grads = torch_gradients(loss, params)
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
