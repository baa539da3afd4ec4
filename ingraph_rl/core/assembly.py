"""Assembly: call every root API once with `OpRecord`s and record the wiring.

The result is a `MetaGraph`. Wiring mistakes are caught here and name the
components involved: an API calling a component outside its subtree, a
graph function called from another component, records used across root APIs.
"""

import time
import typing

import tree

from ingraph_rl.core import context
from ingraph_rl.core.component import Component
from ingraph_rl.core.decorators import ApiMethod, GraphFn
from ingraph_rl.core.meta_graph import (
  ApiCall,
  GraphFnNode,
  InlineApi,
  MetaGraph,
  OpRecord,
  RootApi,
  is_record,
)
from ingraph_rl.errors import AssemblyError


class Assembly:
  """Records one MetaGraph. Use `assemble(root)`."""

  def __init__(self, root: Component) -> None:
    self.root = root
    self.api_calls: list[ApiCall] = []
    self.stack: list[ApiCall] = []  # API calls being executed.
    self.num_records = 0
    self.num_nodes = 0
    self.num_inline = 0
    self.root_api = ""  # Name of the root API being assembled.
    self.nodes: list[GraphFnNode] = []  # That root API's nodes.

  def new_record(self, producer: GraphFnNode | None, label: str) -> OpRecord:
    """A new record of the root API being assembled."""
    rec = OpRecord(self.num_records, self.root_api, producer, label)
    self.num_records += 1
    return rec

  # --- recording -----------------------------------------------------------

  def call_api(
    self,
    component: Component,
    method: ApiMethod,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    """Records a call of API `method` of `component` and runs it."""
    caller = self.stack[-1].component if self.stack else None
    if caller is None:
      if component is not self.root:
        raise AssemblyError(f"'{component.path}' is not the root component")
    elif component is not caller and not component.is_descendant_of(caller):
      raise AssemblyError(
        f"'{caller.path}'.{self.stack[-1].name} calls API '{method.name}' "
        f"of '{component.path}', which is not one of its sub-components; "
        f"add it with add_components() (or as an attribute) of "
        f"'{caller.path}'"
      )
    try:
      bound = method.bind(component, args, kwargs)
    except TypeError as e:
      raise AssemblyError(
        f"'{component.path}'.{method.name}: bad arguments: {e}"
      ) from None
    self._check_records(bound, component, method.name)
    call = ApiCall(
      component, method.name, bound, self.stack[-1] if self.stack else None
    )
    self.api_calls.append(call)
    self.stack.append(call)
    try:
      out = method.fn(component, *args, **kwargs)
    finally:
      self.stack.pop()
    call.outputs = out
    return out

  def call_graph_fn(
    self,
    component: Component,
    fn: GraphFn,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    """Records a call of graph function `fn`; returns its record (or a
    tuple of `fn.returns` records)."""
    if not self.stack or self.stack[-1].component is not component:
      who = (
        f"'{self.stack[-1].component.path}'.{self.stack[-1].name}"
        if self.stack
        else "outside any API method"
      )
      raise AssemblyError(
        f"graph function '{component.path}'.{fn.name} called from {who}: a "
        f"graph function may only be called by its own component's API "
        f"methods"
      )
    self._check_records((args, kwargs), component, fn.name)
    node = GraphFnNode(
      self.num_nodes,
      component,
      fn,
      tuple(args),
      dict(kwargs),
      None,
      self.stack[-1],
    )
    self.num_nodes += 1
    node.output = self.new_record(node, f"'{component.path}'.{fn.name}")
    self.nodes.append(node)
    if fn.returns is None:
      return node.output
    return tuple(node.output[i] for i in range(fn.returns))

  def record_getitem(self, record: OpRecord, key: typing.Any) -> OpRecord:
    """Records `record[key]`."""
    owner = self.stack[-1] if self.stack else None
    component = owner.component if owner else self.root
    node = GraphFnNode(
      self.num_nodes,
      component,
      None,
      (record,),
      {},
      None,
      owner,
      getitem_key=key,
    )
    self.num_nodes += 1
    node.output = self.new_record(node, f"{record.label}[{key!r}]")
    self.nodes.append(node)
    return node.output

  def inline_api(self, component: Component, method: ApiMethod) -> InlineApi:
    """Records `component.method` as an InlineApi (see meta_graph)."""
    outer = (self.root_api, self.nodes)
    self.num_inline += 1
    self.root_api = f"{outer[0]}>inline{self.num_inline}"
    self.nodes = []
    try:
      inputs: list[OpRecord] = []
      args: list[typing.Any] = []
      for p in method.params:
        if p.kind == p.VAR_POSITIONAL:
          raise AssemblyError(
            f"inline API '{component.path}'.{method.name} "
            f"takes *{p.name}; use named arguments"
          )
        if p.default is p.empty:
          rec = self.new_record(None, f"{method.name}({p.name})")
          inputs.append(rec)
          args.append(rec)
        else:
          args.append(p.default)
      outputs = self.call_api(component, method, args, {})
      return InlineApi(component, method.name, inputs, outputs, self.nodes)
    finally:
      self.root_api, self.nodes = outer

  def _check_records(
    self, nest: typing.Any, component: Component, what: str
  ) -> None:
    for x in tree.flatten(nest):
      if is_record(x) and x.api != self.root_api:
        raise AssemblyError(
          f"'{component.path}'.{what} got {x.label}, a value of root API "
          f"'{x.api}', while assembling root API '{self.root_api}': values "
          f"cannot pass between root APIs (keep state in variables)"
        )

  # --- root APIs -----------------------------------------------------------

  def assemble_root_api(
    self, method: ApiMethod, provided_args: typing.Container[str]
  ) -> RootApi:
    """Calls one root API with a record per argument.

    `provided_args`: names of arguments that get a value at execution (they
    have an input space). Others must have a Python default.
    """
    self.root_api = method.name
    self.nodes = []
    inputs: dict[str, OpRecord] = {}
    literals: dict[str, typing.Any] = {}
    args: list[typing.Any] = []
    for p in method.params:
      if p.kind == p.VAR_POSITIONAL:
        raise AssemblyError(
          f"root API '{method.name}' of '{self.root.path}' takes *{p.name}; "
          f"root APIs need named arguments"
        )
      if p.name in provided_args:
        rec = self.new_record(None, f"{method.name}({p.name})")
        inputs[p.name] = rec
        args.append(rec)
      elif p.default is not p.empty:
        literals[p.name] = p.default
        args.append(p.default)
      else:
        raise AssemblyError(
          f"no input space for argument '{p.name}' of root API "
          f"'{method.name}' of '{self.root.path}'; pass it in input_spaces"
        )
    outputs = self.call_api(self.root, method, args, {})
    for x in tree.flatten(outputs):
      if not is_record(x):
        raise AssemblyError(
          f"root API '{method.name}' returns {x!r}; root APIs must return "
          f"values of graph functions (or None)"
        )
    return RootApi(
      method.name, list(inputs), inputs, literals, outputs, self.nodes
    )


def inline(bound_api: typing.Any) -> InlineApi:
  """Inside an API method: hands a sub-component API to a graph function
  as a callable, e.g. to step it in a `tf.while_loop`:

      @api
      def run(self, num_steps):
        return self._graph_fn_run(num_steps, inline(self.policy.act))

  Arguments with a Python default keep it; the others become the
  callable's positional arguments, in order.
  """
  component, method = bound_api.args
  return typing.cast(
    InlineApi,
    context.current(component, method.name).inline_api(component, method),
  )


def assemble(
  root: Component,
  input_spaces: typing.Container[str],
  api_names: typing.Iterable[str] | None = None,
) -> tuple[MetaGraph, float]:
  """Builds the MetaGraph of `root`. Returns (meta_graph, seconds).
  `input_spaces`: the root APIs' arguments that get values (the names
  of the executor's input spaces)."""
  start = time.perf_counter()
  asm = Assembly(root)
  with context.assembling(asm):
    methods = root.api_methods()
    names = (
      api_names
      if api_names is not None
      else [n for n in methods if n not in root.internal_apis()]
    )
    apis = {}
    for name in names:
      if name not in methods:
        raise AssemblyError(
          f"'{root.path}' has no API method '{name}'; it has {sorted(methods)}"
        )
      apis[name] = asm.assemble_root_api(methods[name], input_spaces)
  meta = MetaGraph(root, apis, asm.api_calls, asm.num_records)
  return meta, time.perf_counter() - start
