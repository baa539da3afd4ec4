"""Image resizing: area (exactly cv2.INTER_AREA when shrinking), bilinear,
nearest.

`method="area"` is what gymnasium's AtariPreprocessing uses
(`cv2.resize(..., interpolation=cv2.INTER_AREA)`). When shrinking, cv2's
INTER_AREA averages each output pixel's footprint of `in/out` input pixels,
weighting the input pixels cut by the footprint's edges by the covered
fraction. That average is separable, so here it is two matrix products with
fixed weight matrices [out_h, in_h] and [out_w, in_w], the same in TF and
torch (torch has no such op: `F.interpolate(mode="area")` is adaptive
average pooling over whole pixels, which differs for non-integer factors).
Measured against cv2 on Pong frames (210x160 -> 84x84, factors 2.5 and
1.905): max abs diff 1.5e-5 on float inputs (float32 rounding). For
comparison, `tf.image.resize(method="area")` differs from cv2 by up to
1.0e-3 (mean 1.2e-4) on the same float frames; rounded to uint8 both can
land on the other side of .5, so uint8 results differ by up to 1.

`method="bilinear"` is `tf.image.resize(..., antialias=False)` (half-pixel
centers, like cv2.INTER_LINEAR and torch's align_corners=False);
`method="nearest"` is TF's nearest with half-pixel centers (cv2's
INTER_NEAREST_EXACT, torch's "nearest-exact").
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.preprocessing._common import (
  check_inputs,
  float_dtype,
  torch_dtype,
)
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import F, torch

METHODS = ("area", "bilinear", "nearest")


def area_weights(n_in, n_out):
  """[n_out, n_in] weights of cv2.INTER_AREA shrinking `n_in` -> `n_out`:
  row o covers [o * s, (o + 1) * s) with s = n_in / n_out, each input pixel
  weighted by its covered length, divided by s."""
  if n_out > n_in:
    raise ValueError(f"area weights shrink only: {n_in} -> {n_out}")
  scale = n_in / n_out
  w = np.zeros((n_out, n_in), np.float64)
  for o in range(n_out):
    a, b = o * scale, (o + 1) * scale
    for i in range(int(np.floor(a)), min(int(np.ceil(b)), n_in)):
      w[o, i] = max(0.0, min(b, i + 1.0) - max(a, float(i)))
  return w / scale


class Resize(Component):
  """[..., H, W, C] or [..., H, W] -> [..., height, width(, C)].

  Output dtype: the input's when floating, else float32 (follow with
  `Cast(np.uint8)` for cv2's rounded uint8). "area" only shrinks (cv2's
  INTER_AREA enlarging is a different, bilinear-like filter).
  """

  def __init__(self, height, width, method="bilinear", scope="resize"):
    super().__init__(scope=scope)
    if method not in METHODS:
      raise BuildError(
        f"'{scope}': method must be one of {METHODS}, got {method!r}"
      )
    self.height, self.width, self.method = int(height), int(width), method
    if self.height < 1 or self.width < 1:
      raise BuildError(f"'{scope}': height and width must be >= 1")

  def create_variables(self, input_spaces):
    space = check_inputs(self, input_spaces, ranks=(2, 3))
    self.dtype = float_dtype(space.dtype)
    self.has_channels = space.rank == 3
    h, w = space.shape[:2]
    if self.method == "area":
      if self.height > h or self.width > w:
        raise BuildError(
          f"'{self.path}': method 'area' only shrinks; got {h}x{w} -> "
          f"{self.height}x{self.width}"
        )
      self.wy = area_weights(h, self.height).astype(self.dtype)
      self.wx = area_weights(w, self.width).astype(self.dtype)

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn
  def _graph_fn_call(self, inputs):
    x = tf.cast(inputs, self.dtype)
    if not self.has_channels:
      x = x[..., None]
    if self.method == "area":
      x = tf.einsum("oh,...hwc->...owc", tf.constant(self.wy), x)
      out = tf.einsum("pw,...owc->...opc", tf.constant(self.wx), x)
    else:
      lead = tf.shape(x)[:-3]
      folded = tf.reshape(x, tf.concat([[-1], tf.shape(x)[-3:]], 0))
      out = tf.image.resize(
        folded, (self.height, self.width), method=self.method, antialias=False
      )
      out = tf.reshape(
        tf.cast(out, self.dtype), tf.concat([lead, tf.shape(out)[1:]], 0)
      )
    return out if self.has_channels else out[..., 0]

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs):
    x = inputs.to(torch_dtype(self.dtype))
    if not self.has_channels:
      x = x[..., None]
    if self.method == "area":
      x = torch.einsum("oh,...hwc->...owc", torch.from_numpy(self.wy), x)
      out = torch.einsum("pw,...owc->...opc", torch.from_numpy(self.wx), x)
    else:
      lead = tuple(x.shape[:-3])
      folded = x.reshape((-1,) + tuple(x.shape[-3:])).permute(0, 3, 1, 2)
      mode = "bilinear" if self.method == "bilinear" else "nearest-exact"
      kwargs = dict(align_corners=False) if mode == "bilinear" else {}
      out = F.interpolate(
        folded, size=(self.height, self.width), mode=mode, **kwargs
      ).permute(0, 2, 3, 1)
      out = out.reshape(lead + tuple(out.shape[1:]))
    return out if self.has_channels else out[..., 0]
