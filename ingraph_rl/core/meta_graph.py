"""The meta graph: what assembly records, before any space or tensor exists.

An `OpRecord` stands for one value (a root API argument or a graph-function
result). A `GraphFnNode` is one call of a graph function; an `ApiCall` is one
call of an API method (kept for wiring checks, completeness and DOT export).
Executors replay a root API's `nodes` in order.
"""

import dataclasses
import typing

import tree

from ingraph_rl.core import context
from ingraph_rl.core.decorators import GraphFn
from ingraph_rl.errors import AssemblyError

# Components are `core.component.Component`s; typed Any here because
# component.py imports this module (through core.backend).
AnyComponent = typing.Any


class OpRecord:
  """Placeholder for a value during assembly.

  Indexing (`record["key"]`, `record[0]`) records a getitem node, so API
  methods can pick fields of dict or tuple results. Records have no value:
  Python control flow on them is an assembly error.
  """

  __slots__ = ("id", "api", "producer", "label")

  def __init__(
    self, id_: int, api: str, producer: "GraphFnNode | None", label: str
  ) -> None:
    self.id = id_
    self.api = api  # Name of the root API this record belongs to.
    self.producer = producer  # GraphFnNode, or None for a root API argument.
    self.label = label  # Human-readable origin, for errors and DOT.

  def __getitem__(self, key: typing.Any) -> "OpRecord":
    return typing.cast(OpRecord, context.current().record_getitem(self, key))

  def __iter__(self) -> typing.NoReturn:
    raise AssemblyError(
      f"cannot unpack {self.label}: a graph function returning several "
      f"values must declare it, e.g. @graph_fn(returns=2)"
    )

  def __bool__(self) -> typing.NoReturn:
    raise AssemblyError(
      f"{self.label} has no value during assembly; use tf.cond/tf.where "
      f"inside a graph function instead of Python control flow"
    )

  def __repr__(self) -> str:
    return f"OpRecord({self.id}: {self.label})"


def is_record(x: typing.Any) -> typing.TypeGuard[OpRecord]:
  return isinstance(x, OpRecord)


def records_in(nest: typing.Any) -> list[OpRecord]:
  """The records among the leaves of `nest`, in leaf order."""
  return [x for x in tree.flatten(nest) if isinstance(x, OpRecord)]


@dataclasses.dataclass(eq=False)
class GraphFnNode:
  """One call of a graph function (or a getitem on a record).

  `fn` is the GraphFn descriptor (None for getitem); `args`/`kwargs` are
  nests whose leaves are OpRecords or literal Python values.
  """

  id: int
  component: AnyComponent
  fn: GraphFn | None
  args: tuple[typing.Any, ...]
  kwargs: dict[str, typing.Any]
  output: typing.Any  # OpRecord (None until assembly sets it).
  # The API call during which this node was made.
  api_call: "ApiCall | None"
  getitem_key: typing.Any = None

  @property
  def name(self) -> str:
    return f"[{self.getitem_key!r}]" if self.fn is None else self.fn.name

  def inputs(self) -> list[OpRecord]:
    """The records among the arguments, in order."""
    return records_in((self.args, self.kwargs))


@dataclasses.dataclass(eq=False)
class ApiCall:
  """One call of an API method: component, name, bound arguments, result."""

  component: AnyComponent
  name: str
  args: dict[str, typing.Any]  # Argument name -> nest of records / literals.
  parent: "ApiCall | None"
  outputs: typing.Any = None


def differentiates(nodes: typing.Iterable[GraphFnNode]) -> bool:
  """Whether a graph function among `nodes` differentiates."""
  return any(n.fn is not None and n.fn.needs_gradients for n in nodes)


@dataclasses.dataclass(eq=False)
class RootApi:
  """A root API method: its inputs, outputs and graph-function nodes."""

  name: str
  arg_names: list[str]  # Arguments fed at execution, in order.
  inputs: dict[str, OpRecord]  # Argument name -> record.
  literals: dict[str, typing.Any]  # Arguments left at their Python default.
  outputs: typing.Any  # Nest of OpRecords (or None).
  nodes: list[GraphFnNode]  # In call order.

  @property
  def needs_gradients(self) -> bool:
    """Whether a graph function of this API differentiates."""
    return differentiates(self.nodes)


@dataclasses.dataclass(eq=False)
class InlineApi:
  """A sub-component API handed to a graph function as a callable, so the
  function can run it inside its own control flow (e.g. each iteration of a
  `tf.while_loop`). Made at assembly by `core.inline(component.api)`.

  Calling it replays the API's recorded graph functions with the executor
  that built them. Its components must get their variables from a root API.
  """

  component: AnyComponent
  name: str
  inputs: list[OpRecord]  # One per argument, in order.
  outputs: typing.Any  # Nest of OpRecords.
  nodes: list[GraphFnNode]  # In call order.

  def __call__(self, *args: typing.Any) -> typing.Any:
    executor = self.component.executor
    if executor is None:
      raise AssemblyError(
        f"inline API '{self.component.path}'.{self.name} "
        f"called before an executor built it"
      )
    if len(args) != len(self.inputs):
      raise AssemblyError(
        f"inline API '{self.component.path}'.{self.name} takes "
        f"{len(self.inputs)} arguments, got {len(args)}"
      )
    return executor.replay(
      self.nodes,
      [r.id for r in self.inputs],
      args,
      self.outputs,
      record=self.needs_gradients,
    )

  @property
  def needs_gradients(self) -> bool:
    return differentiates(self.nodes)

  def components(self) -> typing.Iterable[AnyComponent]:
    """The components whose graph functions it replays."""
    return {id(n.component): n.component for n in self.nodes}.values()


def inline_apis_in(nest: typing.Any) -> list[InlineApi]:
  """The inline APIs among the leaves of `nest`."""
  return [x for x in tree.flatten(nest) if isinstance(x, InlineApi)]


@dataclasses.dataclass(eq=False)
class MetaGraph:
  """Everything assembly recorded for one root component."""

  root: AnyComponent
  apis: dict[str, RootApi]  # By name.
  api_calls: list[ApiCall]  # Every API call, in order.
  num_records: int

  def all_nodes(self) -> list[GraphFnNode]:
    """The nodes of every root API, API by API."""
    return [n for api in self.apis.values() for n in api.nodes]

  def components(self) -> list[AnyComponent]:
    """Every component reached by an API call, root first."""
    seen: dict[int, AnyComponent] = {}
    for call in self.api_calls:
      seen.setdefault(id(call.component), call.component)
    return list(seen.values())

  def to_dot(self) -> str:
    """Graphviz DOT text: one cluster per component, graph functions as
    boxes, root inputs as ellipses, edges along the records."""
    lines = ["digraph meta_graph {", "  rankdir=LR;", "  node [fontsize=10];"]
    by_comp: dict[str, list[GraphFnNode]] = {}
    for node in self.all_nodes():
      by_comp.setdefault(node.component.path, []).append(node)
    for i, (path, nodes) in enumerate(sorted(by_comp.items())):
      lines.append(f'  subgraph cluster_{i} {{ label="{path}";')
      for n in nodes:
        lines.append(f'    n{n.id} [shape=box, label="{n.name}"];')
      lines.append("  }")
    for api in self.apis.values():
      for arg, rec in api.inputs.items():
        lines.append(f'  r{rec.id} [shape=ellipse, label="{api.name}({arg})"];')
      for node in api.nodes:
        for rec in node.inputs():
          src = f"r{rec.id}" if rec.producer is None else f"n{rec.producer.id}"
          lines.append(f"  {src} -> n{node.id};")
      for rec in records_in(api.outputs):
        out = f"out_{api.name}_{rec.id}"
        lines.append(f'  {out} [shape=plaintext, label="{api.name} ->"];')
        src = f"r{rec.id}" if rec.producer is None else f"n{rec.producer.id}"
        lines.append(f"  {src} -> {out};")
    lines.append("}")
    return "\n".join(lines)
