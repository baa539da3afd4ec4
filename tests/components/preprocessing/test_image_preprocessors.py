"""Tests of `Grayscale`, `Resize` and `Crop`
(ingraph_rl/components/preprocessing/), against cv2 / NumPy references."""

import cv2
import numpy as np
import pytest

from ingraph_rl.components.preprocessing import (
  Cast,
  Crop,
  Grayscale,
  PreprocessorStack,
  Resize,
)
from ingraph_rl.components.preprocessing.resize import area_weights
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

BATCH = dict(add_batch_rank=True)
BATCH_TIME = dict(add_batch_rank=True, add_time_rank=True)


def _uint8(shape, **ranks):
  return IntBox(256, shape=shape, dtype=np.uint8, **ranks)


def _images(shape, n=3, seed=0, dtype=np.uint8):
  x = np.random.default_rng(seed).integers(0, 256, size=(n,) + shape)
  return x.astype(dtype)


def _run(component, space, *args, backend="tf"):
  return ComponentTest(component, {"inputs": space}, backend).test(
    "call", *args
  )


# --- Grayscale ---------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_grayscale_matches_cv2_on_float(backend):
  x = _images((9, 7, 3), dtype=np.float32)
  out = _run(Grayscale(), FloatBox((9, 7, 3), **BATCH), x, backend=backend)
  ref = np.stack([cv2.cvtColor(im, cv2.COLOR_RGB2GRAY) for im in x])
  assert out.shape == (3, 9, 7, 1) and out.dtype == np.float32
  np.testing.assert_allclose(out[..., 0], ref, rtol=1e-6, atol=1e-4)


def test_grayscale_weights_by_hand():
  # Pure red, green, blue and white pixels give the three weights and 255.
  x = np.array(
    [[[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]]], np.uint8
  )
  out = _run(Grayscale(keepdims=False), _uint8((1, 4, 3), **BATCH), x)
  assert out.shape == (1, 1, 4)
  np.testing.assert_allclose(
    out[0, 0], [76.245, 149.685, 29.07, 255.0], rtol=1e-6
  )


def test_grayscale_then_cast_matches_cv2_uint8():
  # cv2 computes uint8 grayscale in fixed point; rounding ties may differ
  # by one grey level from our float-then-round.
  x = _images((32, 32, 3), n=4, seed=1)
  out = _run(
    PreprocessorStack(Grayscale(keepdims=False), Cast(np.uint8)),
    _uint8((32, 32, 3), **BATCH),
    x,
  )
  ref = np.stack([cv2.cvtColor(im, cv2.COLOR_RGB2GRAY) for im in x])
  assert out.dtype == np.uint8
  diff = np.abs(out.astype(int) - ref)
  assert diff.max() <= 1
  assert (diff > 0).mean() < 0.01


def test_grayscale_time_rank_and_parity():
  space = _uint8((5, 6, 3), **BATCH_TIME)
  (out,), _ = assert_parity(
    Grayscale(), {"inputs": space}, ["call"], size=(2, 3)
  )
  assert out.shape == (2, 3, 5, 6, 1)


# --- Resize ------------------------------------------------------------------


def test_area_weights_by_hand():
  # 5 -> 2: footprints [0, 2.5) and [2.5, 5); the middle pixel splits.
  np.testing.assert_allclose(
    area_weights(5, 2), [[0.4, 0.4, 0.2, 0, 0], [0, 0, 0.2, 0.4, 0.4]]
  )
  np.testing.assert_allclose(area_weights(4, 2).sum(1), [1, 1])


CV2 = {
  "area": cv2.INTER_AREA,
  "bilinear": cv2.INTER_LINEAR,
  "nearest": cv2.INTER_NEAREST_EXACT,
}


def np_nearest(x, out_hw):
  """Half-pixel-centre nearest: source index floor((o + 0.5) * in / out).
  (cv2's INTER_NEAREST_EXACT computes it in fixed point and is one pixel
  low where (o + 0.5) * in / out is an integer: 160 -> 84 at o = 52, 73.)"""
  iy = np.floor((np.arange(out_hw[0]) + 0.5) * x.shape[1] / out_hw[0])
  ix = np.floor((np.arange(out_hw[1]) + 0.5) * x.shape[2] / out_hw[1])
  return x[:, iy.astype(int)][:, :, ix.astype(int)]


def cv2_resize(x, out_hw, method):
  if method == "nearest":
    return np_nearest(x, out_hw)
  return np.stack(
    [cv2.resize(im, out_hw[::-1], interpolation=CV2[method]) for im in x]
  )


def test_np_nearest_reference_agrees_with_cv2_off_ties():
  x = _images((37, 160), n=1, dtype=np.float32)
  ref = cv2.resize(x[0], (84, 12), interpolation=cv2.INTER_NEAREST_EXACT)
  ours = np_nearest(x, (12, 84))[0]
  differ = np.nonzero(np.any(ref != ours, axis=0))[0]
  np.testing.assert_array_equal(differ, [52, 73])


@pytest.mark.parametrize("method", ["area", "bilinear", "nearest"])
@pytest.mark.parametrize(
  "in_hw,out_hw",
  [
    ((210, 160), (84, 84)),  # Atari: factors 2.5 and 1.905.
    ((37, 53), (12, 20)),
    ((16, 16), (8, 4)),  # Integer factors.
  ],
)
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_resize_matches_cv2(method, in_hw, out_hw, backend):
  x = _images(in_hw + (2,), n=2, seed=3, dtype=np.float32)
  out = _run(
    Resize(*out_hw, method=method),
    FloatBox(in_hw + (2,), **BATCH),
    x,
    backend=backend,
  )
  ref = cv2_resize(x, out_hw, method)
  assert out.shape == (2,) + out_hw + (2,)
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_resize_enlarge_matches_cv2(method):
  x = _images((5, 7), n=2, seed=4, dtype=np.float32)
  out = _run(Resize(11, 9, method=method), FloatBox((5, 7), **BATCH), x)
  ref = cv2_resize(x, (11, 9), method)
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-3)


def test_resize_uint8_area_then_cast_equals_cv2_uint8():
  x = _images((210, 160), n=3, seed=5)
  out = _run(
    PreprocessorStack(Resize(84, 84, "area"), Cast(np.uint8)),
    _uint8((210, 160), **BATCH),
    x,
  )
  ref = np.stack(
    [cv2.resize(im, (84, 84), interpolation=cv2.INTER_AREA) for im in x]
  )
  assert out.dtype == np.uint8
  diff = np.abs(out.astype(int) - ref)
  assert diff.max() <= 1 and (diff > 0).mean() < 1e-3


@pytest.mark.parametrize("method", ["area", "bilinear", "nearest"])
def test_resize_parity_time_rank(method):
  space = _uint8((21, 16, 1), **BATCH_TIME)
  (out,), _ = assert_parity(
    Resize(8, 7, method),
    {"inputs": space},
    ["call"],
    size=(2, 3),
    rtol=1e-5,
    atol=1e-3,
  )
  assert out.shape == (2, 3, 8, 7, 1) and out.dtype == np.float32


def test_resize_area_rejects_enlarging():
  with pytest.raises(BuildError, match="only shrinks"):
    ComponentTest(
      Resize(20, 20, "area"), {"inputs": FloatBox((10, 10), **BATCH)}
    )


# --- Crop --------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("shape", [(10, 8, 3), (10, 8)])
def test_crop_matches_slicing(backend, shape):
  x = _images(shape, n=2, seed=6)
  out = _run(Crop(2, 1, 5, 6), _uint8(shape, **BATCH), x, backend=backend)
  np.testing.assert_array_equal(out, x[:, 2:7, 1:7])
  assert out.dtype == np.uint8


def test_crop_parity_and_window_check():
  assert_parity(
    Crop(1, 2, 3, 4),
    {"inputs": FloatBox((6, 6, 2), **BATCH_TIME)},
    ["call"],
    size=(2, 3),
  )
  with pytest.raises(BuildError, match="exceeds"):
    ComponentTest(Crop(4, 0, 3, 2), {"inputs": FloatBox((6, 6), **BATCH)})


# --- bad inputs --------------------------------------------------------------


@pytest.mark.parametrize(
  "component,space,argument",
  [
    (Grayscale(), FloatBox((4, 4, 4), **BATCH), "inputs"),  # Not RGB.
    (Grayscale(), FloatBox((4, 4, 3)), "inputs"),  # No batch.
    (Resize(2, 2), FloatBox((4,), **BATCH), "inputs"),  # Rank 1.
    (Crop(0, 0, 1, 1), FloatBox((4, 4, 4, 4), **BATCH), "inputs"),
  ],
  ids=["grayscale_channels", "grayscale_no_batch", "resize_rank", "crop_rank"],
)
def test_bad_input_space_is_space_error(component, space, argument):
  with pytest.raises(SpaceError) as info:
    ComponentTest(component, {"inputs": space})
  e = info.value
  assert (e.component, e.api, e.argument) == (component.scope, "call", argument)


def test_bad_value_is_space_error():
  t = ComponentTest(Grayscale(), {"inputs": _uint8((4, 4, 3), **BATCH)})
  with pytest.raises(SpaceError, match="dtype") as info:
    t.test("call", np.zeros((2, 4, 4, 3), np.float32))
  assert (info.value.component, info.value.api, info.value.argument) == (
    "grayscale",
    "call",
    "inputs",
  )
  with pytest.raises(SpaceError, match="shape|rank") as info:
    t.test("call", np.zeros((2, 4, 4), np.uint8))
  assert info.value.argument == "inputs"
