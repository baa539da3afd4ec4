"""In-graph preprocessors: one Component per step, TF and torch bodies,
composable with `PreprocessorStack`; `atari_preprocessor()` builds the
grayscale / 84x84 / 4-frame Atari stack."""

from ingraph_rl.components.preprocessing.cast import Cast
from ingraph_rl.components.preprocessing.clip import Clip
from ingraph_rl.components.preprocessing.crop import Crop
from ingraph_rl.components.preprocessing.frame_stack import FrameStack
from ingraph_rl.components.preprocessing.grayscale import Grayscale
from ingraph_rl.components.preprocessing.normalize import Divide, Normalize
from ingraph_rl.components.preprocessing.resize import Resize
from ingraph_rl.components.preprocessing.reward_clipping import RewardClipping
from ingraph_rl.components.preprocessing.stack import (
  AtariPreprocessor,
  PreprocessorStack,
  atari_frame_preprocessor,
  atari_preprocessor,
)

__all__ = [
  "AtariPreprocessor",
  "Cast",
  "Clip",
  "Crop",
  "Divide",
  "FrameStack",
  "Grayscale",
  "Normalize",
  "PreprocessorStack",
  "Resize",
  "RewardClipping",
  "atari_frame_preprocessor",
  "atari_preprocessor",
]
