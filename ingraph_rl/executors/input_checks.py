"""The checks of a root API's arguments that look beyond each argument's
own space check (structure, dtype, shape): one shared mechanism for every
root API of every component, in both executors.

Per root API, built once from its argument spaces (`InputChecks`):
  * leading dims: every leaf of every argument with a batch rank has the
    same batch size, and likewise the time size (e.g. DQN's `observe` with
    2 states and 3 rewards is refused before anything is written);
  * values: every IntBox leaf lies within its bounds (actions, indices),
    every FloatBox leaf is finite (no NaN or inf).

Where they run:
  * the TF executor builds them INTO each API's `tf.function` (one
    `tf.debugging.Assert` first, and the whole API under a control
    dependency on it, so no state changes when it fails); exported
    SavedModel signatures carry them too. Under XLA (`jit_compile=True`),
    which compiles asserts away, they run in Python instead;
  * the torch executor runs them in Python (NumPy) before the call;
  * both run the leading-dims check in Python as well, for the clearer
    message (expected and received), when `check_inputs` is on.

A failed check is a `SpaceError` naming the component, the API method and
the argument. `check_values=False` on an executor turns the value checks
off (the leading-dims check stays with `check_inputs`).
"""

import dataclasses
import typing

import numpy as np

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoxSpace, IntBox, Space, describe_value
from ingraph_rl.spaces.space import Path


@dataclasses.dataclass(frozen=True)
class Leaf:
  """One leaf of one argument."""

  arg: str
  arg_index: int
  path: Path
  leaf_index: int  # Position among the argument's leaves.
  space: BoxSpace
  batch_dim: int | None  # Position of the batch dim in the full shape.
  time_dim: int | None

  @property
  def where(self) -> str:
    """The argument, and the leaf's path inside it."""
    return self.arg + "".join(f"[{p!r}]" for p in self.path)


def _leading_dims(space: BoxSpace) -> tuple[int | None, int | None]:
  batch = time = None
  for i, name in enumerate(space.leading_rank_names()):
    if name == "batch":
      batch = i
    else:
      time = i
  return batch, time


def _dim_of(value: typing.Any, dim: int) -> int | None:
  shape = getattr(value, "shape", None)
  if shape is None:
    try:
      shape = np.shape(value)
    except (ValueError, TypeError):  # Ragged lists: the space check says.
      return None
  if isinstance(shape, tuple):
    return shape[dim] if dim < len(shape) else None
  dims = list(shape)  # tf.TensorShape / torch.Size.
  return None if dim >= len(dims) or dims[dim] is None else int(dims[dim])


class InputChecks:
  """The argument checks of one root API (see the module doc).

  component: the root's path; api: the API's name; arg_spaces: (argument,
  space) in argument order; values: include the value checks;
  own_leading_dims: arguments left out of the leading-dims check.
  """

  def __init__(
    self,
    component: str,
    api: str,
    arg_spaces: typing.Sequence[tuple[str, Space]],
    values: bool = True,
    own_leading_dims: typing.AbstractSet[str] = frozenset(),
  ) -> None:
    self.component, self.api = component, api
    self.leaves: list[Leaf] = []
    for i, (name, space) in enumerate(arg_spaces):
      for j, (path, leaf) in enumerate(space.flatten()):
        batch, time = _leading_dims(leaf)
        self.leaves.append(Leaf(name, i, path, j, leaf, batch, time))
    self.value_leaves = [
      x for x in self.leaves if values and x.space.has_value_checks
    ]
    # One leaf per argument suffices in Python (a container's own check
    # makes its leaves agree); in the graph every leaf is compared.
    agreeing = [x for x in self.leaves if x.arg not in own_leading_dims]
    self.batch_leaves = [x for x in agreeing if x.batch_dim is not None]
    self.time_leaves = [x for x in agreeing if x.time_dim is not None]
    self.arg_names = [name for name, _ in arg_spaces]
    self._arg_spaces = [space for _, space in arg_spaces]
    # The reasons of the in-graph checks (the executor adds the expected
    # space and the received value to their errors).
    self.graph_reasons = {
      self.reason(kind, leaf, detail)
      for kind, leaf, detail in self.conditions()
    }
    self._first_per_arg = {
      kind: _first_per_arg(leaves)
      for kind, leaves in (
        ("batch", self.batch_leaves),
        ("time", self.time_leaves),
      )
    }

  @property
  def checks_leading_dims(self) -> bool:
    """Whether two leaves could disagree on a leading dim."""
    return len(self.batch_leaves) > 1 or len(self.time_leaves) > 1

  @property
  def empty(self) -> bool:
    return not (self.value_leaves or self.checks_leading_dims)

  def error(
    self, leaf: Leaf, reason: str, value: typing.Any = None
  ) -> SpaceError:
    where = leaf.where[len(leaf.arg) :]
    return SpaceError(
      f"at {where}: {reason}" if where else reason,
      component=self.component,
      api=self.api,
      argument=leaf.arg,
      expected=repr(leaf.space),
      received=None if value is None else describe_value(value),
    )

  # --- Python (NumPy) --------------------------------------------------------

  def _leaf_values(
    self, args: typing.Sequence[typing.Any], leaves: list[Leaf]
  ) -> list[typing.Any]:
    flat: dict[int, list[typing.Any]] = {}
    out = []
    for leaf in leaves:
      i = leaf.arg_index
      if i not in flat:
        space = self._arg_spaces[i]
        flat[i] = (
          [args[i]]
          if isinstance(space, BoxSpace)
          else space.flatten_value(args[i])
        )
      out.append(flat[i][leaf.leaf_index])
    return out

  def check_leading_dims(self, args: typing.Sequence[typing.Any]) -> None:
    """Raises a SpaceError unless the arguments agree on their batch (and
    time) sizes. Needs arguments that passed their space checks."""
    for kind in ("batch", "time"):
      leaves = self._first_per_arg[kind]
      if len(leaves) < 2:
        continue
      values = self._leaf_values(args, leaves)
      first: tuple[Leaf, int] | None = None
      for leaf, value in zip(leaves, values):
        dim = leaf.batch_dim if kind == "batch" else leaf.time_dim
        size = _dim_of(value, typing.cast(int, dim))
        if size is None:
          continue
        if first is None:
          first = (leaf, size)
        elif size != first[1]:
          raise SpaceError(
            f"{kind} size {size} differs from the {kind} size "
            f"{first[1]} of argument '{first[0].arg}': the arguments of "
            f"one call must agree on it",
            component=self.component,
            api=self.api,
            argument=leaf.arg,
            expected=f"{kind} size {first[1]} (as '{first[0].where}')",
            received=describe_value(value),
          )

  def check_values(self, args: typing.Sequence[typing.Any]) -> None:
    """Raises a SpaceError for the first leaf whose values break its space
    (`BoxSpace.value_problem`)."""
    if not self.value_leaves:
      return
    for leaf, value in zip(
      self.value_leaves, self._leaf_values(args, self.value_leaves)
    ):
      problem = leaf.space.value_problem(value)
      if problem is not None:
        raise self.error(leaf, problem, value)

  # --- what the graph checks ---------------------------------------------

  def conditions(self) -> list[tuple[str, Leaf, typing.Any]]:
    """What an in-graph check tests, as (kind, leaf, detail): ("range",
    leaf, (low, high)), ("finite", leaf, None), ("batch" / "time", leaf,
    the leaf it must agree with)."""
    out: list[tuple[str, Leaf, typing.Any]] = []
    for leaf in self.value_leaves:
      if isinstance(leaf.space, IntBox):
        out.append(("range", leaf, (leaf.space.low, leaf.space.high)))
      else:
        out.append(("finite", leaf, None))
    for kind, leaves in (
      ("batch", self.batch_leaves),
      ("time", self.time_leaves),
    ):
      for leaf in leaves[1:]:
        out.append((kind, leaf, leaves[0]))
    return out

  def reason(self, kind: str, leaf: Leaf, detail: typing.Any) -> str:
    """The message of a failed in-graph condition."""
    where = leaf.where[len(leaf.arg) :]
    at = f"at {where}: " if where else ""
    if kind == "range":
      low, high = detail
      lo = "-inf" if low is None else _bound_text(low)
      hi = "inf" if high is None else _bound_text(high)
      return f"{at}values out of range: expected integers in [{lo}, {hi})"
    if kind == "finite":
      return f"{at}non-finite values (NaN or inf); float inputs must be finite"
    return (
      f"{at}{kind} size differs from the {kind} size of "
      f"'{detail.where}': the arguments of one call must agree on it"
    )


def _bound_text(bound: typing.Any) -> str:
  return str(bound.item()) if np.ndim(bound) == 0 else "per-element bounds"


def _first_per_arg(leaves: list[Leaf]) -> list[Leaf]:
  seen: set[int] = set()
  out = []
  for leaf in leaves:
    if leaf.arg_index not in seen:
      seen.add(leaf.arg_index)
      out.append(leaf)
  return out
