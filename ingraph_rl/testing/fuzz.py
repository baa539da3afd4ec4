"""Fuzzing root APIs with bad inputs derived from their own input spaces.

The promise under test: bad input to any root API gets a clear error and
loses nothing. For every call the `Fuzzer` snapshots the executor's whole
state (every variable, every RNG's state, queue and staging-area sizes),
calls the API, and sorts the outcome:

  rejected  an `IngraphError` (a `SpaceError`, or a documented subclass)
            naming the component and the API method (and the argument,
            where the API has arguments); the state must be bit-identical
            to the snapshot, else a *state change after rejection*;
  accepted  the call returned; if the input was bad for sure (a
            `Mutation` with expect=REJECT) that is a *wrong value
            accepted*; else the target checks its model (records read back
            equal what went in, priorities match, counters advance by one);
            a mismatch is counted as *inconsistent*;
  raw       any other exception (a TF op error, a torch RuntimeError, a
            TypeError): a *raw backend error*.

Bad inputs come from the argument spaces of the API (`mutations`): wrong
dtype, rank and shape; disagreeing batch and time sizes; IntBox values out
of range; NaN and inf; None; strings; missing and extra dict keys; tuples of
the wrong length; Python ints beyond the int32 / int64 range; missing and
extra arguments. Empty and huge batches and Python lists are legal inputs
(MAY: accepted or refused, never raw, never inconsistent).

Targets (the components and agents under test, with a model of what their
state should be) live in `tests/fuzz/`; `Stats` counts every call per
target, backend and API (`make fuzz` prints the table).
"""

import collections
import dataclasses
import json

import hypothesis.strategies as st
import numpy as np
import tree

from ingraph_rl.errors import IngraphError, SpaceError
from ingraph_rl.spaces import (
  BoxSpace,
  Dict,
  FloatBox,
  IntBox,
  Space,
  TextBox,
  Tuple,
)

REJECT = "reject"  # Must raise a clear error.
MAY = "may"  # Either; if accepted, the model must hold.
VALID = "valid"  # Must be accepted.

COLUMNS = (
  "calls",
  "rejected",
  "accepted",
  "raw_errors",
  "state_changes",
  "wrong_accepted",
  "inconsistent",
  "valid_refused",
)


@dataclasses.dataclass
class Mutation:
  """A call's arguments and what must happen to them."""

  kind: str
  args: list
  expect: str
  note: str = ""


class Stats:
  """Counts per (target, backend, api); failures with their details."""

  def __init__(self) -> None:
    self.counts: dict = collections.defaultdict(collections.Counter)
    self.kinds: dict = collections.defaultdict(collections.Counter)
    self.failures: list[str] = []

  def add(self, key, column, n=1):
    self.counts[key][column] += n

  def fail(self, key, message):
    self.failures.append(f"{'/'.join(key)}: {message}")

  def totals(self, keys=None):
    total = collections.Counter()
    for key, c in self.counts.items():
      if keys is None or key in keys:
        total.update(c)
    return total

  def table(self) -> str:
    """One line per (target, backend, api), then per target, then all."""
    head = f"{'target/backend/api':44s}" + "".join(
      f"{c[:10]:>11s}" for c in COLUMNS
    )
    lines = [head, "-" * len(head)]
    by_target = collections.defaultdict(collections.Counter)
    for key in sorted(self.counts):
      c = self.counts[key]
      by_target[key[0]].update(c)
      lines.append(
        f"{'/'.join(key)[:44]:44s}" + "".join(f"{c[x]:>11d}" for x in COLUMNS)
      )
    lines.append("-" * len(head))
    for target in sorted(by_target):
      c = by_target[target]
      lines.append(
        f"{target[:44]:44s}" + "".join(f"{c[x]:>11d}" for x in COLUMNS)
      )
    c = self.totals()
    lines.append(f"{'ALL':44s}" + "".join(f"{c[x]:>11d}" for x in COLUMNS))
    return "\n".join(lines)

  def to_json(self) -> dict:
    return {
      "columns": list(COLUMNS),
      "per_api": {
        "/".join(k): {x: v[x] for x in COLUMNS}
        for k, v in sorted(self.counts.items())
      },
      "mutation_kinds": {
        "/".join(k): dict(v) for k, v in sorted(self.kinds.items())
      },
      "totals": {x: self.totals()[x] for x in COLUMNS},
      "failures": self.failures[:50],
    }

  def dump(self, path) -> None:
    with open(path, "w") as f:
      json.dump(self.to_json(), f, indent=2, sort_keys=True)


STATS = Stats()


# --- state snapshots ---------------------------------------------------------


def snapshot(executor) -> dict:
  """Every piece of the executor's state as NumPy: variables, RNG states,
  queue and staging-area sizes (by path)."""
  out = {f"var:{k}": np.array(v) for k, v in executor.get_weights().items()}
  for comp in executor.root.walk():
    for name, res in getattr(comp, "_resources", {}).items():
      key = f"res:{comp.path}/{name}"
      value = _resource_state(res)
      if value is not None:
        out[key] = value
  return out


def _resource_state(res):
  kind = type(res).__name__
  if kind == "Generator" and hasattr(res, "state"):  # tf.random.Generator
    return np.array(res.state.numpy())
  if kind == "Generator" and hasattr(res, "get_state"):  # torch.Generator
    return np.array(res.get_state().numpy())
  if kind == "QueueResource":
    import tensorflow as tf

    return np.array(tf.raw_ops.QueueSizeV2(handle=res.resource_handle).numpy())
  if kind == "_TFStagingBuffer":
    import tensorflow as tf

    return np.array(
      tf.raw_ops.StageSize(dtypes=res.dtypes, **res.attrs()).numpy()
    )
  return None


def changed(before: dict, after: dict) -> list[str]:
  """Paths whose value is not bit-identical (NaN == NaN)."""
  out = [k for k in before if k not in after] + [
    k for k in after if k not in before
  ]
  for k, a in before.items():
    b = after.get(k)
    if b is None:
      continue
    if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
      out.append(k)
  return out


# --- mutations from spaces ---------------------------------------------------


def _leaf_paths(space: Space):
  return [path for path, _ in space.flatten()]


def _get(value, path):
  for p in path:
    value = value[p]
  return value


def _set(value, path, new):
  """A copy of nest `value` with the leaf at `path` replaced."""
  if not path:
    return new
  if isinstance(value, dict):
    out = dict(value)
  else:
    out = list(value)
  out[path[0]] = _set(value[path[0]], path[1:], new)
  return out if isinstance(value, dict) else type(value)(out)


_OTHER_DTYPE = {
  "f": [np.float64, np.float16, np.int32],
  "i": [np.int64, np.int16, np.float32, np.uint8],
  "u": [np.int32, np.int16, np.float32],
  "b": [np.int8, np.int32, np.float32],
}


def _other_dtype(draw, dtype: np.dtype):
  choices = [
    d for d in _OTHER_DTYPE.get(dtype.kind, [np.int32]) if np.dtype(d) != dtype
  ]
  if dtype.kind == "i":
    choices.append(np.int32 if dtype == np.int64 else np.int64)
  return draw(st.sampled_from(choices))


def _leading_dims(box: BoxSpace):
  names = box.leading_rank_names()
  return {n: i for i, n in enumerate(names)}


def leaf_kinds(box: BoxSpace) -> list[str]:
  """Bad-value kinds that apply to one leaf."""
  kinds = ["none", "dtype", "rank"]
  if not isinstance(box, TextBox):
    kinds += ["string", "python_overflow"]
  if any(d is not None for d in box.shape):
    kinds.append("shape")
  if isinstance(box, FloatBox):
    kinds += ["nan", "inf"]
  if isinstance(box, IntBox) and box.has_value_checks:
    kinds.append("range")
  if not isinstance(box, TextBox):
    kinds.append("python_list")
  return kinds


def _python_overflow(draw, box: BoxSpace, value):
  """Python numbers with one beyond the leaf dtype's range (int32: 2**31
  and up; int64: 2**63 and up; float32: 1e39; floats: 10**400)."""
  if isinstance(box, FloatBox):
    options = [10**400, -(10**400)]
    if box.dtype != np.float64:
      options.append(1e39)
  elif box.dtype.kind in "iu":
    info = np.iinfo(box.dtype)
    options = [
      x
      for x in (2**31, 2**31 + 5, 2**40 + 1, 2**63, 2**64 + 3, -(2**63) - 1)
      if not info.min <= x <= info.max
    ] + [2**70, -(2**70)]
  else:  # bool: a Python int is not a bool anyway.
    options = [2**40]
  big = draw(st.sampled_from(options))
  arr = np.asarray(value)
  if arr.ndim == 0 or arr.size == 0:
    return big
  flat = arr.reshape(-1).tolist()
  flat[draw(st.integers(0, len(flat) - 1))] = big
  return np.array(flat, dtype=object).reshape(arr.shape).tolist()


def bad_leaf(draw, kind, box: BoxSpace, value):
  """(new value, expectation) for a bad `kind` of one leaf value."""
  arr = np.asarray(value)
  if kind == "none":
    return None, REJECT
  if kind == "string":
    return draw(st.sampled_from(["abc", "", "1"])), REJECT
  if kind == "dtype":
    return arr.astype(_other_dtype(draw, box.dtype)), REJECT
  if kind == "rank":
    if arr.ndim and draw(st.booleans()):
      # One rank less; a zero-sized last dim has no element to keep.
      lower = arr[..., 0] if arr.shape[-1] else np.zeros(arr.shape[:-1])
      return lower.astype(arr.dtype), REJECT
    return arr[..., None], REJECT
  if kind == "shape":
    dims = [i for i, d in enumerate(box.shape) if d is not None]
    i = box.num_leading_ranks + draw(st.sampled_from(dims))
    shape = list(arr.shape)
    shape[i] = shape[i] + draw(st.sampled_from([1, 2])) if shape[i] else 1
    return np.resize(arr, shape).astype(arr.dtype), REJECT
  if kind in ("nan", "inf"):
    if arr.size == 0:
      return arr, MAY  # Nothing to spoil.
    out = arr.copy()
    flat = out.reshape(-1)
    i = draw(st.integers(0, flat.size - 1))
    flat[i] = (
      np.nan if kind == "nan" else draw(st.sampled_from([np.inf, -np.inf]))
    )
    return out, REJECT
  if kind == "range":
    if arr.size == 0:
      return arr, MAY
    info = np.iinfo(box.dtype)
    options = []
    if box.high is not None and np.all(box.high <= info.max):
      hi = int(np.max(box.high))
      options += [hi, min(hi + 7, int(info.max)), int(info.max)]
    if box.low is not None and np.all(box.low > info.min):
      lo = int(np.min(box.low))
      options += [lo - 1, int(info.min)]
    bad = draw(st.sampled_from(options))
    out = arr.copy()
    flat = out.reshape(-1)
    flat[draw(st.integers(0, flat.size - 1))] = bad
    return out, REJECT
  if kind == "python_overflow":
    return _python_overflow(draw, box, arr), REJECT
  if kind == "python_list":
    return arr.tolist(), MAY
  raise ValueError(kind)


def _batch_leaves(arg_spaces):
  out = []
  for i, (_, space) in enumerate(arg_spaces):
    for path, leaf in space.flatten():
      lead = _leading_dims(leaf)
      if lead:
        out.append((i, path, leaf, lead))
  return out


def mutate(draw, arg_spaces, args, extra_kinds=()) -> Mutation:
  """A bad version of the (good) `args` of an API with `arg_spaces`
  [(name, space)]: one mutation, drawn with `draw`."""
  args = list(args)
  kinds = ["extra_arg"] + list(extra_kinds)
  if args:
    kinds += ["missing_arg", "leaf", "leaf", "leaf"]
  batch = _batch_leaves(arg_spaces)
  for dim_name in ("batch", "time"):
    if sum(1 for *_, lead in batch if dim_name in lead) >= 2:
      kinds.append(f"{dim_name}_disagree")
  containers = [
    i for i, (_, s) in enumerate(arg_spaces) if isinstance(s, (Dict, Tuple))
  ]
  if containers:
    kinds.append("structure")
  kind = draw(st.sampled_from(kinds))
  if kind == "extra_arg":
    return Mutation(kind, args + [np.zeros(1, np.float32)], REJECT)
  if kind == "missing_arg":
    i = draw(st.integers(0, len(args) - 1))
    return Mutation(kind, args[:i] + args[i + 1 :], REJECT)
  if kind in ("batch_disagree", "time_disagree"):
    dim_name = kind.split("_")[0]
    cands = [b for b in batch if dim_name in b[3]]
    i, path, leaf, lead = draw(st.sampled_from(cands))
    value = np.asarray(_get(args[i], path))
    axis = lead[dim_name]
    n = value.shape[axis]
    new_n = draw(st.sampled_from([n + 1, n + 2, max(n - 1, 0)]))
    if new_n == n:
      new_n = n + 1
    idx = np.arange(new_n) % max(n, 1)
    new = (
      np.take(value, idx, axis=axis)
      if n
      else np.zeros(
        value.shape[:axis] + (new_n,) + value.shape[axis + 1 :], value.dtype
      )
    )
    args[i] = _set(args[i], path, new)
    return Mutation(kind, args, REJECT, f"{arg_spaces[i][0]}{list(path)}")
  if kind == "structure":
    i = draw(st.sampled_from(containers))
    name, space = arg_spaces[i]
    value = args[i]
    if isinstance(space, Dict):
      if draw(st.booleans()) and len(value):
        key = draw(st.sampled_from(sorted(value)))
        new = {k: v for k, v in value.items() if k != key}
        args[i] = new
        return Mutation("missing_key", args, REJECT, f"{name}[{key!r}]")
      new = dict(value)
      new[draw(st.sampled_from(["extra", "zz", "__x"]))] = np.zeros(1)
      args[i] = new
      return Mutation("extra_key", args, REJECT, name)
    new = list(value)
    new = new[:-1] if draw(st.booleans()) and new else new + [np.zeros(1)]
    args[i] = tuple(new)
    return Mutation("tuple_length", args, REJECT, name)
  # One leaf of one argument.
  i = draw(st.integers(0, len(args) - 1))
  name, space = arg_spaces[i]
  paths = _leaf_paths(space)
  path = draw(st.sampled_from(paths))
  box = dict(space.flatten())[path]
  leaf_kind = draw(st.sampled_from(leaf_kinds(box)))
  new, expect = bad_leaf(draw, leaf_kind, box, _get(args[i], path))
  args[i] = _set(args[i], path, new)
  return Mutation(leaf_kind, args, expect, f"{name}{list(path)}")


# --- good values -------------------------------------------------------------


def sample(space: Space, rng: np.random.Generator, batch=None, time=None):
  """A value of `space` with the given batch and time sizes."""

  def leaf(box):
    lead = []
    for name in box.leading_rank_names():
      lead.append(batch if name == "batch" else time)
    size = tuple(lead) if lead else None
    if isinstance(box, FloatBox) and box.low is None and box.high is None:
      return rng.standard_normal(
        (tuple(lead) if lead else ()) + tuple(box.shape)
      ).astype(box.dtype)
    return box.sample(size, seed=rng)

  return tree.map_structure(leaf, space.structure())


def is_clear(error: BaseException, api: str, has_args: bool) -> str | None:
  """Why `error` is not a clear error for `api`, or None."""
  if not isinstance(error, IngraphError):
    return f"not an IngraphError: {type(error).__name__}"
  if isinstance(error, SpaceError):
    if not error.component:
      return "names no component"
    if not error.api:
      return "names no API method"
    if has_args and not error.argument:
      return "names no argument"
  return None


class Fuzzer:
  """Calls one executor's root APIs and sorts the outcomes (module doc).

  target: the target's name (the first column of the counts); backend:
  "tf" or "torch".
  """

  def __init__(self, target: str, backend: str, executor, stats=STATS):
    self.target, self.backend, self.executor = target, backend, executor
    self.stats = stats
    self.state = snapshot(executor)
    self.log: collections.deque = collections.deque(maxlen=12)
    # State keys a call consumes whatever it does (a queue-fed API's input
    # queue: a rejected batch is taken off it too), left out of the
    # state-change check.
    self.consumed: frozenset = frozenset()

  def key(self, api):
    return (self.target, self.backend, api)

  def arg_spaces(self, api):
    return list(self.executor.apis[api].arg_spaces.items())

  def resync(self):
    """Takes a fresh snapshot (after calls made outside `call`)."""
    self.state = snapshot(self.executor)

  def call(self, api, args, expect=VALID, kind="good", note=""):
    """Runs one call; returns ("rejected" | "accepted" | "raw", result or
    error)."""
    key = self.key(api)
    self.stats.add(key, "calls")
    self.stats.kinds[key][kind] += 1
    self.log.append(f"{api}[{kind}{' ' + note if note else ''}]")
    before = self.state
    try:
      out = self.executor.execute(api, *args)
    except Exception as error:  # noqa: BLE001 - sorted below.
      after = snapshot(self.executor)
      self.state = after
      moved = [k for k in changed(before, after) if k not in self.consumed]
      if not isinstance(error, IngraphError):
        self.stats.add(key, "raw_errors")
        self.stats.fail(
          key,
          f"raw {type(error).__name__} for {kind} {note}: "
          f"{str(error)[:300]} (calls: {list(self.log)})",
        )
        if moved:
          self.stats.add(key, "state_changes")
        return "raw", error
      self.stats.add(key, "rejected")
      unclear = is_clear(error, api, bool(self.arg_spaces(api)))
      if unclear:
        self.stats.add(key, "raw_errors")
        self.stats.fail(key, f"unclear error ({unclear}): {error}")
      if moved:
        self.stats.add(key, "state_changes")
        self.stats.fail(
          key,
          f"state changed after a rejected {kind} {note}: {moved[:6]} "
          f"({str(error).splitlines()[0][:200]}; calls: {list(self.log)})",
        )
      if expect == VALID:
        self.stats.add(key, "valid_refused")
        self.stats.fail(key, f"valid call refused: {error}")
      return "rejected", error
    self.state = snapshot(self.executor)
    self.stats.add(key, "accepted")
    if expect == REJECT:
      self.stats.add(key, "wrong_accepted")
      self.stats.fail(
        key, f"accepted a bad input ({kind} {note}); calls: {list(self.log)}"
      )
    return "accepted", out

  def inconsistent(self, api, message):
    key = self.key(api)
    self.stats.add(key, "inconsistent")
    self.stats.fail(key, f"inconsistent: {message} (calls: {list(self.log)})")


def numpy_of(nest):
  """A result nest as NumPy."""

  def leaf(x):
    if hasattr(x, "detach"):
      return x.detach().cpu().numpy()
    if hasattr(x, "numpy"):
      return np.asarray(x.numpy())
    return np.asarray(x)

  return tree.map_structure(leaf, nest)


def same(a, b) -> bool:
  """Bit-identical nests of arrays (NaN == NaN)."""
  try:
    tree.assert_same_structure(a, b, check_types=False)
  except (ValueError, TypeError):
    return False
  for x, y in zip(tree.flatten(a), tree.flatten(b)):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or not np.array_equal(
      x, y, equal_nan=x.dtype.kind == "f"
    ):
      return False
  return True


class Target:
  """A component or agent under fuzz, with a model of its state.

  Subclasses set `name` and `weights` ({api: relative frequency}), build
  their executor in `__init__` (then call `super().__init__(backend,
  executor)`) and implement:
    good_args(api, rng, batch) -> (args, status): arguments of a correct
      call with `batch` rows where the API takes batches (None: the
      target's usual size), and what must happen to them in the current
      state: VALID (accepted), REJECT (refused, e.g. sampling from an
      empty memory, a batch of the wrong size for the streams) or None
      (must not be made: e.g. a dequeue from an empty queue would block;
      the args then only serve as the template of bad ones);
    safe(api, args) -> whether an accepted call with these (legal but
      unusual) args could not block;
    check(api, args, out) -> after an accepted call: update the model and
      call `self.fuzzer.inconsistent(api, why)` where the state or the
      result is not what the model says.
  `edge_sizes` are the unusual batch sizes tried (empty, huge).
  """

  name = "target"
  weights: dict = {}
  edge_sizes = (0, 64)

  def __init__(self, backend, executor, stats=STATS):
    self.backend = backend
    self.executor = executor
    self.fuzzer = Fuzzer(self.name, backend, executor, stats)
    self._apis = [a for a, w in self.weights.items() for _ in range(w)]

  def good_args(self, api, rng, batch=None):
    raise NotImplementedError

  def safe(self, api, args):
    return True

  def check(self, api, args, out):
    pass

  def has_batch(self, api):
    return any(
      s.has_batch_rank or any(b.has_batch_rank for _, b in s.flatten())
      for _, s in self.fuzzer.arg_spaces(api)
    )

  def step(self, draw):
    """One call: a correct one, a bad one, or one with an edge size."""
    api = draw(st.sampled_from(self._apis))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mode = draw(st.sampled_from(["good", "bad", "bad", "edge"]))
    if mode == "edge" and not self.has_batch(api):
      mode = "good"
    batch = draw(st.sampled_from(self.edge_sizes)) if mode == "edge" else None
    args, status = self.good_args(api, rng, batch)
    if mode in ("good", "edge"):
      if status is None:
        return
      expect = status if status == REJECT else VALID
      if mode == "edge" and expect == VALID:
        expect = MAY
      m = Mutation(
        mode if mode == "good" else f"batch_{batch}", list(args), expect
      )
    else:
      m = mutate(draw, self.fuzzer.arg_spaces(api), args)
      if m.expect != REJECT:
        if status is None:
          return
        if status == REJECT:
          m.expect = REJECT
    if m.expect != REJECT and not self.safe(api, m.args):
      return
    status, out = self.fuzzer.call(api, m.args, m.expect, m.kind, m.note)
    if status == "accepted":
      self.check(api, m.args, out)
