"""Assembly: the meta graph records the wiring; wiring errors are named."""

import pytest

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.core.assembly import assemble
from ingraph_rl.errors import AssemblyError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.toy_components import Chain, Scale

X = {"x": FloatBox((3,), add_batch_rank=True)}


def test_meta_graph_records_nodes_in_call_order():
  meta, seconds = assemble(Chain(), X)
  assert seconds >= 0
  assert set(meta.apis) == {"call", "both"}
  call = meta.apis["call"]
  assert [(n.component.path, n.name) for n in call.nodes] == [
    ("chain/scale", "_graph_fn_scale"),
    ("chain/counter", "_graph_fn_add"),
  ]
  # The counter's input is the scale's output record.
  assert call.nodes[1].inputs()[0] is call.nodes[0].output
  assert call.outputs is call.nodes[1].output
  assert call.arg_names == ["x"]
  assert set(meta.apis["both"].outputs) == {"scaled", "shifted"}
  # API calls: root call + two sub-component calls per root API.
  assert [(c.component.path, c.name) for c in meta.api_calls[:3]] == [
    ("chain", "call"),
    ("chain/scale", "call"),
    ("chain/counter", "call"),
  ]


def test_dot_export_names_components_and_edges():
  meta, _ = assemble(Chain(), X)
  dot = meta.to_dot()
  assert dot.startswith("digraph meta_graph {") and dot.endswith("}")
  assert 'label="chain/scale"' in dot and 'label="chain/counter"' in dot
  scale_node = meta.apis["call"].nodes[0]
  add_node = meta.apis["call"].nodes[1]
  assert f"n{scale_node.id} -> n{add_node.id};" in dot
  assert f"r{meta.apis['call'].inputs['x'].id} -> n{scale_node.id};" in dot


def test_calling_a_component_outside_the_subtree_is_an_error():
  stranger = Scale(scope="stranger")

  class Bad(Component):
    @api
    def call(self, x):
      return stranger.call(x)

  with pytest.raises(
    AssemblyError,
    match="'bad'.call calls API 'call' of "
    "'stranger', which is not one of its sub-components",
  ):
    assemble(Bad(), X)


def test_graph_fn_of_another_component_is_an_error():
  class Peeks(Component):
    def __init__(self):
      super().__init__(scope="peeks")
      self.inner = Scale()

    @api
    def call(self, x):
      return self.inner._graph_fn_scale(x)

  with pytest.raises(
    AssemblyError,
    match=r"graph function "
    r"'peeks/scale'._graph_fn_scale called from "
    r"'peeks'.call",
  ):
    assemble(Peeks(), X)


def test_values_cannot_cross_root_apis():
  class Leaky(Component):
    def __init__(self):
      super().__init__(scope="leaky")
      self.inner = Scale()

    @api
    def a(self, x):
      self.saved = self.inner.call(x)
      return self.saved

    @api
    def b(self, x):
      return self.inner.call(self.saved)

  with pytest.raises(
    AssemblyError,
    match="a value of root API 'a', while assembling root API 'b'",
  ):
    assemble(Leaky(), X)


def test_unpacking_needs_returns_and_records_have_no_truth_value():
  class Unpacks(Component):
    @api
    def call(self, x):
      a, b = self._graph_fn_two(x)
      return a

    @graph_fn
    def _graph_fn_two(self, x):
      return x, x

  with pytest.raises(AssemblyError, match="returns=2"):
    assemble(Unpacks(), X)

  class Branches(Component):
    @api
    def call(self, x):
      return self._graph_fn_id(x) if self._graph_fn_id(x) else x

    @graph_fn
    def _graph_fn_id(self, x):
      return x

  with pytest.raises(AssemblyError, match="has no value during assembly"):
    assemble(Branches(), X)


def test_returns_n_unpacks_into_getitem_records():
  class Two(Component):
    @api
    def call(self, x):
      a, b = self._graph_fn_two(x)
      return {"a": a, "b": b}

    @graph_fn(returns=2)
    def _graph_fn_two(self, x):
      return x, 2 * x

  meta, _ = assemble(Two(), X)
  nodes = meta.apis["call"].nodes
  assert [n.name for n in nodes] == ["_graph_fn_two", "[0]", "[1]"]


def test_missing_input_space_and_unknown_api_are_named():
  with pytest.raises(
    AssemblyError,
    match="no input space for argument 'x' of root API 'call' of 'chain'",
  ):
    assemble(Chain(), {})
  with pytest.raises(AssemblyError, match="has no API method 'nope'"):
    assemble(Chain(), X, api_names=["nope"])


def test_bad_api_arguments_name_the_api():
  class WrongArity(Component):
    def __init__(self):
      super().__init__(scope="root")
      self.inner = Scale()

    @api
    def call(self, x):
      return self.inner.call(x, x)

  with pytest.raises(AssemblyError, match="'root/scale'.call: bad arguments"):
    assemble(WrongArity(), X)


def test_root_api_literals_stay_python_values():
  class WithFlag(Component):
    @api
    def call(self, x, double=True):
      return self._graph_fn_f(x, double)

    @graph_fn
    def _graph_fn_f(self, x, double):
      return 2 * x if double else x

  meta, _ = assemble(WithFlag(), X)
  assert meta.apis["call"].literals == {"double": True}
  assert meta.apis["call"].nodes[0].args[1] is True
