"""Build: flow input spaces through the meta graph.

The builder walks all graph-function nodes of all root APIs as a worklist. A
node runs when its input values exist and its component is input-complete
(it knows the spaces of its `variable_args`); the component's
`create_variables` runs first, exactly once. Output spaces come from the
values the backend's bodies produce. If the worklist stalls, the components
still waiting and the arguments they miss are named.

The backend (see executors) supplies: `placeholder(space)`, `run(node, args,
kwargs)`, `value_space(value, input_spaces)`, `make_variable(component,
spec)` and `make_resource(component, path, factory)`.
"""

import inspect

import tree

from ingraph_rl import spaces as sp
from ingraph_rl.core.meta_graph import OpRecord, inline_apis_in, is_record
from ingraph_rl.errors import BuildError, InputIncompleteError, SpaceError


def space_of_nest(nest, spaces):
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
    return sp.Dict(sub)
  if isinstance(nest, (list, tuple)):
    sub = [space_of_nest(v, spaces) for v in nest if _has_records(v)]
    if any(s is None for s in sub):
      return None
    return sp.Tuple(*sub)
  return None


def _has_records(nest):
  return any(is_record(x) for x in tree.flatten(nest))


class Builder:
  """Runs the worklist for one meta graph with one backend."""

  def __init__(self, meta, backend):
    self.meta = meta
    self.backend = backend
    self.spaces = {}  # Record id -> Space.
    self.values = {}  # Record id -> backend value during the build.
    # Component id -> list of (ApiCall, arg name, nest).
    self.args_of = {}
    for call in meta.api_calls:
      for name, nest in call.args.items():
        self.args_of.setdefault(id(call.component), []).append(
          (call, name, nest)
        )

  # --- completeness --------------------------------------------------------

  def known_input_spaces(self, component):
    """Argument name -> first known space among the calls of `component`."""
    out = {}
    for _, name, nest in self.args_of.get(id(component), []):
      if name not in out and _has_records(nest):
        s = space_of_nest(nest, self.spaces)
        if s is not None:
          out[name] = s
    return out

  def missing_args(self, component):
    known = self.known_input_spaces(component)
    wanted = component.variable_args
    if wanted is None:
      wanted = {
        name
        for _, name, nest in self.args_of.get(id(component), [])
        if _has_records(nest)
      }
    return sorted(set(wanted) - set(known))

  def ensure_variables(self, component):
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

  def ready(self, node):
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
    # must exist (made by a root API's flow).
    return all(
      c.variables_created
      for api in inline_apis_in((node.args, node.kwargs))
      for c in api.components()
    )

  # --- the worklist --------------------------------------------------------

  def run(self, root_values):
    """`root_values`: record id -> (space, backend value) for root inputs."""
    for rid, (space, value) in root_values.items():
      self.spaces[rid] = space
      self.values[rid] = value
    pending = self.meta.all_nodes()
    while pending:
      still = []
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

  def resolve(self, nest):
    return tree.map_structure(
      lambda x: self.values[x.id] if isinstance(x, OpRecord) else x, nest
    )

  def run_node(self, node):
    args, kwargs = self.resolve(node.args), self.resolve(node.kwargs)
    in_spaces = [self.spaces[r.id] for r in node.inputs()]
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
          component=node.component.path, api=node.api_call.name
        ) from None
      # A declared space wins; a declaration may return None to infer.
      space = declared_space(node.fn, node.component, in_spaces)
      if space is None:
        space = self.backend.value_space(
          value, in_spaces, self.input_leads(node)
        )
    self.values[node.output.id] = value
    self.spaces[node.output.id] = space

  def input_leads(self, node):
    """[(ranks, leading shape)] of the node's input leaves that have batch
    or time ranks: an output starting with the same (even static) dims gets
    the same ranks."""
    out = []
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

  def raise_incomplete(self, stuck_nodes):
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


def declared_space(fn, component, in_spaces):
  """A graph function's declared output space: `output_space(component)`
  or `output_space(component, in_spaces)` (the spaces of the call's
  inputs, in order); None means infer it."""
  declare = fn.output_space
  if declare is None:
    return None
  try:
    params = inspect.signature(declare).parameters
  except (TypeError, ValueError):
    params = ()
  if len(params) >= 2:
    return declare(component, in_spaces)
  return declare(component)


def infer_leaf_space(dtype, shape, in_spaces, in_leads=()):
  """Space of one output tensor from its numpy dtype and shape (None for
  dims unknown at build time). Leading unknown dims become the batch rank,
  and the time rank as well when an input had one (keeping its major-ness).
  Static leading dims count as ranks when they equal the leading dims of an
  input that has ranks (`in_leads`: [(ranks, leading shape)], e.g. a batch
  of a fixed size sampled from a memory). Shapes alone cannot tell a
  [batch, time] value from [batch, feature]: graph functions that change
  ranks (time folding) declare their output spaces instead.
  """
  matches = [
    (ranks, lead)
    for ranks, lead in in_leads
    if None not in lead and tuple(shape[: len(lead)]) == lead
  ]
  if matches and (not shape or shape[0] is not None):
    ranks, lead = max(matches, key=lambda m: len(m[1]))
    return _box(dtype, shape[len(lead) :], ranks)
  leaves = [
    s for space in in_spaces if space is not None for _, s in space.flatten()
  ]
  time_leaf = next((s for s in leaves if s.has_time_rank), None)
  any_batch = any(s.has_batch_rank for s in leaves)
  n_unknown = 0
  for d in shape:
    if d is not None:
      break
    n_unknown += 1
  if n_unknown >= 2 and time_leaf is not None and any_batch:
    ranks = dict(
      add_batch_rank=True, add_time_rank=True, time_major=time_leaf.time_major
    )
    rest = shape[2:]
  elif n_unknown >= 1 and time_leaf is not None and not any_batch:
    ranks = dict(add_time_rank=True)  # Inputs have a time rank only.
    rest = shape[1:]
  elif n_unknown >= 1:
    ranks = dict(add_batch_rank=True)
    rest = shape[1:]
  else:
    ranks = {}
    rest = shape
  return _box(dtype, rest, ranks)


def _box(dtype, rest, ranks):
  kind = dtype.kind
  if kind == "f":
    return sp.FloatBox(rest, dtype=dtype, **ranks)
  if kind in "iu":
    return sp.IntBox(None, rest, dtype=dtype, **ranks)
  if kind == "b":
    return sp.BoolBox(rest, **ranks)
  if kind in "OSU":
    return sp.TextBox(rest, **ranks)
  raise BuildError(f"cannot make a space for dtype {dtype}")


def nest_to_space(nest, leaf_fn):
  """Dict/Tuple space of a nested value, `leaf_fn(leaf)` for the leaves."""
  if nest is None:
    return None
  if isinstance(nest, dict):
    return sp.Dict({k: nest_to_space(v, leaf_fn) for k, v in nest.items()})
  if isinstance(nest, (list, tuple)):
    return sp.Tuple(*[nest_to_space(v, leaf_fn) for v in nest])
  return leaf_fn(nest)
