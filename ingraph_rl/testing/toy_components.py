"""Small components used by the core and executor tests (and handy as
examples of the component model)."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.utils.lazy import torch


class Scale(Component):
  """call(x) = factor * x; no variables."""

  def __init__(self, factor=2.0, scope="scale"):
    super().__init__(scope=scope)
    self.factor = factor

  @api
  def call(self, x):
    return self._graph_fn_scale(x)

  @graph_fn
  def _graph_fn_scale(self, x):
    return self.factor * x

  @_graph_fn_scale.torch
  def _graph_fn_scale(self, x):
    return self.factor * x


class Counter(Component):
  """Counts `create_variables` calls; a variable shaped like the input."""

  def __init__(self, scope="counter"):
    super().__init__(scope=scope)
    self.create_calls = 0

  def create_variables(self, input_spaces):
    self.create_calls += 1
    self.seen_spaces = dict(input_spaces)
    self.offset = self.add_variable(
      "offset", input_spaces["x"].shape, initializer="ones"
    )

  @api
  def call(self, x):
    return self._graph_fn_add(x)

  @graph_fn
  def _graph_fn_add(self, x):
    return x + self.offset

  @_graph_fn_add.torch
  def _graph_fn_add(self, x):
    return x + self.offset


class Store(Component):
  """Memory-like: `read` is wired BEFORE `write` in API order, yet its
  variables depend on `write`'s argument. The builder must wait."""

  variable_args = ("values",)

  def __init__(self, scope="store"):
    super().__init__(scope=scope)

  def create_variables(self, input_spaces):
    space = input_spaces["values"]
    self.buf = self.add_variable("buf", (8,) + space.shape, space.dtype)

  @api
  def read(self, index):
    return self._graph_fn_read(index)

  @api
  def write(self, index, values):
    return self._graph_fn_write(index, values)

  @graph_fn
  def _graph_fn_read(self, index):
    return tf.gather(self.buf, index)

  @_graph_fn_read.torch
  def _graph_fn_read(self, index):
    return self.buf[index.long()]

  @graph_fn
  def _graph_fn_write(self, index, values):
    self.buf.scatter_update(tf.IndexedSlices(values, index))
    return tf.shape(index)[0]

  @_graph_fn_write.torch
  def _graph_fn_write(self, index, values):
    with torch.no_grad():
      self.buf[index.long()] = values
    return torch.tensor(index.shape[0], dtype=torch.int32)


class Chain(Component):
  """Root with two sub-components; API `call` = counter(scale(x))."""

  def __init__(self, scope="chain"):
    super().__init__(scope=scope)
    self.scale = Scale(3.0)
    self.counter = Counter()

  @api
  def call(self, x):
    return self.counter.call(self.scale.call(x))

  @api
  def both(self, x):
    return {"scaled": self.scale.call(x), "shifted": self.counter.call(x)}


class Memoryish(Component):
  def __init__(self, scope="root"):
    super().__init__(scope=scope)
    self.store = Store()

  @api
  def read(self, index):
    return self.store.read(index)

  @api
  def write(self, index, values):
    return self.store.write(index, values)
