"""The callable form of optimizers: the optimizer receives the loss as a
callable and builds the whole update itself (TensorForce 0.3's idea), so
it can evaluate the loss again on the updated weights, on minibatches, on
perturbed weights or along a line.

The callable is a loss component's API handed over with `core.inline`; it
maps ONE argument, a nest of tensors whose leaves share a leading batch
dim, to a dict holding the scalar "loss" and any other tensors (a fixed
structure):

    stats = self.optimizer.minimize(
        inline(self.loss_api), self.net.variables(), batch)

As for any inline API, the loss API's components get their variables from
a root API's flow (e.g. the policy network from the agent's `act`).

`minimize` is one graph function: every loop of a composed optimizer
(epochs, minibatches, conjugate gradient, line search, perturbations) is
a `tf.while_loop` in it, and the torch mirror runs the same composition
eagerly. Its result is the loss outputs of the last evaluation an inner
step made (the weights it started from), merged with each optimizer's
own stats (e.g. "grad_norm"); a loss output may not reuse their names.

A composed optimizer implements:
  `_prepare(variables)` (at assembly, an API method's code): per-call
    settings (e.g. a learning rate read off a schedule) as a nest of
    records; a wrapper returns its inner's under "inner". It is also how
    every optimizer of a composition learns the variables' space (for its
    slots).
  `tf_update(problem, settings)` / `torch_update(problem, settings)`: one
    update of `problem` (a `Problem`) -> stats.
  `stats_spec(loss_spec)`: the stats' structure (`tf.TensorSpec`s), for
    the loops that carry them.
"""

import dataclasses
import typing

import tensorflow as tf
import tree

# A bare FuncGraph traces the loss once to learn its outputs' structure.
from tensorflow.python.framework import func_graph

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import AssemblyError, BuildError
from ingraph_rl.executors import gradients


@dataclasses.dataclass(frozen=True)
class Problem:
  """What one update works on."""

  loss_fn: typing.Callable[[typing.Any], dict]  # arguments -> {"loss", ...}
  variables: dict  # Path -> variable (a `variables()` API's output).
  arguments: typing.Any  # Nest of tensors, leading batch dim.
  spec: typing.Any = None  # TF: TensorSpecs of loss_fn's outputs.

  def on(self, arguments: typing.Any) -> "Problem":
    """The same problem on other arguments (a minibatch)."""
    return dataclasses.replace(self, arguments=arguments)

  def loss(self) -> dict:
    return self.loss_fn(self.arguments)

  def params(self, paths: typing.Iterable[str]) -> list:
    return [self.variables[p] for p in paths]


class ComposableOptimizer(Component):
  """Base of every optimizer with the callable form (see module doc).

  APIs: `minimize(loss_fn, variables, arguments)` -> stats (a dict);
  `prepare(variables)` -> settings (called by `minimize` and by outer
  optimizers; not a root API).
  """

  variable_args: typing.ClassVar[typing.Collection[str] | None] = ()
  # This optimizer's own stats: name -> dtype (scalars).
  own_stats: typing.ClassVar[dict[str, typing.Any]] = {}

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"prepare"}

  @api
  def minimize(self, loss_fn, variables, arguments):
    return self._graph_fn_minimize(
      loss_fn, variables, arguments, self.prepare(variables)
    )

  @api
  def prepare(self, variables):
    return self._prepare(variables)

  @api
  def get_iterations(self):
    """int64: the updates (or inner steps) taken so far: a wrapper asks
    its inner optimizer."""
    inner = getattr(self, "inner", None)
    if inner is None:
      raise AssemblyError(
        f"'{self.path}' ({type(self).__name__}) counts no iterations"
      )
    return inner.get_iterations()

  def _prepare(self, variables):
    return {}

  # The whole composition runs in this one graph function; its inner
  # optimizers' variables must exist first (needs_subtree).
  @graph_fn(needs_subtree=True)
  def _graph_fn_minimize(self, loss_fn, variables, arguments, settings):
    self._check_loss_fn(loss_fn)
    spec = tf_output_spec(loss_fn, arguments)
    self._check_loss_spec(spec)
    problem = Problem(loss_fn, dict(variables), arguments, spec)
    return self.tf_update(problem, settings)

  @_graph_fn_minimize.torch
  def _graph_fn_minimize(self, loss_fn, variables, arguments, settings):
    self._check_loss_fn(loss_fn)

    def checked_loss_fn(args):
      outputs = loss_fn(args)
      self._check_loss_spec(outputs)
      return outputs

    problem = Problem(checked_loss_fn, dict(variables), arguments)
    return self.torch_update(problem, settings)

  def tf_update(self, problem: Problem, settings: typing.Any) -> dict:
    raise NotImplementedError

  def torch_update(self, problem: Problem, settings: typing.Any) -> dict:
    raise NotImplementedError

  def stats_spec(self, loss_spec: dict) -> dict:
    """The stats `tf_update` returns, for a loss with outputs `loss_spec`."""
    return self.merge_stats(
      loss_spec,
      {k: tf.TensorSpec([], v) for k, v in self.own_stats.items()},
    )

  def merge_stats(self, inner: dict, own: dict) -> dict:
    """`inner` (loss outputs or an inner optimizer's stats) and this
    optimizer's own stats; own names win over an inner optimizer's."""
    return {**inner, **own}

  # --- checks ----------------------------------------------------------------

  def _check_loss_fn(self, loss_fn):
    num_inputs = len(getattr(loss_fn, "inputs", [None]))
    if not callable(loss_fn) or num_inputs != 1:
      raise BuildError(
        f"'{self.path}'.minimize: loss_fn must be a loss API of ONE "
        f"argument (a nest of tensors) handed over with core.inline(...), "
        f"got {loss_fn!r} of {num_inputs} argument(s)"
      )

  def _check_loss_spec(self, outputs):
    if not isinstance(outputs, dict) or "loss" not in outputs:
      raise BuildError(
        f"'{self.path}'.minimize: loss_fn must return a dict with a scalar "
        f"'loss', got {tree.map_structure(_describe, outputs)!r}"
      )
    shape = tuple(outputs["loss"].shape)
    if shape != ():
      raise BuildError(
        f"'{self.path}'.minimize: the loss must be a scalar, got shape {shape}"
      )
    reserved = sorted(set(outputs) & set(self._all_own_stats()))
    if reserved:
      raise BuildError(
        f"'{self.path}'.minimize: loss outputs {reserved} clash with the "
        f"optimizers' own stats; rename them"
      )

  def _all_own_stats(self):
    names = set(self.own_stats)
    for c in self.walk():
      names |= set(getattr(c, "own_stats", {}))
    return names


def _describe(x):
  return f"{type(x).__name__}{tuple(getattr(x, 'shape', ()))}"


def tf_output_spec(fn, arguments):
  """TensorSpecs of `fn(arguments)`, traced once in a scratch graph with
  the arguments' leading (batch) dim left open: minibatches vary."""

  def holder(t):
    shape = t.shape.as_list()
    if shape:
      shape[0] = None
    return tf.compat.v1.placeholder(t.dtype, shape)

  graph = func_graph.FuncGraph("ingraph_rl_loss_spec")
  with graph.as_default(), gradients.tf_no_recording():
    out = fn(tf.nest.map_structure(holder, arguments))
  return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), out)


def loss_spec_of(problem):
  """TensorSpecs of the loss outputs (torch: from one evaluation)."""
  if problem.spec is not None:
    return problem.spec
  from ingraph_rl.executors.torch_spaces import numpy_dtype

  return {
    k: tf.TensorSpec(tuple(v.shape), numpy_dtype(v.dtype))
    for k, v in problem.loss().items()
  }


def torch_zero_stats(spec):
  """Zeros of a nest of TensorSpecs as torch tensors (open dims as 0)."""
  import torch

  from ingraph_rl.executors.torch_spaces import torch_dtype

  return tf.nest.map_structure(
    lambda s: torch.zeros(
      [d or 0 for d in s.shape.as_list()],
      dtype=torch_dtype(s.dtype.as_numpy_dtype),
    ),
    spec,
  )


def tf_zeros(spec):
  """Zeros of a nest of TensorSpecs (open dims as 0): a loop's first
  carry of stats."""
  return tf.nest.map_structure(
    lambda s: tf.zeros([d or 0 for d in s.shape.as_list()], s.dtype), spec
  )


def tf_loop(cond, body, loop_vars, stats_spec, stats_index=1):
  """`tf.while_loop` (one iteration at a time) whose `loop_vars[stats_index]`
  are stats of `stats_spec` (open dims may change between iterations)."""
  invariants = [tf.nest.map_structure(lambda t: t.shape, v) for v in loop_vars]
  invariants[stats_index] = tf.nest.map_structure(lambda s: s.shape, stats_spec)
  loop_vars = tuple(loop_vars)
  return tf.while_loop(
    cond,
    body,
    loop_vars,
    shape_invariants=tuple(invariants),
    parallel_iterations=1,
  )


def float_paths(variables: dict) -> list[str]:
  """The paths of the floating-point variables (what a step moves)."""

  def is_float(v):
    d = v.dtype  # A TF DType has is_floating, a torch dtype is_floating_point.
    return bool(getattr(d, "is_floating", getattr(d, "is_floating_point", 0)))

  return sorted(p for p, v in variables.items() if is_float(v))
