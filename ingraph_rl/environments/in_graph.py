"""Stepping a `VectorEnv` from TF graphs (and from torch).

`tf_step` / `tf_reset` wrap the env in `tf.numpy_function` and restore static
shapes from the env's spaces, so they work inside `tf.function` and inside a
`tf.while_loop(..., parallel_iterations=1)` (the TF-Agents driver pattern).
The numpy_function is stateful: TF keeps the steps in program order.

Not exportable: a SavedModel containing `tf.numpy_function` fails when it is
called in a fresh process (the Python callable is not saved). Keep env
stepping OUT of exported signatures: export the policy (observation ->
action) only, and step environments in the process that owns them.

Only box (non-container) observation and action spaces are supported.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.environments.vector_env import StepResult
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoxSpace


def _obs_space(env):
  space = env.observation_space
  if not isinstance(space, BoxSpace):
    raise SpaceError(f"in-graph stepping needs a box observation space, got "
                     f"{space!r}", expected="FloatBox, IntBox or BoolBox")
  return space


def step_dtypes(env):
  """TF dtypes of the `StepResult` fields, in field order."""
  obs = _obs_space(env).tf_dtype
  return StepResult(obs, tf.float32, tf.bool, tf.bool, obs, tf.float32,
                    tf.int32)


def step_shapes(env):
  """Static shapes of the `StepResult` fields (leading dim `num_envs`)."""
  n = env.num_envs
  obs = (n,) + tuple(_obs_space(env).shape)
  return StepResult(obs, (n,), (n,), (n,), obs, (n,), (n,))


def tf_step(env, actions, name="env_step"):
  """Steps `env` with actions [N, ...] (a tensor); returns a `StepResult` of
  tensors with static shapes and dtypes (see `step_shapes`, `step_dtypes`)."""
  dtypes = step_dtypes(env)
  action_space = env.action_space
  action_dtype = getattr(action_space, "dtype", None)

  def _step(actions):
    return tuple(env.step(np.asarray(actions, action_dtype)))

  outputs = tf.numpy_function(_step, [actions], list(dtypes), stateful=True,
                              name=name)
  for tensor, shape in zip(outputs, step_shapes(env)):
    tensor.set_shape(shape)
  return StepResult(*outputs)


def tf_reset(env, seed=None, name="env_reset"):
  """Resets `env`; returns obs [N, ...] as a tensor with static shape.

  `seed`: None (see `VectorEnv.reset`), a Python int or an integer scalar
  tensor. A tensor seed < 0 means None.
  """
  space = _obs_space(env)
  if seed is None:
    inputs, fn = [], lambda: env.reset(seed=None)
  else:
    inputs = [tf.cast(seed, tf.int64)]

    def fn(seed):
      seed = int(seed)
      return env.reset(seed=None if seed < 0 else seed)
  obs = tf.numpy_function(fn, inputs, space.tf_dtype, stateful=True,
                          name=name)
  obs.set_shape((env.num_envs,) + tuple(space.shape))
  return obs


def torch_step(env, actions):
  """Steps `env` with actions (a torch tensor or array); returns a
  `StepResult` of CPU torch tensors (sharing memory with the NumPy arrays)."""
  import torch
  if isinstance(actions, torch.Tensor):
    actions = actions.detach().cpu().numpy()
  result = env.step(actions)
  return StepResult(*(torch.from_numpy(np.ascontiguousarray(x))
                      for x in result))


def torch_reset(env, seed=None):
  """Resets `env`; returns obs [N, ...] as a torch tensor."""
  import torch
  return torch.from_numpy(np.ascontiguousarray(env.reset(seed=seed)))
