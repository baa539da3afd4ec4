"""What both executors share: assembly, build bookkeeping, the API table,
input checks and weights I/O. Backends fill in variables and bodies."""

import dataclasses
import time
import typing

import numpy as np
import tree

from ingraph_rl.core.assembly import assemble
from ingraph_rl.core.builder import Builder
from ingraph_rl.core.component import Component
from ingraph_rl.core.inference import InputLead
from ingraph_rl.core.meta_graph import GraphFnNode, MetaGraph, OpRecord
from ingraph_rl.core.variables import VariableRegistry, VariableSpec
from ingraph_rl.errors import AssemblyError, SpaceError
from ingraph_rl.executors.checks import space_error_from
from ingraph_rl.executors.input_checks import InputChecks
from ingraph_rl.spaces import Space, describe_value
from ingraph_rl.spaces.space import Size


@dataclasses.dataclass
class BuildStats:
  """Seconds spent in each phase. `trace_s` is the TF executor tracing the
  per-API functions (0 for torch)."""

  assembly_s: float
  build_s: float
  trace_s: float = 0.0

  @property
  def total_s(self) -> float:
    return self.assembly_s + self.build_s + self.trace_s


@dataclasses.dataclass
class ApiSpec:
  """A root API: its argument spaces (in order) and output space nest."""

  name: str
  arg_spaces: dict[str, Space]  # In argument order.
  output_space: typing.Any  # A nest of spaces (None where unknown).


class Executor:
  """Builds a root component and runs its API methods.

  It is the backend core builds with (`core.backend.Backend`): subclasses
  implement the hooks below for their backend.

  Args:
    root: the root component (composed, not yet built).
    input_spaces: argument name -> Space, for the root APIs' arguments.
      Arguments with a Python default and no space stay Python constants.
    api_names: root APIs to build (default: all but built-in ones).
    check_inputs: check every `execute` argument against its space in
      Python: structure, dtype, shape, Python numbers within the dtype's
      range (before anything converts them), and the arguments' batch and
      time sizes agreeing (turn off in hot loops once the inputs are known
      to be right).
    check_values: check argument values: IntBox leaves within their
      bounds, FloatBox leaves finite (see `executors.input_checks`). The
      TF executor builds these checks into its functions (so they also
      guard exported SavedModels; set at build), the torch executor runs
      them in Python. Off: for speed, once the inputs are known to be
      right.
    seed: seed of the NumPy generator that makes initial weights.
  """

  backend: str = ""  # Name, set by subclasses.
  # API name -> callable(*args), made by `_make_functions`.
  _functions: dict[str, typing.Callable[..., typing.Any]]

  def __init__(
    self,
    root: Component,
    input_spaces: typing.Mapping[str, Space],
    *,
    api_names: typing.Iterable[str] | None = None,
    check_inputs: bool = True,
    check_values: bool = True,
    seed: int | None = 0,
  ) -> None:
    if root.parent is not None:
      raise AssemblyError(f"'{root.path}' has a parent; build the root")
    if root.built_by is not None:
      raise AssemblyError(
        f"'{root.path}' was already built by the {root.built_by} executor; "
        f"build a copy instead (copy.deepcopy(component) before building)"
      )
    for name, space in input_spaces.items():
      if not isinstance(space, Space):
        raise SpaceError(
          "input space is not a Space",
          component=root.path,
          argument=name,
          expected="a Space",
          received=repr(space),
        )
    self.root = root
    self.input_spaces = dict(input_spaces)
    self.check_inputs = check_inputs
    self.check_values = check_values
    self.rng = np.random.default_rng(seed)
    self.registry = VariableRegistry()
    for comp in root.walk():
      comp.built_by = self.backend
      comp.executor = self
    self.meta_graph, assembly_s = assemble(root, self.input_spaces, api_names)
    start = time.perf_counter()
    builder = Builder(self.meta_graph, self)
    self._build(builder)
    build_s = time.perf_counter() - start
    self.apis: dict[str, ApiSpec] = {}
    for name, rapi in self.meta_graph.apis.items():
      self.apis[name] = ApiSpec(
        name,
        {a: self.input_spaces[a] for a in rapi.arg_names},
        tree.map_structure(
          lambda r: (
            builder.spaces.get(r.id) if isinstance(r, OpRecord) else None
          ),
          rapi.outputs,
        ),
      )
    # Checks across arguments and of values, per API (before the
    # functions: the TF executor builds them in).
    self.input_checks = {
      n: InputChecks(
        root.path,
        n,
        list(spec.arg_spaces.items()),
        own_leading_dims=getattr(
          getattr(type(root), n, None), "own_leading_dims", frozenset()
        ),
      )
      for n, spec in self.apis.items()
    }
    start = time.perf_counter()
    self._make_functions()
    # What `execute` needs per API, looked up once.
    self._calls = {
      n: (
        self._functions[n],
        list(self.apis[n].arg_spaces.items()),
        self.input_checks[n],
      )
      for n in self._functions
    }
    self.stats = BuildStats(assembly_s, build_s, time.perf_counter() - start)

  # --- backend hooks -------------------------------------------------------

  def _build(self, builder: Builder) -> None:
    """Runs `builder` on the backend's root values."""
    raise NotImplementedError

  def _make_functions(self) -> None:
    """Fills `self._functions`: API name -> callable(*args)."""
    raise NotImplementedError

  def create_variables(
    self, component: Component, input_spaces: dict[str, Space]
  ) -> None:
    component.create_variables(input_spaces)

  def make_variable(
    self, component: Component, spec: VariableSpec
  ) -> typing.Any:
    raise NotImplementedError

  def make_resource(
    self,
    component: Component,
    path: str,
    factory: typing.Callable[[], typing.Any],
  ) -> typing.Any:
    raise NotImplementedError

  def run(
    self,
    node: GraphFnNode,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    raise NotImplementedError

  def getitem(
    self, value: typing.Any, key: typing.Any, node: GraphFnNode
  ) -> typing.Any:
    raise NotImplementedError

  def value_shape(self, value: typing.Any) -> list[int | None]:
    raise NotImplementedError

  def value_space(
    self,
    value: typing.Any,
    in_spaces: typing.Sequence[Space | None],
    in_leads: typing.Iterable[InputLead] = (),
  ) -> typing.Any:
    raise NotImplementedError

  def replay(
    self,
    nodes: list[GraphFnNode],
    input_ids: list[int],
    args: typing.Sequence[typing.Any],
    outputs: typing.Any,
    record: bool = False,
  ) -> typing.Any:
    raise NotImplementedError

  # --- execution -----------------------------------------------------------

  def execute(
    self, api_name: str, *args: typing.Any, **kwargs: typing.Any
  ) -> typing.Any:
    """Runs root API `api_name`; outputs are backend tensors (in the nest
    the API returns)."""
    try:
      fn, arg_spaces, checks = self._calls[api_name]
    except KeyError:
      raise AssemblyError(
        f"'{self.root.path}' has no built API '{api_name}'; built APIs: "
        f"{sorted(self._functions)}"
      ) from None
    if kwargs or len(args) != len(arg_spaces):
      args = self._bind(self.apis[api_name], args, kwargs)
    if self.check_inputs:
      for (name, space), value in zip(arg_spaces, args):
        try:
          space.check(value)
        except SpaceError as e:
          raise e.with_context(
            component=self.root.path, api=api_name, argument=name
          ) from None
      if checks.checks_leading_dims:
        checks.check_leading_dims(args)
    if self.check_values and self._python_value_checks:
      checks.check_values(args)
    try:
      return fn(*args)
    except Exception as e:  # A failed in-graph value check -> SpaceError.
      error = space_error_from(e)
      if error is None:
        raise
      raise self._with_details(error, api_name, args) from None

  # Whether `execute` runs the value checks in Python (the TF executor
  # builds them into its functions instead).
  _python_value_checks = True

  def _with_details(
    self, error: SpaceError, api_name: str, args: typing.Sequence[typing.Any]
  ) -> SpaceError:
    """`error` of a failed in-graph check, with the expected space and the
    received value where it is about one of this call's arguments."""
    names = list(self.apis[api_name].arg_spaces)
    if (
      error.component != self.root.path
      or error.api != api_name
      or error.argument not in names
      or error.reason not in self.input_checks[api_name].graph_reasons
    ):
      return error
    i = names.index(typing.cast(str, error.argument))
    return SpaceError(
      error.reason,
      component=error.component,
      api=error.api,
      argument=error.argument,
      expected=repr(self.apis[api_name].arg_spaces[names[i]]),
      received=describe_value(args[i]),
    )

  def _bind(
    self,
    spec: ApiSpec,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> tuple[typing.Any, ...]:
    names = list(spec.arg_spaces)
    if len(args) > len(names):
      raise SpaceError(
        f"{len(args)} arguments given, {len(names)} expected ({names})",
        component=self.root.path,
        api=spec.name,
        argument=f"#{len(names) + 1} (positional)",
        expected=f"arguments {names}",
      )
    out = dict(zip(names, args))
    for k, v in kwargs.items():
      if k not in names or k in out:
        raise SpaceError(
          f"unexpected or repeated argument '{k}'",
          component=self.root.path,
          api=spec.name,
          argument=k,
          expected=f"arguments {names}",
        )
      out[k] = v
    missing = [n for n in names if n not in out]
    if missing:
      raise SpaceError(
        f"missing arguments {missing}",
        component=self.root.path,
        api=spec.name,
        argument=missing[0],
        expected=f"arguments {names}",
      )
    return tuple(out[n] for n in names)

  def sample_inputs(
    self, api_name: str, size: Size = None, seed: int | None = None
  ) -> list[typing.Any]:
    """Random arguments for `api_name` from the input spaces."""
    rng = np.random.default_rng(seed)
    return [
      s.sample(size if s.num_leading_ranks else None, rng)
      for s in self.apis[api_name].arg_spaces.values()
    ]

  def describe(self) -> str:
    """One line per API: name(arg: space, ...) -> output space."""
    lines = []
    for spec in self.apis.values():
      args = ", ".join(f"{a}: {s!r}" for a, s in spec.arg_spaces.items())
      lines.append(f"{spec.name}({args}) -> {spec.output_space!r}")
    return "\n".join(lines)

  # --- weights ---------------------------------------------------------------

  def get_weights(self) -> dict[str, np.ndarray]:
    """{variable path: numpy array} in TF layout."""
    raise NotImplementedError

  def set_weights(self, weights: typing.Mapping[str, typing.Any]) -> None:
    """Sets every variable from {variable path: array} in TF layout."""
    raise NotImplementedError


def root_input_specs(
  meta_graph: MetaGraph, input_spaces: typing.Mapping[str, Space]
) -> list[tuple[OpRecord, Space]]:
  """[(record, space)] for every root API argument of the meta graph."""
  out = []
  for rapi in meta_graph.apis.values():
    for arg in rapi.arg_names:
      out.append((rapi.inputs[arg], input_spaces[arg]))
  return out


def resolve(values: dict[int, typing.Any], nest: typing.Any) -> typing.Any:
  """`nest` with each record replaced by its value in `values`."""
  return tree.map_structure(
    lambda x: values[x.id] if isinstance(x, OpRecord) else x, nest
  )
