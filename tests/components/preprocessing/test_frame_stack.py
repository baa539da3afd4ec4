"""Tests of `FrameStack` (ingraph_rl/components/preprocessing/
frame_stack.py): per-environment resets against a Python reference."""

import collections

import numpy as np
import pytest

from ingraph_rl.components.preprocessing import FrameStack
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

NUM_ENVS, H, W, K = 3, 5, 4, 4


def _spaces(frame_shape=(H, W), dtype=np.uint8):
  frames = (
    IntBox(256, frame_shape, dtype=dtype, add_batch_rank=True)
    if np.dtype(dtype).kind == "u"
    else FloatBox(frame_shape, dtype=dtype, add_batch_rank=True)
  )
  return {"inputs": frames, "resets": BoolBox(add_batch_rank=True)}


class ReferenceStack:
  """gymnasium FrameStackObservation(padding_type="reset") per env: a deque
  of the last K frames; a reset fills it with the reset frame."""

  def __init__(self, num_envs, k, frame_shape, dtype):
    self.queues = [
      collections.deque([np.zeros(frame_shape, dtype)] * k, maxlen=k)
      for _ in range(num_envs)
    ]
    self.k = k

  def step(self, frames, resets):
    for q, frame, reset in zip(self.queues, frames, resets):
      if reset:
        q.extend([frame] * self.k)
      else:
        q.append(frame)
    return np.stack([np.stack(q, axis=-1) for q in self.queues])


def _sequence(steps, seed, frame_shape=(H, W), dtype=np.uint8):
  rng = np.random.default_rng(seed)
  frames = rng.integers(0, 256, size=(steps, NUM_ENVS) + frame_shape)
  resets = rng.random((steps, NUM_ENVS)) < 0.2
  resets[0] = True
  return frames.astype(dtype), resets


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_matches_reference_with_random_resets(backend, dtype):
  frames, resets = _sequence(30, seed=0, dtype=dtype)
  assert resets[1:].any() and not resets[1:].all()
  t = ComponentTest(FrameStack(K, NUM_ENVS), _spaces(dtype=dtype), backend)
  ref = ReferenceStack(NUM_ENVS, K, (H, W), dtype)
  for step, (f, r) in enumerate(zip(frames, resets)):
    out = t.test("call", f, r)
    assert out.dtype == dtype and out.shape == (NUM_ENVS, H, W, K)
    np.testing.assert_array_equal(out, ref.step(f, r), err_msg=f"step {step}")


def test_reset_fills_and_other_envs_shift():
  t = ComponentTest(FrameStack(3, 2), _spaces((1, 1)))
  f = lambda a, b: np.array([a, b], np.uint8).reshape(2, 1, 1)
  out = t.test("call", f(1, 10), np.array([True, True]))
  np.testing.assert_array_equal(out[:, 0, 0], [[1, 1, 1], [10, 10, 10]])
  out = t.test("call", f(2, 20), np.array([False, False]))
  np.testing.assert_array_equal(out[:, 0, 0], [[1, 1, 2], [10, 10, 20]])
  out = t.test("call", f(3, 30), np.array([False, True]))
  np.testing.assert_array_equal(out[:, 0, 0], [[1, 2, 3], [30, 30, 30]])
  out = t.test("call", f(4, 40), np.array([False, False]))
  np.testing.assert_array_equal(out[:, 0, 0], [[2, 3, 4], [30, 30, 40]])


def test_state_is_a_uint8_variable_and_channel_input():
  t = ComponentTest(FrameStack(K, NUM_ENVS), _spaces((H, W, 1)))
  ((path, value),) = t.get_weights().items()
  assert path == "frame_stack/stack"
  assert value.shape == (NUM_ENVS, H, W, K) and value.dtype == np.uint8
  frames, resets = _sequence(3, seed=1, frame_shape=(H, W, 1))
  for f, r in zip(frames, resets):
    out = t.test("call", f, r)
  np.testing.assert_array_equal(t.get_weights()["frame_stack/stack"], out)
  np.testing.assert_array_equal(out[..., -1], frames[-1][..., 0])
  assert t.executor.apis["call"].output_space.shape == (H, W, K)


def test_parity_over_sequence():
  frames, resets = _sequence(12, seed=2)
  calls = [("call", [f, r]) for f, r in zip(frames, resets)]
  tf_outs, _ = assert_parity(
    FrameStack(K, NUM_ENVS), _spaces(), calls, rtol=0, atol=0
  )
  assert len(tf_outs) == 12


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_wrong_num_envs_is_space_error(backend):
  t = ComponentTest(FrameStack(K, NUM_ENVS), _spaces(), backend)
  with pytest.raises(SpaceError, match="num_envs=3") as info:
    t.test("call", np.zeros((2, H, W), np.uint8), np.ones(2, bool))
  assert (info.value.component, info.value.api, info.value.argument) == (
    "frame_stack",
    "call",
    "inputs",
  )


def test_bad_spaces_and_values():
  with pytest.raises(SpaceError) as info:
    ComponentTest(FrameStack(K, NUM_ENVS), _spaces((H, W, 3)))
  assert (info.value.api, info.value.argument) == ("call", "inputs")
  spaces = _spaces()
  spaces["resets"] = IntBox(2, add_batch_rank=True)
  with pytest.raises(SpaceError) as info:
    ComponentTest(FrameStack(K, NUM_ENVS), spaces)
  assert (info.value.component, info.value.api, info.value.argument) == (
    "frame_stack",
    "call",
    "resets",
  )
  t = ComponentTest(FrameStack(K, NUM_ENVS), _spaces())
  with pytest.raises(SpaceError, match="dtype") as info:
    t.test(
      "call", np.zeros((NUM_ENVS, H, W), np.float32), np.ones(NUM_ENVS, bool)
    )
  assert info.value.argument == "inputs"
  with pytest.raises(BuildError):
    FrameStack(0, 1)
