"""Variable specs, initializers and the registry of a built component tree.

Initial values are made with NumPy from a seeded generator, so the TF and
torch executors start from identical weights given the same seed.
"""

import dataclasses
import math
import typing

import numpy as np
import numpy.typing as npt

from ingraph_rl.errors import BuildError

# How a variable starts: "zeros", "ones", "glorot_uniform", "he_uniform", a
# number or array (broadcast to the shape), or a callable `(shape, dtype,
# rng) -> array` such as `Scaled`.
Initializer = (
  str
  | float
  | npt.ArrayLike
  | typing.Callable[
    [tuple[int, ...], np.dtype, np.random.Generator], npt.ArrayLike
  ]
)


@dataclasses.dataclass(frozen=True)
class VariableSpec:
  path: str  # Full path, e.g. 'agent/net/dense_0/kernel'.
  shape: tuple[int, ...]
  dtype: np.dtype
  initializer: Initializer
  trainable: bool
  torch_permutation: tuple[int, ...] | None = None


def to_torch_layout(
  value: typing.Any, perm: tuple[int, ...] | None
) -> typing.Any:
  """`value` (a NumPy array or a torch tensor, in TF layout) in the torch
  layout of a variable whose `VariableSpec.torch_permutation` is `perm`
  (None: the layouts agree). Torch tensors come back as views.

  >>> to_torch_layout(np.zeros((5, 3)), (1, 0)).shape
  (3, 5)
  """
  if perm is None:
    return value
  if hasattr(value, "permute"):  # A torch tensor: no torch import here.
    return value.permute(*perm)
  return np.transpose(value, perm)


def to_tf_layout(value: typing.Any, perm: tuple[int, ...] | None) -> typing.Any:
  """The inverse of `to_torch_layout`.

  >>> to_tf_layout(np.zeros((2, 3, 4, 5)), (3, 2, 0, 1)).shape
  (4, 5, 3, 2)
  """
  if perm is None:
    return value
  return to_torch_layout(value, tuple(int(i) for i in np.argsort(perm)))


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
  if len(shape) < 1:
    return 1, 1
  if len(shape) == 1:
    return shape[0], shape[0]
  receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
  return shape[-2] * receptive, shape[-1] * receptive


UNIFORM_INITIALIZERS = ("glorot_uniform", "he_uniform")


def _uniform_limit(name: str, shape: tuple[int, ...]) -> float:
  fan_in, fan_out = _fans(shape)
  if name == "glorot_uniform":
    return math.sqrt(6.0 / (fan_in + fan_out))
  return math.sqrt(6.0 / fan_in)  # he_uniform: for ReLU layers.


@dataclasses.dataclass(frozen=True)
class Scaled:
  """A named uniform initializer times `scale`, e.g. a near-uniform initial
  policy: `Dense(6, kernel_initializer=Scaled("glorot_uniform", 0.01))`."""

  name: str
  scale: float

  def __post_init__(self) -> None:
    if self.name not in UNIFORM_INITIALIZERS:
      raise BuildError(
        f"Scaled: unknown initializer {self.name!r}; known: "
        f"{UNIFORM_INITIALIZERS}"
      )

  def __call__(
    self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator
  ) -> np.ndarray:
    limit = self.scale * _uniform_limit(self.name, shape)
    return rng.uniform(-limit, limit, size=shape).astype(dtype)


def initial_value(
  spec: VariableSpec, rng: np.random.Generator
) -> np.ndarray | None:
  """NumPy initial value of `spec`, or None for all-zero (the backend makes
  zeros itself, so a 7 GB replay buffer is never built in NumPy first)."""
  init, shape, dtype = spec.initializer, spec.shape, spec.dtype
  if isinstance(init, str):
    if init == "zeros":
      return None
    if init == "ones":
      return np.ones(shape, dtype)
    if init not in UNIFORM_INITIALIZERS:
      raise BuildError(f"{spec.path}: unknown initializer {init!r}")
    return Scaled(init, 1.0)(shape, dtype, rng)
  if callable(init):
    value = np.asarray(init(shape, dtype, rng), dtype)
  else:
    value = np.broadcast_to(np.asarray(init, dtype), shape)
  if value.shape != shape:
    raise BuildError(
      f"{spec.path}: initializer gave shape {value.shape}, expected {shape}"
    )
  return np.array(value, dtype=dtype)


class VariableRegistry:
  """All variables of a built tree: full path -> (spec, backend variable).

  Weights are exchanged as `{path: numpy array}` in TF layout; the torch
  executor permutes to its own layout (see `VariableSpec.torch_permutation`).
  """

  def __init__(self) -> None:
    self.specs: dict[str, VariableSpec] = {}
    self.variables: dict[str, typing.Any] = {}

  def add(self, spec: VariableSpec, variable: typing.Any) -> None:
    if spec.path in self.specs:
      raise BuildError(f"two variables with the path '{spec.path}'")
    self.specs[spec.path] = spec
    self.variables[spec.path] = variable

  def trainable(self) -> dict[str, typing.Any]:
    return {p: v for p, v in self.variables.items() if self.specs[p].trainable}

  def check_weights(
    self, weights: typing.Mapping[str, npt.ArrayLike]
  ) -> dict[str, np.ndarray]:
    """Raises a clear error unless `weights` has exactly our paths and
    shapes; returns the arrays cast to our dtypes."""
    missing = sorted(set(self.specs) - set(weights))
    extra = sorted(set(weights) - set(self.specs))
    if missing or extra:
      raise BuildError(f"set_weights: missing {missing}, unexpected {extra}")
    out = {}
    for path, spec in self.specs.items():
      arr = np.asarray(weights[path])
      if arr.shape != spec.shape:
        raise BuildError(
          f"set_weights: '{path}' has shape {arr.shape}, expected {spec.shape}"
        )
      out[path] = arr.astype(spec.dtype, copy=False)
    return out
