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
from ingraph_rl.errors import AssemblyError


class OpRecord:
  """Placeholder for a value during assembly.

  Indexing (`record["key"]`, `record[0]`) records a getitem node, so API
  methods can pick fields of dict or tuple results. Records have no value:
  Python control flow on them is an assembly error.
  """

  __slots__ = ("id", "api", "producer", "label")

  def __init__(self, id_, api, producer, label):
    self.id = id_
    self.api = api  # Name of the root API this record belongs to.
    self.producer = producer  # GraphFnNode, or None for a root API argument.
    self.label = label  # Human-readable origin, for errors and DOT.

  def __getitem__(self, key):
    return context.current().record_getitem(self, key)

  def __iter__(self):
    raise AssemblyError(
      f"cannot unpack {self.label}: a graph function returning several "
      f"values must declare it, e.g. @graph_fn(returns=2)"
    )

  def __bool__(self):
    raise AssemblyError(
      f"{self.label} has no value during assembly; use tf.cond/tf.where "
      f"inside a graph function instead of Python control flow"
    )

  def __repr__(self):
    return f"OpRecord({self.id}: {self.label})"


def is_record(x):
  return isinstance(x, OpRecord)


def records_in(nest):
  return [x for x in tree.flatten(nest) if isinstance(x, OpRecord)]


@dataclasses.dataclass(eq=False)
class GraphFnNode:
  """One call of a graph function (or a getitem on a record).

  `fn` is the GraphFn descriptor (None for getitem); `args`/`kwargs` are
  nests whose leaves are OpRecords or literal Python values.
  """

  id: int
  component: typing.Any
  fn: typing.Any
  args: tuple
  kwargs: dict
  output: typing.Any  # OpRecord.
  api_call: "ApiCall"  # The API call during which this node was made.
  getitem_key: typing.Any = None

  @property
  def name(self):
    return f"[{self.getitem_key!r}]" if self.fn is None else self.fn.name

  def inputs(self):
    return records_in((self.args, self.kwargs))


@dataclasses.dataclass(eq=False)
class ApiCall:
  """One call of an API method: component, name, bound arguments, result."""

  component: typing.Any
  name: str
  args: dict  # Argument name -> nest of records / literals.
  parent: typing.Optional["ApiCall"]
  outputs: typing.Any = None


@dataclasses.dataclass(eq=False)
class RootApi:
  """A root API method: its inputs, outputs and graph-function nodes."""

  name: str
  arg_names: list  # Arguments fed at execution, in order.
  inputs: dict  # Argument name -> OpRecord.
  literals: dict  # Arguments left at their Python default.
  outputs: typing.Any  # Nest of OpRecords (or None).
  nodes: list  # GraphFnNodes in call order.


@dataclasses.dataclass(eq=False)
class InlineApi:
  """A sub-component API handed to a graph function as a callable, so the
  function can run it inside its own control flow (e.g. each iteration of a
  `tf.while_loop`). Made at assembly by `core.inline(component.api)`.

  Calling it replays the API's recorded graph functions with the executor
  that built them. Its components must get their variables from a root API.
  """

  component: typing.Any
  name: str
  inputs: list  # OpRecords, one per argument, in order.
  outputs: typing.Any  # Nest of OpRecords.
  nodes: list  # GraphFnNodes in call order.

  def __call__(self, *args):
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
  def needs_gradients(self):
    return any(n.fn is not None and n.fn.needs_gradients for n in self.nodes)

  def components(self):
    return {id(n.component): n.component for n in self.nodes}.values()


def inline_apis_in(nest):
  return [x for x in tree.flatten(nest) if isinstance(x, InlineApi)]


@dataclasses.dataclass(eq=False)
class MetaGraph:
  """Everything assembly recorded for one root component."""

  root: typing.Any
  apis: dict  # Name -> RootApi.
  api_calls: list  # Every ApiCall, in order.
  num_records: int

  def all_nodes(self):
    return [n for api in self.apis.values() for n in api.nodes]

  def components(self):
    """Every component reached by an API call, root first."""
    seen = {}
    for call in self.api_calls:
      seen.setdefault(id(call.component), call.component)
    return list(seen.values())

  def to_dot(self):
    """Graphviz DOT text: one cluster per component, graph functions as
    boxes, root inputs as ellipses, edges along the records."""
    lines = ["digraph meta_graph {", "  rankdir=LR;", "  node [fontsize=10];"]
    by_comp = {}
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
