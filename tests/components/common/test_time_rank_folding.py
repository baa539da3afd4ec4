"""Tests of `TimeRankFolder`
(ingraph_rl/components/common/time_rank_folding.py)."""

import numpy as np
import pytest

from ingraph_rl.components.common import TimeRankFolder
from ingraph_rl.components.layers import Dense
from ingraph_rl.core import Component, api
from ingraph_rl.spaces import Dict, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)
TIME_MAJOR = dict(add_batch_rank=True, add_time_rank=True, time_major=True)
MAJORS = {
  "batch_major": (BATCH_TIME, (2, 3)),
  "time_major": (TIME_MAJOR, (3, 2)),
}
BACKENDS = ["tf", "torch"]
SHAPES = [(), (4,), (2, 3)]


def nest_space(**ranks):
  return Dict(obs=FloatBox((3, 2)), action=IntBox(4), **ranks)


class FoldUnfold(Component):
  """Root: fold(x) and unfold(fold(x), x)."""

  def __init__(self):
    super().__init__(scope="root")
    self.folder = TimeRankFolder(scope="folder")
    self.unfolder = TimeRankFolder(scope="unfolder")

  @api
  def fold(self, inputs):
    return self.folder.fold(inputs)

  @api
  def roundtrip(self, inputs):
    return self.unfolder.unfold(self.folder.fold(inputs), inputs)


class PerStep(FoldUnfold):
  """Adds a Dense applied to every step of [B, T, ...] through folding."""

  def __init__(self):
    super().__init__()
    self.dense = Dense(3, scope="dense")

  @api
  def per_step(self, inputs):
    return self.unfolder.unfold(
      self.dense.call(self.folder.fold(inputs)), inputs
    )


def np_fold(x):
  return x.reshape((-1,) + x.shape[2:])


# --- parity -------------------------------------------------------------------


@pytest.mark.parametrize("major", list(MAJORS))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_parity_fold_roundtrip(major, shape):
  kwargs, lead = MAJORS[major]
  tf_out, _ = assert_parity(
    FoldUnfold(),
    {"inputs": FloatBox(shape, **kwargs)},
    ["fold", "roundtrip"],
    size=lead,
    rtol=0,
    atol=0,
  )
  assert tf_out[0].shape == (6,) + shape
  assert tf_out[1].shape == lead + shape


@pytest.mark.parametrize("major", list(MAJORS))
def test_parity_nest(major):
  kwargs, lead = MAJORS[major]
  assert_parity(
    FoldUnfold(),
    {"inputs": nest_space(**kwargs)},
    ["fold", "roundtrip"],
    size=lead,
    rtol=0,
    atol=0,
  )


@pytest.mark.parametrize("major", list(MAJORS))
def test_parity_per_step(major):
  kwargs, lead = MAJORS[major]
  assert_parity(
    PerStep(),
    {"inputs": FloatBox((4,), **kwargs)},
    ["fold", "roundtrip", "per_step"],
    size=lead,
  )


# --- against reshape ----------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("major", list(MAJORS))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fold_is_reshape(backend, major, shape):
  kwargs, lead = MAJORS[major]
  test = ComponentTest(
    FoldUnfold(), {"inputs": FloatBox(shape, **kwargs)}, backend
  )
  x = np.random.default_rng(2).normal(size=lead + shape).astype(np.float32)
  folded = test.test("fold", x, expected=np_fold(x), rtol=0, atol=0)
  # Row-major: item [i, j] of the leading dims lands at i * lead[1] + j.
  np.testing.assert_array_equal(folded[1 * lead[1] + 1], x[1, 1])
  test.test("roundtrip", x, expected=x, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("major", list(MAJORS))
def test_nest_fold_unfold(backend, major):
  kwargs, lead = MAJORS[major]
  space = nest_space(**kwargs)
  test = ComponentTest(FoldUnfold(), {"inputs": space}, backend)
  x = space.sample(lead, seed=3)
  test.test(
    "fold",
    x,
    expected={"obs": np_fold(x["obs"]), "action": np_fold(x["action"])},
    rtol=0,
    atol=0,
  )
  out = test.test("roundtrip", x, expected=x, rtol=0, atol=0)
  assert out["action"].dtype == np.int32


@pytest.mark.parametrize("major", list(MAJORS))
def test_unfold_takes_leading_dims_of_like(major):
  # TF only: the torch executor builds with the same batch size for every
  # root input, so a pre-folded [B*T] input next to a [B, T] `like` cannot
  # be built there (see the report); unfold(fold(x), x) covers torch.
  kwargs, lead = MAJORS[major]
  spaces = {
    "inputs": FloatBox((5,), add_batch_rank=True),
    "like": nest_space(**kwargs),
  }
  test = ComponentTest(TimeRankFolder(), spaces, "tf")
  x = np.arange(30, dtype=np.float32).reshape(6, 5)
  like = nest_space(**kwargs).sample(lead, seed=4)
  test.test("unfold", x, like, expected=x.reshape(lead + (5,)), rtol=0, atol=0)
  assert test.executor.apis["unfold"].output_space == FloatBox((5,), **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("major", list(MAJORS))
def test_per_step_dense_matches_numpy(backend, major):
  kwargs, lead = MAJORS[major]
  test = ComponentTest(PerStep(), {"inputs": FloatBox((4,), **kwargs)}, backend)
  w = test.get_weights()
  w["root/dense/bias"] = np.array([1.0, -2.0, 0.5], np.float32)
  test.set_weights(w)
  x = np.random.default_rng(5).normal(size=lead + (4,)).astype(np.float32)
  expected = (
    x.astype(np.float64) @ w["root/dense/kernel"] + w["root/dense/bias"]
  )
  test.test("per_step", x, expected=expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_sizes_after_build(backend):
  # Batch/time sizes are not fixed at build: other sizes fold and unfold.
  test = ComponentTest(
    FoldUnfold(), {"inputs": FloatBox((2,), **TIME_MAJOR)}, backend
  )
  for lead in [(1, 1), (4, 3), (1, 5), (7, 1)]:
    x = np.random.default_rng(6).normal(size=lead + (2,)).astype(np.float32)
    test.test("fold", x, expected=np_fold(x), rtol=0, atol=0)
    test.test("roundtrip", x, expected=x, rtol=0, atol=0)


# --- output spaces ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("major", list(MAJORS))
def test_output_spaces(backend, major):
  kwargs, _ = MAJORS[major]
  test = ComponentTest(
    PerStep(), {"inputs": FloatBox((2, 3), **kwargs)}, backend
  )
  apis = test.executor.apis
  assert apis["fold"].output_space == FloatBox((2, 3), add_batch_rank=True)
  out = apis["roundtrip"].output_space
  assert out == FloatBox((2, 3), **kwargs), out
  assert out.time_major == kwargs.get("time_major", False)
  per_step = apis["per_step"].output_space
  assert per_step == FloatBox((2, 3), **kwargs), per_step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("major", list(MAJORS))
def test_output_spaces_nest(backend, major):
  kwargs, _ = MAJORS[major]
  test = ComponentTest(FoldUnfold(), {"inputs": nest_space(**kwargs)}, backend)
  folded = test.executor.apis["fold"].output_space
  assert folded["obs"] == FloatBox((3, 2), add_batch_rank=True)
  assert folded["action"].shape == () and not folded["action"].has_time_rank
  out = test.executor.apis["roundtrip"].output_space
  assert out["obs"] == FloatBox((3, 2), **kwargs)
  assert out["action"].time_major == kwargs.get("time_major", False)
  assert out["action"].has_time_rank and out["action"].dtype == np.int32
