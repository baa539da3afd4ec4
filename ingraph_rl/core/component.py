"""`Component`: the unit of composition.

Phase 1 (composition) happens in `__init__`: store settings and
sub-components, nothing else. Variables are made later, exactly once, by
`create_variables(input_spaces)` when the builder knows the input spaces.

    class Dense(Component):
      def __init__(self, units, scope="dense"):
        super().__init__(scope=scope)
        self.units = units

      def create_variables(self, input_spaces):
        in_dim = input_spaces["inputs"].shape[-1]
        self.kernel = self.add_variable("kernel", (in_dim, self.units))

      @api
      def call(self, inputs):
        return self._graph_fn_call(inputs)

      @graph_fn
      def _graph_fn_call(self, inputs):
        return tf.matmul(inputs, self.kernel)
"""

import re
import typing

import numpy as np
import numpy.typing as npt

from ingraph_rl.core import decorators
from ingraph_rl.core.backend import Backend
from ingraph_rl.core.inference import infer_leaf_space
from ingraph_rl.core.variables import Initializer, VariableSpec
from ingraph_rl.errors import AssemblyError, BuildError, SpaceError
from ingraph_rl.spaces import BoxSpace, Dict, Space

_SCOPE_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Component:
  """Base class of every component.

  Sub-components are registered by assigning them to attributes (also lists
  or tuples of components) or with `add_components`. Each has a `scope`,
  unique among its siblings; `path` joins the scopes from the root.
  """

  # API arguments whose spaces `create_variables` needs. None: all arguments
  # of all API methods that assembly saw being called.
  variable_args: typing.ClassVar[typing.Collection[str] | None] = None

  # Set with object.__setattr__ (see __setattr__).
  _sub_components: dict[str, "Component"]
  parent: "Component | None"

  def __init__(self, scope: str | None = None) -> None:
    object.__setattr__(self, "_sub_components", {})
    object.__setattr__(self, "parent", None)
    scope = scope or _snake(type(self).__name__)
    if not _SCOPE_RE.match(scope):
      raise AssemblyError(f"bad scope {scope!r}: use letters, digits, _ . -")
    self.scope = scope
    # Argument name -> space; set once by the builder.
    self.input_spaces: dict[str, Space] | None = None
    # Local name -> backend variable.
    self._variables: dict[str, typing.Any] = {}
    self._variable_specs: dict[str, VariableSpec] = {}  # Local name -> spec.
    self._resources: dict[str, typing.Any] = {}  # Local name -> resource.
    # The executor, set by the builder around create_variables.
    self._build_backend: Backend | None = None
    self.built_by: str | None = None  # Executor name once built.
    # The executor (an `executors.base.Executor`), once built.
    self.executor: typing.Any = None

  # --- composition -----------------------------------------------------------

  def __setattr__(self, name: str, value: typing.Any) -> None:
    if "_sub_components" not in self.__dict__:
      raise AssemblyError(
        f"{type(self).__name__}.__init__ must call super().__init__() "
        f"before setting attributes"
      )
    if isinstance(value, Component) and name != "parent":
      self.add_components(value)
    elif (
      isinstance(value, (list, tuple))
      and value
      and all(isinstance(v, Component) for v in value)
    ):
      self.add_components(*value)
    object.__setattr__(self, name, value)

  def add_components(self, *components: "Component") -> typing.Any:
    """Registers sub-components (idempotent for the same object); returns
    the one component given, or the tuple of them."""
    for c in components:
      if c.parent is not None and c.parent is not self:
        raise AssemblyError(
          f"'{c.path}' already belongs to '{c.parent.path}'; cannot add it "
          f"to '{self.path}' as well (one parent per component)"
        )
      other = self._sub_components.get(c.scope)
      if other is not None and other is not c:
        raise AssemblyError(
          f"'{self.path}' already has a sub-component with scope "
          f"'{c.scope}'; give each sibling a unique scope"
        )
      if c is self or self.is_descendant_of(c):
        raise AssemblyError(f"adding '{c.path}' to '{self.path}' makes a cycle")
      self._sub_components[c.scope] = c
      object.__setattr__(c, "parent", self)
    return components[0] if len(components) == 1 else components

  @property
  def sub_components(self) -> dict[str, "Component"]:
    return dict(self._sub_components)

  @property
  def path(self) -> str:
    return (
      self.scope if self.parent is None else f"{self.parent.path}/{self.scope}"
    )

  def is_descendant_of(self, other: "Component") -> bool:
    p = self.parent
    while p is not None:
      if p is other:
        return True
      p = p.parent
    return False

  def walk(self) -> typing.Iterator["Component"]:
    """This component and all descendants, depth first."""
    yield self
    for c in self._sub_components.values():
      yield from c.walk()

  @classmethod
  def api_methods(cls) -> dict[str, decorators.ApiMethod]:
    """Name -> API method of this class (inherited ones included)."""
    out: dict[str, decorators.ApiMethod] = {}
    for klass in reversed(cls.__mro__):
      for name, value in vars(klass).items():
        if isinstance(value, decorators.ApiMethod):
          out[name] = value
        elif name in out:
          del out[name]  # Overridden by a plain attribute.
    return out

  @classmethod
  def internal_apis(cls) -> set[str]:
    """APIs every component has; not exposed as root APIs by default."""
    return {"variables"}

  # --- variables -------------------------------------------------------------

  def create_variables(self, input_spaces: dict[str, Space]) -> None:
    """Override to make variables with `add_variable` (and to read the input
    spaces you need). Called exactly once, when input-complete."""

  @property
  def needs_variables_call(self) -> bool:
    return type(self).create_variables is not Component.create_variables

  @property
  def variables_created(self) -> bool:
    return self.input_spaces is not None or not self.needs_variables_call

  def add_variable(
    self,
    name: str,
    shape: typing.Iterable[int],
    dtype: npt.DTypeLike = np.float32,
    initializer: Initializer = "zeros",
    trainable: bool = True,
    torch_permutation: tuple[int, ...] | None = None,
  ) -> typing.Any:
    """Makes a variable of the executor's backend; only inside
    `create_variables`.

    initializer: "zeros", "ones", "glorot_uniform", "he_uniform", a number,
      a numpy array, or a callable `(shape, dtype, rng) -> array`.
    torch_permutation: axes permutation from this (TF) layout to the torch
      layout, e.g. (1, 0) for a dense kernel stored as (out, in) in torch.
    """
    if self._build_backend is None:
      raise BuildError(
        f"'{self.path}'.add_variable('{name}') called outside create_variables"
      )
    if name in self._variable_specs:
      raise BuildError(f"'{self.path}' already has a variable '{name}'")
    spec = VariableSpec(
      f"{self.path}/{name}",
      tuple(int(d) for d in shape),
      np.dtype(dtype),
      initializer,
      bool(trainable),
      torch_permutation,
    )
    var = self._build_backend.make_variable(self, spec)
    self._variable_specs[name] = spec
    self._variables[name] = var
    return var

  def add_resource(
    self,
    name: str,
    *,
    tf: typing.Callable[[], typing.Any] | None = None,
    torch: typing.Callable[[], typing.Any] | None = None,
  ) -> typing.Any:
    """Makes a non-variable state object (a queue, a staging area) inside
    `create_variables`. `tf` / `torch` are zero-argument factories; the
    executor calls its own. TF resources are tracked by the executor's
    module, so checkpoints and SavedModels include them.
    """
    if self._build_backend is None:
      raise BuildError(
        f"'{self.path}'.add_resource('{name}') called outside create_variables"
      )
    if name in self._resources:
      raise BuildError(f"'{self.path}' already has a resource '{name}'")
    factory = {"tensorflow": tf, "torch": torch}[self._build_backend.backend]
    if factory is None:
      raise BuildError(
        f"'{self.path}'.add_resource('{name}') has no factory "
        f"for the {self._build_backend.backend} executor"
      )
    obj = self._build_backend.make_resource(
      self, f"{self.path}/{name}", factory
    )
    self._resources[name] = obj
    return obj

  def subtree_variables(self) -> dict[str, typing.Any]:
    """Variables of this component and its descendants, keyed by path
    relative to this component (e.g. 'dense_0/kernel')."""
    out: dict[str, typing.Any] = {}
    prefix = len(self.path) + 1
    for c in self.walk():
      for spec in c._variable_specs.values():
        out[spec.path[prefix:]] = c._variables[spec.path.rsplit("/", 1)[1]]
    return out

  # --- helpers for create_variables ---------------------------------------

  def expect_space(
    self,
    input_spaces: dict[str, Space],
    arg: str,
    kind: type | tuple[type, ...] | None = None,
    min_rank: int | None = None,
    rank: int | None = None,
  ) -> typing.Any:
    """Checks an input space and raises a SpaceError naming this component
    and the argument."""
    space = input_spaces.get(arg)
    problems = []
    if space is None:
      problems.append("no space")
    else:
      if kind is not None and not isinstance(space, kind):
        problems.append(f"a {_kind_name(kind)}")
      if not isinstance(space, BoxSpace):
        if min_rank is not None or rank is not None:
          problems.append("a single tensor")
      elif min_rank is not None and space.rank < min_rank:
        problems.append(f"per-item rank >= {min_rank}")
      elif rank is not None and space.rank != rank:
        problems.append(f"per-item rank {rank}")
    if problems:
      want = [_kind_name(kind) if kind else "space"]
      if min_rank is not None:
        want.append(f"per-item rank >= {min_rank}")
      if rank is not None:
        want.append(f"per-item rank {rank}")
      raise SpaceError(
        "unsupported input space",
        component=self.path,
        argument=arg,
        expected=" with ".join(want),
        received=repr(space),
      )
    return space

  # --- built-in APIs -----------------------------------------------------

  @decorators.api
  def variables(self) -> typing.Any:
    """This component's subtree variables, keyed by relative path (e.g. to
    feed a target network's `sync` or an optimizer's `step`). Inside the
    graph they are the variables themselves, so gradients reach them; a
    root API returning them returns their values."""
    return self._graph_fn_variables()

  def subtree_variable_space(self) -> Dict:
    """Dict space of `variables()`, in TF layout in every backend (the
    torch mirror may store some variables permuted)."""
    prefix = len(self.path) + 1
    return Dict(
      {
        spec.path[prefix:]: infer_leaf_space(spec.dtype, spec.shape, [])
        for c in self.walk()
        for spec in c._variable_specs.values()
      }
    )

  @decorators.graph_fn(
    needs_subtree=True,
    neutral=True,
    output_space=lambda self: self.subtree_variable_space(),
  )
  def _graph_fn_variables(self) -> dict[str, typing.Any]:
    return self.subtree_variables()

  def __repr__(self) -> str:
    return f"{type(self).__name__}('{self.path}')"


def _snake(name: str) -> str:
  # "TFOnly" -> "tf_only", "NeuralNetwork" -> "neural_network".
  return re.sub(
    r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name
  ).lower()


def _kind_name(kind: type | tuple[type, ...]) -> str:
  if isinstance(kind, tuple):
    return " or ".join(k.__name__ for k in kind)
  return kind.__name__
