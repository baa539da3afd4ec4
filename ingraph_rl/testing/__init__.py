"""Test helpers: build a component with either executor and compare."""

from ingraph_rl.testing.component_test import ComponentTest, assert_parity

__all__ = ["ComponentTest", "assert_parity"]
