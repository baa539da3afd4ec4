"""Schedules: a number as a function of a step counter, as components.

Each schedule has one API, `value(step)`, elementwise over a step tensor of
any shape and integer (or float) dtype, returning float32. Values are clamped
at both ends: steps before the start give the start value, steps after the
end give the end value.

    >>> from ingraph_rl.executors.tensorflow import TFExecutor
    >>> from ingraph_rl.spaces import IntBox
    >>> ex = TFExecutor(LinearDecay(1.0, 0.1, steps=100),
    ...                 {"step": IntBox(dtype=np.int64)})
    >>> round(float(ex.execute("value", np.int64(50))), 4)
    0.55
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import torch


class Schedule(Component):
  """Base class: subclasses implement `_formula(step, xp)`, where `xp` is
  `tf` or `torch` and `step` a float64 tensor; the bodies cast the step in
  and the result out (float32), so both backends compute in float64."""

  def __init__(self, scope):
    super().__init__(scope=scope)

  @api
  def value(self, step):
    return self._graph_fn_value(step)

  @graph_fn
  def _graph_fn_value(self, step):
    return tf.cast(self._formula(tf.cast(step, tf.float64), _TF), tf.float32)

  @_graph_fn_value.torch
  def _graph_fn_value(self, step):
    step = torch.as_tensor(step).to(torch.float64)
    return self._formula(step, _TORCH).to(torch.float32)

  def _formula(self, step, ops):
    raise NotImplementedError


class _Ops:
  """The three elementwise ops the formulas need, per backend."""

  def __init__(self, clip, ones_like, pow_, const):
    self.clip, self.ones_like, self.pow = clip, ones_like, pow_
    self.const = const  # A float64 tensor of Python numbers.


_TF = _Ops(
  lambda x, lo, hi: tf.clip_by_value(x, lo, hi),
  tf.ones_like,
  tf.pow,
  lambda values: tf.constant(values, tf.float64),
)
_TORCH = _Ops(
  lambda x, lo, hi: torch.clamp(x, lo, hi),
  lambda x: torch.ones_like(x),
  lambda x, p: torch.pow(x, p),
  lambda values: torch.tensor(values, dtype=torch.float64),
)


def _positive(name, value, scope):
  if not value > 0:
    raise BuildError(f"'{scope}': {name} must be > 0, got {value}")
  return value


class Constant(Schedule):
  """`value` at every step. A sequence of k numbers is a vector value:
  `value(step)` then has shape `step.shape + (k,)` (per-row rates, as
  `EpsilonGreedy` takes them)."""

  def __init__(self, value, scope="constant"):
    super().__init__(scope)
    if isinstance(value, (list, tuple, np.ndarray)):
      self.constant = tuple(float(v) for v in value)
      if not self.constant:
        raise BuildError(f"'{scope}': a vector value needs >= 1 number")
    else:
      self.constant = float(value)

  def _formula(self, step, ops):
    if isinstance(self.constant, tuple):
      return ops.const(self.constant) * ops.ones_like(step)[..., None]
    return self.constant * ops.ones_like(step)


class LinearDecay(Schedule):
  """`from_` until step `begin`, linearly to `to` at `begin + steps`, then
  `to`."""

  def __init__(self, from_, to, steps, begin=0, scope="linear_decay"):
    super().__init__(scope)
    self.from_, self.to = float(from_), float(to)
    self.steps = _positive("steps", int(steps), scope)
    self.begin = int(begin)

  def _formula(self, step, ops):
    frac = ops.clip((step - self.begin) / self.steps, 0.0, 1.0)
    return self.from_ + (self.to - self.from_) * frac


class ExponentialDecay(Schedule):
  """`to + (from_ - to) * 0.5 ** ((step - begin) / half_life_steps)`: halves
  the distance to `to` every `half_life_steps`; `from_` before `begin`."""

  def __init__(
    self, from_, to, half_life_steps, begin=0, scope="exponential_decay"
  ):
    super().__init__(scope)
    self.from_, self.to = float(from_), float(to)
    self.half_life_steps = _positive(
      "half_life_steps", float(half_life_steps), scope
    )
    self.begin = int(begin)

  def _formula(self, step, ops):
    t = ops.clip(step - self.begin, 0.0, np.inf) / self.half_life_steps
    return self.to + (self.from_ - self.to) * ops.pow(0.5 * ops.ones_like(t), t)


class PolynomialDecay(Schedule):
  """`to + (from_ - to) * (1 - frac) ** power` with `frac = (step - begin) /
  steps` clamped to [0, 1] (power 1 is `LinearDecay`)."""

  def __init__(
    self, from_, to, steps, power, begin=0, scope="polynomial_decay"
  ):
    super().__init__(scope)
    self.from_, self.to = float(from_), float(to)
    self.steps = _positive("steps", int(steps), scope)
    self.power = _positive("power", float(power), scope)
    self.begin = int(begin)

  def _formula(self, step, ops):
    frac = ops.clip((step - self.begin) / self.steps, 0.0, 1.0)
    return self.to + (self.from_ - self.to) * ops.pow(1.0 - frac, self.power)
