"""Fixed crop of images."""

from ingraph_rl.components.preprocessing._common import check_inputs
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError


class Crop(Component):
  """[..., H, W, C] or [..., H, W] -> the window rows top..top+height,
  columns left..left+width; dtype kept. The same indexing body serves
  both backends."""

  def __init__(self, top, left, height, width, scope="crop"):
    super().__init__(scope=scope)
    self.top, self.left = int(top), int(left)
    self.height, self.width = int(height), int(width)
    if min(self.top, self.left) < 0 or min(self.height, self.width) < 1:
      raise BuildError(f"'{scope}': need top, left >= 0 and height, width >= 1")

  def create_variables(self, input_spaces):
    space = check_inputs(self, input_spaces, kinds="fiub", ranks=(2, 3))
    h, w = space.shape[:2]
    if self.top + self.height > h or self.left + self.width > w:
      raise BuildError(
        f"'{self.path}': window rows {self.top}:{self.top + self.height}, "
        f"columns {self.left}:{self.left + self.width} exceeds the "
        f"{h}x{w} input"
      )
    self.has_channels = space.rank == 3

  @api
  def call(self, inputs):
    return self._graph_fn_call(inputs)

  @graph_fn(neutral=True)
  def _graph_fn_call(self, inputs):
    rows = slice(self.top, self.top + self.height)
    cols = slice(self.left, self.left + self.width)
    if self.has_channels:
      return inputs[..., rows, cols, :]
    return inputs[..., rows, cols]
