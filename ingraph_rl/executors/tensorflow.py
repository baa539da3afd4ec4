"""The TensorFlow executor: each root API becomes ONE `tf.function`.

    >>> import numpy as np
    >>> from ingraph_rl.components.layers import Dense
    >>> from ingraph_rl.spaces import FloatBox
    >>> spaces = {"inputs": FloatBox((4,), add_batch_rank=True)}
    >>> ex = TFExecutor(Dense(3), spaces)
    >>> ex.execute("call", np.ones((2, 4), np.float32)).shape
    TensorShape([2, 3])

The functions have an `input_signature` from the input spaces (batch and time
dims left open), so a new batch size never retraces.

Where variables and ops run is the executor's device strategy
(`executors.strategies`): TF's default placement, a device map, or
synchronous multi-tower updates that split an update API's batch over
several devices.
"""

import contextlib
import re
import typing

import numpy as np
import tensorflow as tf
import tree

# FuncGraph is what tf.function traces into; used bare for the build pass.
from tensorflow.python.framework import func_graph

from ingraph_rl.core.builder import Builder
from ingraph_rl.core.component import Component
from ingraph_rl.core.inference import InputLead, infer_leaf_space, nest_to_space
from ingraph_rl.core.meta_graph import GraphFnNode, RootApi, inline_apis_in
from ingraph_rl.core.variables import VariableSpec, initial_value
from ingraph_rl.errors import BuildError
from ingraph_rl.executors import checks as checks_lib
from ingraph_rl.executors import gradients
from ingraph_rl.executors.base import Executor, resolve, root_input_specs
from ingraph_rl.executors.checks import check_message, tf_check_all
from ingraph_rl.executors.input_checks import InputChecks, Leaf
from ingraph_rl.executors.strategies import (
  DefaultStrategy,
  DeviceMapStrategy,
  Strategy,
)
from ingraph_rl.executors.tf_spaces import tensor_spec
from ingraph_rl.spaces import Space


def _static_shape(value: typing.Any) -> list[int | None] | None:
  shape = getattr(value, "shape", None)
  if shape is None:
    return None
  shape = tf.TensorShape(shape)
  return shape.as_list() if shape.rank is not None else None


def _variable_name(path: str) -> str:
  """A TF name for the variable at `path`: SavedModels re-create variables
  in a graph, where names like "state_('h',)" are invalid scope names."""
  return re.sub(r"[^A-Za-z0-9_.\-]", "_", path.replace("/", "."))


class TFExecutor(Executor):
  """Builds and runs a component tree with TensorFlow.

  Extra args (see `Executor` for the rest):
    jit_compile: compile each API function with XLA.
    device_map: component path (or path prefix) -> TF device string; the
      longest matching prefix places that component's variables and ops
      (short for `strategy=DeviceMapStrategy(device_map)`).
    strategy: a device strategy (`executors.strategies`), e.g.
      `MultiTowerStrategy(devices, split_at=...)`; default: TF's placement.
    autograph: run AutoGraph on the API functions (off by default: graph
      functions use tf.cond / tf.while_loop explicitly, and tracing is
      faster without it).
    trace_at_build: trace every API function during build (default), so the
      first `execute` call pays no tracing.
  """

  backend = "tensorflow"

  def __init__(
    self,
    root: Component,
    input_spaces: typing.Mapping[str, Space],
    *,
    jit_compile: bool = False,
    device_map: typing.Mapping[str, str] | None = None,
    strategy: Strategy | None = None,
    autograph: bool = False,
    trace_at_build: bool = True,
    **kwargs: typing.Any,
  ) -> None:
    self.jit_compile = jit_compile
    if strategy is None:
      strategy = (
        DeviceMapStrategy(device_map) if device_map else DefaultStrategy()
      )
    elif device_map:
      raise BuildError(
        "TFExecutor: give either device_map or strategy (a "
        "strategy takes its own device_map)"
      )
    if not isinstance(strategy, Strategy):
      raise BuildError(
        f"TFExecutor: strategy must be an executors."
        f"strategies.Strategy, got {strategy!r}"
      )
    self.strategy = strategy
    self.device_map = dict(strategy.device_map)
    # Filled once the build pass is over.
    self._inline_plans: dict[int, typing.Any] = {}
    # During the build pass: whose tape each root API's node records on,
    # and `gradients.tf_recordings`' turn.
    self._tape_of_node: dict[int, str] = {}
    self._build_turn: typing.Any = None
    self.autograph = autograph
    self.trace_at_build = trace_at_build
    self.module = tf.Module(name="ingraph_rl_variables")
    self.module.variables_by_path = {}
    self.module.resources_by_path = {}
    super().__init__(root, input_spaces, **kwargs)

  # --- placement -----------------------------------------------------------

  def device_for(self, component: Component) -> str | None:
    """The device of `component` in the device map (None: TF's choice)."""
    path = component.path
    best = None
    for prefix, device in self.device_map.items():
      if path == prefix or path.startswith(prefix + "/"):
        if best is None or len(prefix) > len(best[0]):
          best = (prefix, device)
    return None if best is None else best[1]

  def _device_scope(
    self, component: Component
  ) -> typing.ContextManager[typing.Any]:
    device = self.device_for(component)
    return tf.device(device) if device else contextlib.nullcontext()

  # --- builder hooks -------------------------------------------------------

  def make_variable(
    self, component: Component, spec: VariableSpec
  ) -> typing.Any:
    init = initial_value(spec, self.rng)
    with tf.init_scope(), self._device_scope(component):
      value = tf.zeros(spec.shape, spec.dtype) if init is None else init
      var = tf.Variable(
        value,
        trainable=spec.trainable,
        dtype=spec.dtype,
        name=_variable_name(spec.path),
      )
    self.registry.add(spec, var)
    self.module.variables_by_path[spec.path] = var
    return var

  def make_resource(
    self,
    component: Component,
    path: str,
    factory: typing.Callable[[], typing.Any],
  ) -> typing.Any:
    with tf.init_scope(), self._device_scope(component):
      obj = factory()
    self.module.resources_by_path[path] = obj
    return obj

  def create_variables(
    self, component: Component, input_spaces: dict[str, Space]
  ) -> None:
    with tf.init_scope(), self._device_scope(component):
      component.create_variables(input_spaces)

  def run(
    self,
    node: GraphFnNode,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    turn = self._build_turn
    if turn is not None:
      # The build pass runs a node of a root API on that API's tape alone;
      # nodes run inside it (inline APIs) stay on it.
      self._build_turn = None
      try:
        with turn(self._tape_of_node.get(node.id)):
          return self.run(node, args, kwargs)
      finally:
        self._build_turn = turn
    fn = node.fn
    assert fn is not None  # The builder runs getitem nodes with getitem().
    untaped = node.id in self._untaped_nodes
    with self._device_scope(node.component):
      with gradients.tf_no_recording() if untaped else contextlib.nullcontext():
        return fn.tf_body(node.component, *args, **kwargs)

  def getitem(
    self, value: typing.Any, key: typing.Any, node: GraphFnNode
  ) -> typing.Any:
    return value[key]

  def value_shape(self, value: typing.Any) -> list[int | None]:
    """Static shape, None for dims known only at run time."""
    return value.shape.as_list()

  def value_space(
    self,
    value: typing.Any,
    in_spaces: typing.Sequence[Space | None],
    in_leads: typing.Iterable[InputLead] = (),
  ) -> typing.Any:
    def leaf(t: typing.Any) -> Space:
      if not hasattr(t, "dtype") or not hasattr(t, "shape"):
        raise BuildError(f"a graph function returned {t!r}; return tensors")
      return infer_leaf_space(
        np.dtype(t.dtype.as_numpy_dtype), t.shape.as_list(), in_spaces, in_leads
      )

    return nest_to_space(value, leaf)

  def _build(self, builder: Builder) -> None:
    # The worklist runs once over every root API in a scratch FuncGraph:
    # symbolic tensors give the output spaces, and the graph is dropped
    # (a bare FuncGraph costs a fraction of tracing a whole tf.function).
    inputs = root_input_specs(self.meta_graph, self.input_spaces)
    # The build records on a tape for the APIs that differentiate; the
    # others' nodes stay off it (a recorded while loop or cond builds its
    # gradient functions: seconds for an actor's rollout loop).
    self._untaped_nodes = {
      node.id
      for rapi in self.meta_graph.apis.values()
      if not rapi.needs_gradients
      for node in rapi.nodes
    }
    graph = func_graph.FuncGraph("ingraph_rl_build")
    with graph.as_default():
      root_values = {}
      for rec, space in inputs:
        placeholders = tree.map_structure(
          lambda spec: tf.compat.v1.placeholder(spec.dtype, spec.shape),
          tensor_spec(space),
        )
        root_values[rec.id] = (space, placeholders)
      # Every root API runs in this one scratch pass, and several may
      # differentiate: each of those records on a plain tape of its own.
      self._tape_of_node = {
        node.id: name
        for name, rapi in self.meta_graph.apis.items()
        if rapi.needs_gradients
        for node in rapi.nodes
      }
      with gradients.tf_recordings(set(self._tape_of_node.values())) as turn:
        self._build_turn = turn
        try:
          builder.run(root_values)
        finally:
          self._build_turn = None
    # What device strategies plan with: the space and build-time static
    # shape of every record.
    self.record_spaces = dict(builder.spaces)
    self.record_shapes = {
      rid: tree.map_structure(_static_shape, value)
      for rid, value in builder.values.items()
    }

  # --- execution -----------------------------------------------------------

  def _make_functions(self) -> None:
    self.strategy.validate(self)
    # Inlined APIs the strategy replays its own way, by their node lists
    # (what `InlineApi` hands to `replay`).
    self._inline_plans = {}
    for node in self.meta_graph.all_nodes():
      for inline in inline_apis_in((node.args, node.kwargs)):
        plan = self.strategy.plan_inline(self, inline)
        if plan is not None:
          self._inline_plans[id(inline.nodes)] = plan
    self._functions = {}
    for name, rapi in self.meta_graph.apis.items():
      fn = tf.function(
        self._api_body(rapi),
        jit_compile=self.jit_compile or None,
        autograph=self.autograph,
        input_signature=[
          tensor_spec(self.input_spaces[a]) for a in rapi.arg_names
        ],
      )
      if self.trace_at_build:
        fn.get_concrete_function()
      self._functions[name] = fn

  @property
  def _python_value_checks(self) -> bool:  # type: ignore[override]
    # XLA compiles asserts away: the value checks run in Python there.
    return bool(self.jit_compile)

  def _api_body(self, rapi: RootApi) -> typing.Callable[..., typing.Any]:
    input_ids = [rapi.inputs[a].id for a in rapi.arg_names]
    nodes = rapi.nodes
    record = rapi.needs_gradients  # Only these pay for a tape.
    plan = self.strategy.plan(self, rapi)
    checks = self.input_checks[rapi.name]
    guard = self.check_values and not self.jit_compile and not checks.empty

    def body(*args: typing.Any) -> typing.Any:
      # The argument checks run first; every op of the API (every state
      # write among them) depends on them.
      deps = [input_assert(checks, args)] if guard else []
      with tf.control_dependencies(deps):
        if plan is not None:
          return plan.replay(args)
        return self.replay(nodes, input_ids, args, rapi.outputs, record)

    body.__name__ = rapi.name
    return body

  def replay(
    self,
    nodes: list[GraphFnNode],
    input_ids: list[int],
    args: typing.Sequence[typing.Any],
    outputs: typing.Any,
    record: bool = False,
  ) -> typing.Any:
    """Runs recorded graph-function nodes on `args` (inside a tf.function
    trace); returns the `outputs` nest of values. `record`: on a gradient
    tape, for nodes that differentiate."""
    plan = self._inline_plans.get(id(nodes))
    if plan is not None:
      return plan.replay(args)
    if record:
      with gradients.tf_recording():
        return self.replay(nodes, input_ids, args, outputs)
    values = dict(zip(input_ids, args))

    def run_nodes() -> typing.Any:
      for node in nodes:
        if node.fn is None:
          values[node.output.id] = values[node.args[0].id][node.getitem_key]
          continue
        with tf.name_scope(node.component.path.replace("/", "_")):
          values[node.output.id] = self.run(
            node, resolve(values, node.args), resolve(values, node.kwargs)
          )
      return resolve(values, outputs)

    return checks_lib.tf_transaction(run_nodes)

  def function(self, api_name: str) -> typing.Any:
    """The `tf.function` of a root API (to export it or call it directly)."""
    return self._functions[api_name]

  # --- weights ---------------------------------------------------------------

  def get_weights(self) -> dict[str, np.ndarray]:
    return {p: v.numpy() for p, v in self.registry.variables.items()}

  def set_weights(self, weights: typing.Mapping[str, typing.Any]) -> None:
    for path, value in self.registry.check_weights(weights).items():
      self.registry.variables[path].assign(value)

  def variables(self) -> dict[str, tf.Variable]:
    """{path: tf.Variable}."""
    return dict(self.registry.variables)


def input_assert(
  checks: InputChecks, args: typing.Sequence[typing.Any]
) -> tf.Operation:
  """ONE assert op over an API's argument checks (`InputChecks`): leaves
  within their bounds, finite floats, agreeing batch and time sizes. Its
  message is the first failing check's (`checks.check_message`).

  The conditions are computed in a function that is never inlined:
  grappler's shape inference assumes a valid graph and may replace a
  batch size by a constant that a LATER op implies (e.g. an assignment to
  a [3] variable), which would fold away the very check that guards it.
  """
  flat = [tree.flatten(a) for a in args]
  conditions = checks.conditions()
  used: list[tuple[int, int]] = []  # (argument, leaf) of each input.
  for _, leaf, detail in conditions:
    for x in (leaf, detail) if isinstance(detail, Leaf) else (leaf,):
      if (x.arg_index, x.leaf_index) not in used:
        used.append((x.arg_index, x.leaf_index))

  def compute(*tensors: typing.Any) -> typing.Any:
    def value(leaf: Leaf) -> typing.Any:
      return tensors[used.index((leaf.arg_index, leaf.leaf_index))]

    oks = []
    for kind, leaf, detail in conditions:
      t = value(leaf)
      if kind == "range":
        oks.append(_within(t, leaf.space.dtype, *detail))
      elif kind == "finite":
        oks.append(tf.reduce_all(tf.math.is_finite(t)))
      else:
        dim = leaf.batch_dim if kind == "batch" else leaf.time_dim
        dim0 = detail.batch_dim if kind == "batch" else detail.time_dim
        oks.append(tf.equal(tf.shape(t)[dim], tf.shape(value(detail))[dim0]))
    return tf.stack(oks)

  opaque = tf.function(
    compute, autograph=False, experimental_attributes={"_noinline": True}
  )
  oks = opaque(*[flat[a][j] for a, j in used])
  messages = [
    check_message(
      checks.component,
      checks.api,
      leaf.arg,
      checks.reason(kind, leaf, detail),
    )
    for kind, leaf, detail in conditions
  ]
  return tf_check_all([(oks[i], m) for i, m in enumerate(messages)])


def _within(
  t: typing.Any, dtype: np.dtype, low: typing.Any, high: typing.Any
) -> typing.Any:
  """All of `t` in [low, high) (an IntBox's bounds; a bound beyond the
  dtype's range is no test)."""
  info = np.iinfo(dtype)
  ok = []
  if low is not None and np.any(low > info.min):
    lo = np.maximum(low, info.min).astype(dtype)
    ok.append(t >= tf.constant(lo, t.dtype))
  if high is not None and np.any(high <= info.max):
    hi = np.minimum(np.asarray(high, np.int64) - 1, info.max).astype(dtype)
    ok.append(t <= tf.constant(hi, t.dtype))
  return tf.reduce_all(ok[0] if len(ok) == 1 else ok[0] & ok[1])
