"""`PreprocessorStack` and the Atari preprocessing of DQN / IMPALA."""

import numpy as np

from ingraph_rl.components.preprocessing.cast import Cast
from ingraph_rl.components.preprocessing.frame_stack import FrameStack
from ingraph_rl.components.preprocessing.grayscale import Grayscale
from ingraph_rl.components.preprocessing.resize import Resize
from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError


class PreprocessorStack(Component):
  """Applies the `call(inputs)` of stateless preprocessors in order.

  Sub-components keep their scopes; a scope taken by an earlier one gets
  the suffix `_<position>` (two `Cast`s: 'cast', 'cast_3').
  """

  def __init__(self, *preprocessors, scope="preprocessor_stack"):
    super().__init__(scope=scope)
    if not preprocessors:
      raise AssemblyError(f"'{scope}': give at least one preprocessor")
    seen = set()
    for i, p in enumerate(preprocessors):
      if not isinstance(p, Component):
        raise AssemblyError(
          f"'{scope}': preprocessor {i} is {p!r}, not a Component"
        )
      if p.scope in seen and p.parent is None:
        p.scope = f"{p.scope}_{i}"
      seen.add(p.scope)
    self.preprocessors = list(preprocessors)

  @api
  def call(self, inputs):
    for p in self.preprocessors:
      inputs = p.call(inputs)
    return inputs


class AtariPreprocessor(Component):
  """RGB frames [num_envs, 210, 160, 3] uint8 -> stacks [num_envs, size,
  size, num_frames] uint8, as gymnasium's `AtariPreprocessing(
  screen_size=size, grayscale_obs=True)` + `FrameStackObservation(
  num_frames)`:

    grayscale -> cast uint8 -> resize (area) -> cast uint8 -> frame stack.

  The first cast reproduces ALE's grayscale screen, which is uint8 (BT.601
  luma rounded to nearest) before cv2 resizes it; the second rounds the
  resized frame like cv2 does for uint8 images.

  API `call(inputs, resets)`: see `FrameStack`.
  """

  def __init__(
    self, num_envs=1, size=84, num_frames=4, scope="atari_preprocessor"
  ):
    super().__init__(scope=scope)
    self.frames = atari_frame_preprocessor(size)
    self.frame_stack = FrameStack(num_frames, num_envs)

  @api
  def call(self, inputs, resets):
    return self.frame_stack.call(self.frames.call(inputs), resets)


def atari_frame_preprocessor(size=84):
  """The per-frame part of the Atari stack: RGB uint8 [..., 210, 160, 3]
  -> grayscale uint8 [..., size, size] (stateless; any batch/time ranks)."""
  return PreprocessorStack(
    Grayscale(keepdims=False),
    Cast(np.uint8, scope="cast_gray"),
    Resize(size, size, method="area"),
    Cast(np.uint8),
    scope="frames",
  )


def atari_preprocessor(num_envs=1, size=84, num_frames=4):
  """The Atari preprocessing stack (see `AtariPreprocessor`)."""
  return AtariPreprocessor(num_envs=num_envs, size=size, num_frames=num_frames)
