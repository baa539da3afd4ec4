"""Stepping a `VectorEnv` from TF graphs (and from torch).

`tf_step` / `tf_reset` wrap the env in `tf.numpy_function` and restore static
shapes from the env's spaces, so they work inside `tf.function` and inside a
`tf.while_loop(..., parallel_iterations=1)` (the TF-Agents driver pattern).
The numpy_function is stateful: TF keeps the steps in program order.

Not exportable: a SavedModel containing `tf.numpy_function` fails when it is
called in a fresh process (the Python callable is not saved). Keep env
stepping OUT of exported signatures: export the policy (observation ->
action) only, and step environments in the process that owns them.

Observation spaces: a box, or a `Dict` (any container) of boxes, e.g. DM
Lab's `Dict(RGB_INTERLEAVED=IntBox(256, (72, 96, 3), uint8),
INSTR=TextBox())`. Observations then are dicts of tensors (`obs` and
`final_obs` of the `StepResult` alike); `TextBox` leaves are `tf.string`
(the env gives NumPy arrays of str or bytes).
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.environments.vector_env import StepResult
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tf_spaces import tf_dtype
from ingraph_rl.spaces import BoxSpace, ContainerSpace, TextBox


def _obs_space(env):
  space = env.observation_space
  if isinstance(space, BoxSpace) or (
    isinstance(space, ContainerSpace) and space.flatten()
  ):
    return space
  raise SpaceError(
    f"in-graph stepping needs a box or a Dict of boxes as "
    f"observation space, got {space!r}",
    expected="FloatBox, IntBox, BoolBox, TextBox or a Dict of them",
  )


def _leaves(env):
  """[(path, box space)] of the observation, in `flatten()` order."""
  return _obs_space(env).flatten()


def _np_leaves(env, obs):
  """An observation's leaves as arrays numpy_function returns: text as
  object arrays (TF takes str and bytes there, not numpy's '<U')."""
  space = _obs_space(env)
  out = []
  for (_, leaf), value in zip(space.flatten(), space.flatten_value(obs)):
    if isinstance(leaf, TextBox):
      value = np.asarray(value, dtype=object)
    else:
      value = np.asarray(value, dtype=leaf.dtype)
    out.append(value)
  return out


def _nest(env, leaves):
  """Observation leaves (tensors) -> the observation's structure."""
  space = _obs_space(env)
  return (
    leaves[0] if isinstance(space, BoxSpace) else space.unflatten_value(leaves)
  )


def step_dtypes(env):
  """TF dtypes of the `StepResult` fields, in field order (obs and
  final_obs: a nest like the observation)."""
  obs = _nest(env, [tf_dtype(leaf) for _, leaf in _leaves(env)])
  return StepResult(
    obs, tf.float32, tf.bool, tf.bool, obs, tf.float32, tf.int32
  )


def step_shapes(env):
  """Static shapes of the `StepResult` fields (leading dim `num_envs`)."""
  n = env.num_envs
  obs = _nest(env, [(n,) + tuple(leaf.shape) for _, leaf in _leaves(env)])
  return StepResult(obs, (n,), (n,), (n,), obs, (n,), (n,))


def tf_step(env, actions, name="env_step"):
  """Steps `env` with actions [N, ...] (a tensor); returns a `StepResult` of
  tensors with static shapes and dtypes (see `step_shapes`, `step_dtypes`)."""
  leaves = _leaves(env)
  k = len(leaves)
  action_space = env.action_space
  action_dtype = getattr(action_space, "dtype", None)

  def _step(actions):
    r = env.step(np.asarray(actions, action_dtype))
    return (
      _np_leaves(env, r.obs)
      + [r.rewards, r.terminated, r.truncated]
      + _np_leaves(env, r.final_obs)
      + [r.episode_returns, r.episode_lengths]
    )

  obs_dtypes = [tf_dtype(leaf) for _, leaf in leaves]
  dtypes = (
    obs_dtypes
    + [tf.float32, tf.bool, tf.bool]
    + obs_dtypes
    + [tf.float32, tf.int32]
  )
  outputs = tf.numpy_function(
    _step, [actions], dtypes, stateful=True, name=name
  )
  n = env.num_envs
  obs_shapes = [(n,) + tuple(leaf.shape) for _, leaf in leaves]
  shapes = obs_shapes + [(n,)] * 3 + obs_shapes + [(n,)] * 2
  for tensor, shape in zip(outputs, shapes):
    tensor.set_shape(shape)
  obs, rest = outputs[:k], outputs[k:]
  return StepResult(
    _nest(env, obs),
    rest[0],
    rest[1],
    rest[2],
    _nest(env, rest[3 : 3 + k]),
    rest[3 + k],
    rest[4 + k],
  )


def tf_reset(env, seed=None, name="env_reset"):
  """Resets `env`; returns obs [N, ...] (a nest for a Dict space) as
  tensors with static shapes.

  `seed`: None (see `VectorEnv.reset`), a Python int or an integer scalar
  tensor. A tensor seed < 0 means None.
  """
  leaves = _leaves(env)
  if seed is None:
    inputs = []

    def fn():
      return _np_leaves(env, env.reset(seed=None))
  else:
    inputs = [tf.cast(seed, tf.int64)]

    def fn(seed):
      seed = int(seed)
      return _np_leaves(env, env.reset(seed=None if seed < 0 else seed))

  obs = tf.numpy_function(
    fn, inputs, [tf_dtype(leaf) for _, leaf in leaves], stateful=True, name=name
  )
  if not isinstance(obs, (list, tuple)):
    obs = [obs]  # Eagerly, one output comes back bare.
  for tensor, (_, leaf) in zip(obs, leaves):
    tensor.set_shape((env.num_envs,) + tuple(leaf.shape))
  return _nest(env, list(obs))


def _torch_leaf(x):
  import torch

  if isinstance(x, torch.Tensor):
    return x
  x = np.asarray(x)
  if x.dtype.kind in "OUS":
    return x  # torch has no strings: text stays NumPy.
  return torch.from_numpy(np.ascontiguousarray(x))


def _torch_obs(env, obs):
  space = env.observation_space
  if isinstance(space, BoxSpace):
    return _torch_leaf(obs)
  return space.unflatten_value(
    [_torch_leaf(x) for x in space.flatten_value(obs)]
  )


def torch_step(env, actions):
  """Steps `env` with actions (a torch tensor or array); returns a
  `StepResult` of CPU torch tensors (sharing memory with the NumPy arrays;
  text leaves of Dict observations stay NumPy)."""
  import torch

  if isinstance(actions, torch.Tensor):
    actions = actions.detach().cpu().numpy()
  r = env.step(actions)
  return StepResult(
    _torch_obs(env, r.obs),
    *(_torch_leaf(x) for x in (r.rewards, r.terminated, r.truncated)),
    _torch_obs(env, r.final_obs),
    _torch_leaf(r.episode_returns),
    _torch_leaf(r.episode_lengths),
  )


def torch_reset(env, seed=None):
  """Resets `env`; returns obs [N, ...] as a torch tensor (a nest for a
  Dict space)."""
  return _torch_obs(env, env.reset(seed=seed))
