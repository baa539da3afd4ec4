"""The PyTorch executor: runs the same meta graph eagerly with torch bodies.

It exists so that every numerical component can be checked TF-vs-torch.
Spaces flow by running each torch body on two sample inputs of different
batch and time sizes: dims that differ are the batch/time dims. The samples
come from the input spaces, so give bounds that make valid inputs (e.g.
`IntBox(capacity)` for memory indices, `IntBox(65, low=1)` for a batch size;
the bounds are also checked at every call, see `input_checks`); value checks
(`torch_check`) are off during these passes, and variables are reset to
their initial values afterwards.
"""

import typing

import numpy as np
import torch
import tree

from ingraph_rl.core.builder import Builder
from ingraph_rl.core.component import Component
from ingraph_rl.core.inference import InputLead, infer_leaf_space, nest_to_space
from ingraph_rl.core.meta_graph import GraphFnNode, RootApi, inline_apis_in
from ingraph_rl.core.variables import (
  VariableSpec,
  initial_value,
  to_tf_layout,
  to_torch_layout,
)
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors import checks
from ingraph_rl.executors.base import Executor, resolve, root_input_specs
from ingraph_rl.executors.torch_spaces import (
  from_numpy,
  numpy_dtype,
  to_numpy,
  torch_dtype,
)
from ingraph_rl.spaces import BoxSpace, Space, TextBox

# Two (batch, time) sizes for the build passes; products differ too, so
# folded batch*time dims are told apart.
_PASS_SIZES = ((2, 3), (5, 7))


class _Pair:
  """A value of both build passes."""

  __slots__ = ("a", "b")

  def __init__(self, a: typing.Any, b: typing.Any) -> None:
    self.a, self.b = a, b


def _split(nest: typing.Any, which: str) -> typing.Any:
  return tree.map_structure(
    lambda x: getattr(x, which) if isinstance(x, _Pair) else x, nest
  )


def to_torch(value: typing.Any, space: Space) -> typing.Any:
  """NumPy (nest) -> torch tensors, by the space's dtypes."""

  def leaf(v: typing.Any, s: BoxSpace) -> typing.Any:
    if isinstance(s, TextBox):
      return v
    if isinstance(v, torch.Tensor):
      return v
    a = np.asarray(v, dtype=s.dtype)
    # A read-only array (a TF tensor's .numpy()) is copied: torch would
    # share it, warn, and let an in-place write reach the caller's data.
    return torch.as_tensor(a if a.flags.writeable else a.copy())

  # Only down to the boxes: a leaf may be a (nested) Python list.
  return space.unflatten_value(
    [
      leaf(v, s)
      for v, (_, s) in zip(space.flatten_value(value), space.flatten())
    ]
  )


class TorchExecutor(Executor):
  """Builds and runs a component tree with torch bodies (CPU, eager)."""

  backend = "torch"

  def __init__(
    self,
    root: Component,
    input_spaces: typing.Mapping[str, Space],
    **kwargs: typing.Any,
  ) -> None:
    self._initial: dict[str, torch.Tensor] = {}
    super().__init__(root, input_spaces, **kwargs)

  # --- builder hooks -------------------------------------------------------

  def make_variable(
    self, component: Component, spec: VariableSpec
  ) -> typing.Any:
    init = initial_value(spec, self.rng)
    perm = spec.torch_permutation
    if init is None:
      shape = spec.shape if perm is None else tuple(spec.shape[i] for i in perm)
      var = torch.zeros(shape, dtype=torch_dtype(spec.dtype))
    else:
      var = from_numpy(_c_array(to_torch_layout(init, perm)))
    if spec.trainable and var.is_floating_point():
      var.requires_grad_(True)
    # Components that keep per-variable state in TF layout (optimizer
    # slots) view it through this.
    var.torch_permutation = perm
    self.registry.add(spec, var)
    self._initial[spec.path] = var.detach().clone()
    return var

  def make_resource(
    self,
    component: Component,
    path: str,
    factory: typing.Callable[[], typing.Any],
  ) -> typing.Any:
    return factory()

  def run(
    self,
    node: GraphFnNode,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    fn = node.fn
    assert fn is not None  # The builder runs getitem nodes with getitem().
    body = fn.torch_body
    if body is None:
      raise BuildError(
        f"graph function '{node.component.path}'.{fn.name} has no "
        f"torch body; register one with @{fn.name}.torch"
      )
    try:
      a = body(node.component, *_split(args, "a"), **_split(kwargs, "a"))
      b = body(node.component, *_split(args, "b"), **_split(kwargs, "b"))
    except (SpaceError, BuildError):
      raise
    except Exception as e:
      raise BuildError(
        f"'{node.component.path}'.{fn.name} failed on sample inputs "
        f"during the torch build ({type(e).__name__}: {e}); the samples "
        f"come from the input spaces with batch/time sizes {_PASS_SIZES}: "
        f"bound the spaces so samples are valid inputs"
      ) from e
    try:
      return tree.map_structure(_Pair, a, b)
    except (ValueError, TypeError) as e:
      raise BuildError(
        f"'{node.component.path}'.{fn.name} returned "
        f"different structures for different inputs: {e}"
      ) from None

  def getitem(
    self, value: typing.Any, key: typing.Any, node: GraphFnNode
  ) -> typing.Any:
    return tree.map_structure(
      _Pair, _split(value, "a")[key], _split(value, "b")[key]
    )

  def value_shape(self, pair: typing.Any) -> list[int | None]:
    """Dims that differ between the two build passes are None."""
    if not isinstance(pair, _Pair):
      return list(np.shape(pair))
    return [
      x if x == y else None
      for x, y in zip(tuple(pair.a.shape), tuple(pair.b.shape))
    ]

  def value_space(
    self,
    value: typing.Any,
    in_spaces: typing.Sequence[Space | None],
    in_leads: typing.Iterable[InputLead] = (),
  ) -> typing.Any:
    def leaf(pair: typing.Any) -> Space:
      a, b = pair.a, pair.b
      if isinstance(a, np.ndarray) and a.dtype == object:
        shape_a, shape_b, dtype = a.shape, b.shape, a.dtype
      elif isinstance(a, torch.Tensor):
        shape_a, shape_b = tuple(a.shape), tuple(b.shape)
        dtype = numpy_dtype(a.dtype)
      else:
        raise BuildError(f"a torch body returned {a!r}; return tensors")
      shape = [x if x == y else None for x, y in zip(shape_a, shape_b)]
      return infer_leaf_space(dtype, shape, in_spaces, in_leads)

    return nest_to_space(value, leaf)

  def _build(self, builder: Builder) -> None:
    inputs = root_input_specs(self.meta_graph, self.input_spaces)
    root_values = {}
    for i, (rec, space) in enumerate(inputs):
      vals = []
      for batch, time in _PASS_SIZES:
        size = {
          0: None,
          1: batch,
          2: (time, batch) if space.time_major else (batch, time),
        }[_leading(space)]
        vals.append(to_torch(space.sample(size, seed=i), space))
      root_values[rec.id] = (space, tree.map_structure(_Pair, *vals))
    # Autograd stays on: an optimizer's body differentiates during the
    # passes too (bodies that write state do so under torch.no_grad()).
    with checks.suspended():
      builder.run(root_values)
    with torch.no_grad():
      # Bodies with side effects ran during the passes: start clean.
      for path, var in self.registry.variables.items():
        var.copy_(self._initial[path])
    self._initial.clear()

  # --- execution -----------------------------------------------------------

  def _make_functions(self) -> None:
    self._functions = {
      n: self._api_fn(r) for n, r in self.meta_graph.apis.items()
    }

  def _api_fn(self, rapi: RootApi) -> typing.Callable[..., typing.Any]:
    input_ids = [rapi.inputs[a].id for a in rapi.arg_names]
    spaces = [self.input_spaces[a] for a in rapi.arg_names]
    nodes = rapi.nodes

    # Acting needs no autograd history; APIs that differentiate (also
    # through inline APIs) keep it.
    grad = any(n.fn is not None and n.fn.needs_gradients for n in nodes) or any(
      api.needs_gradients
      for n in nodes
      for api in inline_apis_in((n.args, n.kwargs))
    )

    def fn(*args: typing.Any) -> typing.Any:
      with torch.set_grad_enabled(grad):
        out = self.replay(
          nodes,
          input_ids,
          [to_torch(v, s) for v, s in zip(args, spaces)],
          rapi.outputs,
        )
      return tree.map_structure(_leaving_variable, out)

    return fn

  def replay(
    self,
    nodes: list[GraphFnNode],
    input_ids: list[int],
    args: typing.Sequence[typing.Any],
    outputs: typing.Any,
    record: bool = False,
  ) -> typing.Any:
    """Runs recorded graph-function nodes eagerly with their torch bodies
    (autograd needs no `record`)."""
    values = dict(zip(input_ids, args))
    with checks.transaction() as tx:
      for node in nodes:
        if node.fn is None:
          values[node.output.id] = values[node.args[0].id][node.getitem_key]
        else:
          # The build checked that every graph function has a torch body.
          body = typing.cast(
            typing.Callable[..., typing.Any], node.fn.torch_body
          )
          values[node.output.id] = body(
            node.component,
            *resolve(values, node.args),
            **resolve(values, node.kwargs),
          )
    # Reached only when no check raised: the deferred writes happen.
    for write in tx.deferred:
      write()
    return resolve(values, outputs)

  # --- weights ---------------------------------------------------------------

  def get_weights(self) -> dict[str, np.ndarray]:
    out = {}
    for path, var in self.registry.variables.items():
      perm = self.registry.specs[path].torch_permutation
      out[path] = to_tf_layout(to_numpy(var.detach()), perm).copy()
    return out

  def set_weights(self, weights: typing.Mapping[str, typing.Any]) -> None:
    with torch.no_grad():
      for path, value in self.registry.check_weights(weights).items():
        perm = self.registry.specs[path].torch_permutation
        arr = to_torch_layout(value, perm)
        self.registry.variables[path].copy_(from_numpy(_c_array(arr)))


def _leaving_variable(value: typing.Any) -> typing.Any:
  """A variable a root API returns (`variables()`): a copy (a later update
  must not change what was returned) in TF layout, as the weights spaces
  and the TF executor have it. Other values pass as they are."""
  if not hasattr(value, "torch_permutation"):  # Set on variables only.
    return value
  return to_tf_layout(value.detach(), value.torch_permutation).clone()


def _c_array(x: typing.Any) -> np.ndarray:
  """A C-contiguous copy; unlike np.ascontiguousarray keeps 0-d arrays 0-d."""
  return np.array(x, order="C", copy=True)


def _leading(space: Space) -> int:
  leaves = [s for _, s in space.flatten()]
  return leaves[0].num_leading_ranks if leaves else 0
