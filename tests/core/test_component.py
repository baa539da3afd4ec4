"""Composition: scopes, paths, sub-component registration, API discovery."""

import pytest

from ingraph_rl.core import Component, api
from ingraph_rl.errors import AssemblyError
from ingraph_rl.testing.toy_components import Chain, Counter, Scale


def test_paths_follow_the_tree():
  chain = Chain()
  assert chain.path == "chain"
  assert chain.scale.path == "chain/scale"
  assert chain.counter.parent is chain
  assert [c.path for c in chain.walk()] == [
    "chain",
    "chain/scale",
    "chain/counter",
  ]
  assert chain.counter.is_descendant_of(chain)
  assert not chain.is_descendant_of(chain.counter)


def test_list_attributes_register_sub_components():
  class Holder(Component):
    def __init__(self):
      super().__init__(scope="holder")
      self.parts = [Scale(scope="a"), Scale(scope="b")]

  h = Holder()
  assert sorted(h.sub_components) == ["a", "b"]


def test_duplicate_sibling_scope_is_an_error():
  class Twins(Component):
    def __init__(self):
      super().__init__(scope="twins")
      self.a = Scale()
      self.b = Scale()

  with pytest.raises(
    AssemblyError, match="already has a sub-component with scope 'scale'"
  ):
    Twins()


def test_a_component_has_one_parent():
  shared = Scale(scope="shared")
  Chain().add_components(shared)
  with pytest.raises(AssemblyError, match="already belongs to 'chain'"):
    Chain().add_components(shared)


def test_bad_scope_and_missing_super_init():
  with pytest.raises(AssemblyError, match="bad scope"):
    Scale(scope="a b")

  class Forgot(Component):
    def __init__(self):
      self.x = 1

  with pytest.raises(AssemblyError, match="must call super"):
    Forgot()


def test_api_methods_are_discovered_through_inheritance():
  class Base(Component):
    @api
    def one(self):
      pass

  class Derived(Base):
    @api
    def two(self, x):
      return x

  assert set(Derived.api_methods()) == {"one", "two", "variables"}
  assert Derived.internal_apis() == {"variables"}


def test_api_outside_an_executor_gives_a_clear_error():
  with pytest.raises(
    AssemblyError,
    match=r"'scale'.call\) run only while an "
    "executor assembles",
  ):
    Scale().call(1.0)


def test_default_scope_is_snake_case_class_name():
  assert Counter(scope=None).scope == "counter"
