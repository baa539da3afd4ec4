"""Build: flow input spaces through the meta graph.

The builder walks all graph-function nodes of all root APIs as a worklist. A
node runs when its input values exist and its component is input-complete
(it knows the spaces of its `variable_args`); the component's
`create_variables` runs first, exactly once. Output spaces come from the
values the backend's bodies produce. If the worklist stalls, the components
still waiting and the arguments they miss are named.

The backend is the executor (`core.backend.Backend`): it runs the bodies,
makes variables and resources, and tells the spaces of its values.
"""

import inspect
import typing

import tree

from ingraph_rl import spaces as sp
from ingraph_rl.core.backend import Backend
from ingraph_rl.core.component import Component
from ingraph_rl.core.decorators import GraphFn
from ingraph_rl.core.inference import InputLead
from ingraph_rl.core.meta_graph import (
  ApiCall,
  GraphFnNode,
  MetaGraph,
  OpRecord,
  inline_apis_in,
  is_record,
)
from ingraph_rl.errors import InputIncompleteError, SpaceError


def space_of_nest(
  nest: typing.Any, spaces: dict[int, sp.Space]
) -> sp.Space | None:
  """Space of an argument nest whose leaves are records (None if a leaf's
  space is unknown; literal leaves are left out of containers)."""
  if is_record(nest):
    return spaces.get(nest.id)
  if isinstance(nest, dict):
    sub = {
      k: space_of_nest(v, spaces) for k, v in nest.items() if _has_records(v)
    }
    if any(s is None for s in sub.values()):
      return None
    return sp.Dict(typing.cast(dict[str, sp.Space], sub))
  if isinstance(nest, (list, tuple)):
    items = [space_of_nest(v, spaces) for v in nest if _has_records(v)]
    if any(s is None for s in items):
      return None
    return sp.Tuple(*typing.cast(list[sp.Space], items))
  return None


def _has_records(nest: typing.Any) -> bool:
  return any(is_record(x) for x in tree.flatten(nest))


class Builder:
  """Runs the worklist for one meta graph with one backend."""

  def __init__(self, meta: MetaGraph, backend: Backend) -> None:
    self.meta = meta
    self.backend = backend
    self.spaces: dict[int, sp.Space] = {}  # Record id -> Space.
    # Record id -> backend value during the build.
    self.values: dict[int, typing.Any] = {}
    # Component id -> list of (ApiCall, arg name, nest).
    self.args_of: dict[int, list[tuple[ApiCall, str, typing.Any]]] = {}
    for call in meta.api_calls:
      for name, nest in call.args.items():
        self.args_of.setdefault(id(call.component), []).append(
          (call, name, nest)
        )

  # --- completeness --------------------------------------------------------

  def known_input_spaces(self, component: Component) -> dict[str, sp.Space]:
    """Argument name -> first known space among the calls of `component`."""
    out: dict[str, sp.Space] = {}
    for _, name, nest in self.args_of.get(id(component), []):
      if name not in out and _has_records(nest):
        s = space_of_nest(nest, self.spaces)
        if s is not None:
          out[name] = s
    return out

  def missing_args(self, component: Component) -> list[str]:
    """The `variable_args` of `component` whose spaces are not known yet."""
    known = self.known_input_spaces(component)
    wanted: typing.Iterable[str] | None = component.variable_args
    if wanted is None:
      wanted = {
        name
        for _, name, nest in self.args_of.get(id(component), [])
        if _has_records(nest)
      }
    return sorted(set(wanted) - set(known))

  def ensure_variables(self, component: Component) -> bool:
    """Runs `create_variables` if the component is input-complete; returns
    whether its variables exist."""
    if component.variables_created:
      return True
    if self.missing_args(component):
      return False
    input_spaces = self.known_input_spaces(component)
    component.input_spaces = input_spaces
    component._build_backend = self.backend
    api_of = {
      name: call.name for call, name, _ in self.args_of.get(id(component), [])
    }
    try:
      self.backend.create_variables(component, input_spaces)
    except SpaceError as e:
      raise e.with_context(
        component=component.path, api=api_of.get(e.argument)
      ) from None
    finally:
      component._build_backend = None
    return True

  def ready(self, node: GraphFnNode) -> bool:
    """Whether `node` can run now (see module doc)."""
    if any(r.id not in self.values for r in node.inputs()):
      return False
    if node.fn is None:
      return True
    comps = (
      list(node.component.walk()) if node.fn.needs_subtree else [node.component]
    )
    if not all([self.ensure_variables(c) for c in comps]):
      return False
    # Inline APIs replay bodies as they are: their components' variables
    # must exist (made by a root API's flow, or now where they need no
    # input spaces, e.g. a queue).
    return all(
      [
        self.ensure_variables(c)
        for api in inline_apis_in((node.args, node.kwargs))
        for c in api.components()
      ]
    )

  # --- the worklist --------------------------------------------------------

  def run(self, root_values: dict[int, tuple[sp.Space, typing.Any]]) -> None:
    """Runs the worklist. `root_values`: record id -> (space, backend
    value) for root inputs."""
    for rid, (space, value) in root_values.items():
      self.spaces[rid] = space
      self.values[rid] = value
    pending = self.meta.all_nodes()
    while pending:
      still: list[GraphFnNode] = []
      for node in pending:
        if self.ready(node):
          self.run_node(node)
        else:
          still.append(node)
      if len(still) == len(pending):
        self.raise_incomplete(still)
      pending = still
    # Components no graph function touched still make their variables.
    for comp in self.meta.components():
      if not self.ensure_variables(comp):
        self.raise_incomplete([])

  def resolve(self, nest: typing.Any) -> typing.Any:
    """`nest` with each record replaced by its build-time value."""
    return tree.map_structure(
      lambda x: self.values[x.id] if isinstance(x, OpRecord) else x, nest
    )

  def run_node(self, node: GraphFnNode) -> None:
    """Runs one ready node and records its value and space."""
    args, kwargs = self.resolve(node.args), self.resolve(node.kwargs)
    in_spaces = [self.spaces[r.id] for r in node.inputs()]
    space: typing.Any
    if node.fn is None:
      value = self.backend.getitem(args[0], node.getitem_key, node)
      parent = in_spaces[0]
      space = (
        parent[node.getitem_key]
        if isinstance(parent, sp.ContainerSpace)
        else self.backend.value_space(value, in_spaces, self.input_leads(node))
      )
    else:
      try:
        value = self.backend.run(node, args, kwargs)
      except SpaceError as e:
        raise e.with_context(
          component=node.component.path,
          api=node.api_call.name if node.api_call else None,
        ) from None
      # A declared space wins; a declaration may return None to infer.
      space = declared_space(node.fn, node.component, in_spaces)
      if space is None:
        space = self.backend.value_space(
          value, in_spaces, self.input_leads(node)
        )
    self.values[node.output.id] = value
    self.spaces[node.output.id] = space

  def input_leads(self, node: GraphFnNode) -> list[InputLead]:
    """[(ranks, leading shape)] of the node's input leaves that have batch
    or time ranks: an output starting with the same (even static) dims gets
    the same ranks."""
    out: list[InputLead] = []
    for rec in node.inputs():
      space = self.spaces.get(rec.id)
      if space is None:
        continue
      leaves = tree.flatten_up_to(
        space.structure(), self.values[rec.id], check_types=False
      )
      for (_, leaf_space), leaf in zip(space.flatten(), leaves):
        n = leaf_space.num_leading_ranks
        if n:
          shape = self.backend.value_shape(leaf)
          ranks = dict(
            add_batch_rank=leaf_space.has_batch_rank,
            add_time_rank=leaf_space.has_time_rank,
            time_major=leaf_space.time_major,
          )
          out.append((ranks, tuple(shape[:n])))
    return out

  def raise_incomplete(self, stuck_nodes: list[GraphFnNode]) -> typing.NoReturn:
    """Raises InputIncompleteError naming who waits for what."""
    waiting = {}
    for comp in self.meta.components():
      if not comp.variables_created:
        waiting[comp.path] = self.missing_args(comp)
    lines = [
      f"  '{path}' misses the spaces of {args or '(nothing)'}"
      for path, args in sorted(waiting.items())
    ]
    stuck = sorted({f"'{n.component.path}'.{n.name}" for n in stuck_nodes})
    raise InputIncompleteError(
      "input-incomplete components: their variables depend on spaces that "
      "never become known (an argument fed only by a graph function that "
      "itself waits on them, or an API that is never called)\n"
      + "\n".join(lines)
      + (f"\n  graph functions waiting: {', '.join(stuck)}" if stuck else "")
    )


def declared_space(
  fn: GraphFn, component: Component, in_spaces: list[sp.Space]
) -> sp.Space | None:
  """A graph function's declared output space: `output_space(component)`
  or `output_space(component, in_spaces)` (the spaces of the call's
  inputs, in order); None means infer it."""
  declare = fn.output_space
  if declare is None:
    return None
  try:
    num_params = len(inspect.signature(declare).parameters)
  except (TypeError, ValueError):
    num_params = 0
  if num_params >= 2:
    return declare(component, in_spaces)
  return declare(component)
