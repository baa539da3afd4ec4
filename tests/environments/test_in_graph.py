"""tf_step / tf_reset inside tf.function + tf.while_loop; torch_step."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.environments import GymnasiumVectorEnv, StepResult, VectorEnv
from ingraph_rl.environments.in_graph import (
  step_shapes,
  tf_reset,
  tf_step,
  torch_reset,
  torch_step,
)
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import Dict, IntBox
from ingraph_rl.testing.instruction_env import InstructionVectorEnv

N, T, SEED = 4, 50, 11


def _policy_np(obs, noise):
  return ((obs[:, 2] > 0).astype(np.int64) ^ noise).astype(np.int64)


def _python_rollout(noise):
  env = GymnasiumVectorEnv("CartPole-v1", N, seed=0, max_episode_steps=20)
  obs = env.reset(seed=SEED)
  first = obs
  results = []
  for t in range(T):
    result = env.step(_policy_np(obs, noise[t]))
    results.append(result)
    obs = result.obs
  env.close()
  return first, StepResult(*(np.stack(x) for x in zip(*results)))


def test_tf_step_in_while_loop_matches_python():
  noise = np.random.default_rng(1).integers(0, 2, (T, N)).astype(np.int64)
  ref_first, ref = _python_rollout(noise)
  env = GymnasiumVectorEnv("CartPole-v1", N, seed=0, max_episode_steps=20)
  traced_shapes = []

  @tf.function
  def rollout(noise):
    obs = tf_reset(env, tf.constant(SEED))
    first = obs
    arrays = StepResult(
      *(
        tf.TensorArray(d, size=T)
        for d in (
          tf.float32,
          tf.float32,
          tf.bool,
          tf.bool,
          tf.float32,
          tf.float32,
          tf.int32,
        )
      )
    )

    def body(t, obs, arrays):
      action = tf.bitwise.bitwise_xor(
        tf.cast(obs[:, 2] > 0, tf.int64), noise[t]
      )
      result = tf_step(env, action)
      traced_shapes.append(tuple(x.shape.as_list() for x in result))
      arrays = StepResult(*(a.write(t, x) for a, x in zip(arrays, result)))
      return t + 1, result.obs, arrays

    _, _, arrays = tf.while_loop(
      lambda t, *_: t < T,
      body,
      (tf.constant(0), obs, arrays),
      parallel_iterations=1,
    )
    return first, StepResult(*(a.stack() for a in arrays))

  try:
    first, out = rollout(tf.constant(noise))
  finally:
    env.close()
  # Static shapes come from the spaces, inside the loop body.
  assert traced_shapes[0] == tuple(list(s) for s in step_shapes(env))
  assert traced_shapes[0][0] == [N, 4]
  np.testing.assert_array_equal(first.numpy(), ref_first)
  for field in StepResult._fields:
    np.testing.assert_array_equal(
      getattr(out, field).numpy(), getattr(ref, field), err_msg=field
    )
  # The 50 steps crossed episode ends (20-step limit).
  assert ref.truncated.sum() + ref.terminated.sum() >= N
  assert ref.episode_lengths.max() > 0


def test_tf_reset_seed_forms():
  env = GymnasiumVectorEnv("CartPole-v1", 2, seed=3)
  try:
    reset = tf.function(lambda seed: tf_reset(env, seed))
    a = reset(tf.constant(9)).numpy()
    b = reset(tf.constant(9)).numpy()
    np.testing.assert_array_equal(a, b)
    c = reset(tf.constant(-1)).numpy()  # -1: unseeded, stream continues
    assert not np.array_equal(a, c)
    d = tf_reset(env, 9)  # eager, python int
    np.testing.assert_array_equal(d.numpy(), a)
    assert tf_reset(env).shape == (2, 4)  # None
  finally:
    env.close()


def test_torch_step_matches_numpy_step():
  actions = np.random.default_rng(2).integers(0, 2, (30, 2))
  a = GymnasiumVectorEnv("CartPole-v1", 2, seed=5, max_episode_steps=10)
  b = GymnasiumVectorEnv("CartPole-v1", 2, seed=5, max_episode_steps=10)
  try:
    obs = torch_reset(a)
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32
    np.testing.assert_array_equal(obs.numpy(), b.reset())
    for t in range(30):
      result = torch_step(a, torch.from_numpy(actions[t]))
      ref = b.step(actions[t])
      assert result.terminated.dtype == torch.bool
      assert result.episode_lengths.dtype == torch.int32
      for x, y in zip(result, ref):
        assert isinstance(x, torch.Tensor)
        np.testing.assert_array_equal(x.numpy(), y)
  finally:
    a.close()
    b.close()


class _EmptyDictObsEnv(VectorEnv):
  num_envs = 1
  observation_space = Dict()
  action_space = IntBox(2)

  def reset(self, seed=None):
    return {}

  def step(self, actions):
    raise AssertionError("not reached")

  def close(self):
    pass


def test_observations_without_leaves_are_rejected_clearly():
  with pytest.raises(SpaceError, match="box or a Dict of boxes"):
    tf_step(_EmptyDictObsEnv(), tf.zeros([1], tf.int64))


def _dict_rollout(env, actions, seed):
  """reset + steps in NumPy, as lists of StepResults."""
  first = env.reset(seed=seed)
  return first, [env.step(a) for a in actions]


@pytest.mark.slow
def test_dict_observations_with_text_in_while_loop_match_numpy():
  """DM Lab-style Dict observations (a uint8 frame and a string) through
  tf_reset / tf_step in a tf.while_loop: dicts of tensors with static
  shapes, text as tf.string, final_obs the true last observations."""
  steps = 12
  actions = np.random.default_rng(3).integers(0, 3, (steps, N))
  make = lambda: InstructionVectorEnv(
    N, seed=1, episode_length=5, max_episode_steps=4
  )
  ref_first, ref = _dict_rollout(make(), actions, SEED)
  env = make()
  assert step_shapes(env).obs == {
    "INSTR": (N,),
    "RGB_INTERLEAVED": (N, 8, 10, 3),
  }

  @tf.function
  def rollout(actions):
    first = tf_reset(env, tf.constant(SEED))
    arrays = {
      k: tf.TensorArray(d, size=steps)
      for k, d in (
        ("obs_frame", tf.uint8),
        ("obs_text", tf.string),
        ("final_frame", tf.uint8),
        ("final_text", tf.string),
        ("truncated", tf.bool),
      )
    }

    def body(t, arrays):
      r = tf_step(env, actions[t])
      assert r.obs["RGB_INTERLEAVED"].shape == (N, 8, 10, 3)
      assert r.obs["INSTR"].shape == (N,) and r.obs["INSTR"].dtype == tf.string
      values = {
        "obs_frame": r.obs["RGB_INTERLEAVED"],
        "obs_text": r.obs["INSTR"],
        "final_frame": r.final_obs["RGB_INTERLEAVED"],
        "final_text": r.final_obs["INSTR"],
        "truncated": r.truncated,
      }
      return t + 1, {k: a.write(t, values[k]) for k, a in arrays.items()}

    _, arrays = tf.while_loop(
      lambda t, _: t < steps,
      body,
      (tf.constant(0), arrays),
      parallel_iterations=1,
    )
    return first, {k: a.stack() for k, a in arrays.items()}

  first, out = rollout(tf.constant(actions))
  np.testing.assert_array_equal(
    first["RGB_INTERLEAVED"].numpy(), ref_first["RGB_INTERLEAVED"]
  )
  assert [x.decode() for x in first["INSTR"].numpy()] == list(
    ref_first["INSTR"]
  )
  text = lambda x: [[s.decode() for s in row] for row in x.numpy()]
  for key, field, leaf in (
    ("obs", "obs", "RGB_INTERLEAVED"),
    ("final", "final_obs", "RGB_INTERLEAVED"),
  ):
    np.testing.assert_array_equal(
      out[f"{key}_frame"].numpy(),
      np.stack([getattr(r, field)[leaf] for r in ref]),
    )
    assert text(out[f"{key}_text"]) == [
      list(getattr(r, field)["INSTR"]) for r in ref
    ]
  np.testing.assert_array_equal(
    out["truncated"].numpy(), np.stack([r.truncated for r in ref])
  )
  assert out["truncated"].numpy().sum() >= N
