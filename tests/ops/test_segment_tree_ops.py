"""The C++ segment-tree ops: loading and its fallback, in-place updates,
shape functions, and parity with the pure-TF and torch paths."""

import logging as pylogging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ingraph_rl import ops
from ingraph_rl.components.memories import segment_tree

REPO = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.fixture(scope="module")
def lib():
  library = ops.load_segment_tree_ops()
  assert library is not None, (
    f"{ops.LIBRARY_PATH} did not load; build it with `pip install "
    f"--no-build-isolation -e .` (make venv) or `python setup.py build_ops "
    f"--inplace`"
  )
  return library


def _buffer_address(var):
  """Address of the variable's buffer (a read aliases it while the variable
  is not in TF's copy-on-read mode)."""
  return np.asarray(var.value()).__array_interface__["data"][0]


# --- loading -----------------------------------------------------------------


def test_library_loads_and_is_the_default(lib):
  assert os.path.exists(ops.LIBRARY_PATH)
  for name in (
    "segment_tree_update",
    "segment_tree_find_prefixsum_idx",
    "resource_segment_tree_find_prefixsum_idx",
  ):
    assert callable(getattr(lib, name))
  assert segment_tree.DEFAULT_IMPL == "custom_op"
  assert ops.load_segment_tree_ops() is lib  # Loaded once.


def _run_python(code, **env):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env)
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  return subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)],
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
    check=False,
  )


@pytest.mark.slow
def test_disabled_by_environment_falls_back_and_logs_once():
  result = _run_python(
    """
      from absl import logging
      logging.set_verbosity("info")
      import numpy as np, tensorflow as tf
      from ingraph_rl import ops
      from ingraph_rl.components.memories import segment_tree
      assert ops.load_segment_tree_ops() is None
      assert ops.load_segment_tree_ops() is None
      print("default", segment_tree.DEFAULT_IMPL)
      var = tf.Variable(segment_tree.initial_tree(3, "sum"))
      segment_tree.update(var, [0, 2], [1.0, 2.0], "sum")
      print("tree", var.numpy().tolist())
      """,
    INGRAPH_RL_DISABLE_CUSTOM_OPS="1",
  )
  assert result.returncode == 0, result.stderr
  assert "default tf" in result.stdout
  assert "tree [0.0, 3.0, 1.0, 2.0, 1.0, 0.0, 2.0, 0.0]" in result.stdout
  assert result.stderr.count("pure-TF fallback") == 1, result.stderr
  assert "INGRAPH_RL_DISABLE_CUSTOM_OPS=1" in result.stderr
  assert "custom op library" not in result.stderr


def _reload_with(monkeypatch, path):
  monkeypatch.setattr(ops, "LIBRARY_PATH", path)
  monkeypatch.setattr(ops, "_loaded", False)
  monkeypatch.setattr(ops, "_library", None)
  monkeypatch.delenv(ops.DISABLE_ENV, raising=False)
  return ops.load_segment_tree_ops()


def test_missing_library_falls_back(monkeypatch, caplog, tmp_path):
  caplog.set_level(pylogging.INFO)
  caplog.set_level(pylogging.INFO, logger="absl")
  assert _reload_with(monkeypatch, str(tmp_path / "missing.so")) is None
  assert _reload_with(monkeypatch, str(tmp_path / "missing.so")) is None
  messages = [
    r.getMessage() for r in caplog.records if "segment tree" in r.getMessage()
  ]
  assert len(messages) == 2  # Once per (re)load.
  assert all("pure-TF fallback" in m and "not built" in m for m in messages)


def test_broken_library_falls_back(monkeypatch, caplog, tmp_path):
  broken = tmp_path / "_segment_tree_ops.so"
  broken.write_bytes(b"not an ELF file")
  caplog.set_level(pylogging.INFO)
  caplog.set_level(pylogging.INFO, logger="absl")
  assert _reload_with(monkeypatch, str(broken)) is None
  [message] = [
    r.getMessage() for r in caplog.records if "segment tree" in r.getMessage()
  ]
  assert "pure-TF fallback" in message and "failed" in message


def test_custom_op_path_is_logged(monkeypatch, caplog, lib):
  caplog.set_level(pylogging.INFO)
  caplog.set_level(pylogging.INFO, logger="absl")
  again = _reload_with(monkeypatch, ops.LIBRARY_PATH)
  assert again is not None
  [message] = [
    r.getMessage() for r in caplog.records if "segment tree" in r.getMessage()
  ]
  assert message.startswith("segment tree: custom op")


# --- the ops themselves ------------------------------------------------------


def test_update_is_in_place(lib):
  """No copy of the tree while nothing else holds its buffer; a value read
  before an update (still alive) is not changed by it (copy on write)."""
  var = tf.Variable(segment_tree.initial_tree(1000, "sum"))
  # The first update may copy: a new variable can share its buffer with the
  # initial value's tensor while that one is alive.
  lib.segment_tree_update(var.handle, [5], [0.0], op="sum")
  address = _buffer_address(var)
  for step in range(3):
    lib.segment_tree_update(var.handle, [step, 999], [1.0, 2.0], op="sum")
    assert _buffer_address(var) == address
  assert var.numpy()[1] == 5.0

  held = var.value()
  lib.segment_tree_update(var.handle, [0], [10.0], op="sum")
  assert held.numpy()[1] == 5.0 and var.numpy()[1] == 14.0


def test_update_in_copy_on_read_mode(lib):
  """After a sparse read (tf.gather puts the variable in copy-on-read mode)
  updates and finds stay correct."""
  var = tf.Variable(segment_tree.initial_tree(6, "sum"))
  lib.segment_tree_update(var.handle, [0, 5], [1.0, 2.0], op="sum")
  assert tf.gather(var, 1).numpy() == 3.0
  lib.segment_tree_update(var.handle, [5], [4.0], op="sum")
  np.testing.assert_array_equal(tf.gather(var, [1, 13]).numpy(), [5, 4])
  np.testing.assert_array_equal(
    lib.resource_segment_tree_find_prefixsum_idx(var.handle, [0.5, 1.0]), [0, 5]
  )


def test_traced_function_updates_without_retracing(lib):
  var = tf.Variable(segment_tree.initial_tree(2**12, "sum"))

  @tf.function(
    input_signature=[
      tf.TensorSpec([None], tf.int32),
      tf.TensorSpec([None], tf.float32),
      tf.TensorSpec([None], tf.float32),
    ]
  )
  def step(indices, values, masses):
    segment_tree.update(var, indices, values, "sum", impl="custom_op")
    return segment_tree.find_prefixsum_idx(var, masses, impl="custom_op")

  leaves = np.zeros(2**12)
  rng = np.random.default_rng(0)
  address = None
  for size in (512, 3, 512, 100):
    indices = rng.integers(0, 2**12, size).astype(np.int32)
    values = (rng.integers(1, 8, size) / 2).astype(np.float32)  # Exact sums.
    for i, v in zip(indices, values):
      leaves[i] = v
    masses = (rng.random(32) * leaves.sum()).astype(np.float32)
    found = step(indices, values, masses).numpy()
    np.testing.assert_array_equal(
      found, np.searchsorted(np.cumsum(leaves), masses, side="right")
    )
    address = address or _buffer_address(var)  # After the first update.
    assert _buffer_address(var) == address
  assert step.experimental_get_tracing_count() == 1
  np.testing.assert_array_equal(var.numpy()[2**12 :], leaves)
  assert var.numpy()[1] == leaves.sum()


def test_find_on_tensor_and_on_variable_agree(lib):
  var = tf.Variable(segment_tree.initial_tree(5, "sum"))
  lib.segment_tree_update(var.handle, [0, 2, 4], [1.0, 0.5, 2.0], op="sum")
  masses = np.array([[0.0, 0.99], [1.0, 3.49]], np.float32)  # Any shape.
  expected = [[0, 0], [2, 4]]
  np.testing.assert_array_equal(
    lib.segment_tree_find_prefixsum_idx(var.value(), masses), expected
  )
  np.testing.assert_array_equal(
    lib.resource_segment_tree_find_prefixsum_idx(var.handle, masses), expected
  )
  np.testing.assert_array_equal(
    segment_tree.find_prefixsum_idx(
      tf.constant(var.numpy()), masses, impl="custom_op"
    ),
    expected,
  )


def test_shape_functions(lib):
  var = tf.Variable(segment_tree.initial_tree(5, "sum"))

  @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
  def find(masses):
    a = lib.segment_tree_find_prefixsum_idx(var.value(), masses)
    b = lib.resource_segment_tree_find_prefixsum_idx(var.handle, masses)
    assert a.shape.as_list() == b.shape.as_list() == [None, 3]
    assert a.dtype == b.dtype == tf.int32
    return a

  find.get_concrete_function()
  with pytest.raises(ValueError, match="rank"):
    tf.function(
      lambda: lib.segment_tree_update(
        var.handle, tf.zeros([2, 2], tf.int32), tf.zeros([4]), op="sum"
      )
    ).get_concrete_function()
  with pytest.raises(ValueError, match="[Dd]imension"):
    tf.function(
      lambda: lib.segment_tree_update(
        var.handle, tf.zeros([2], tf.int32), tf.zeros([3]), op="sum"
      )
    ).get_concrete_function()
  with pytest.raises(ValueError, match="rank"):
    tf.function(
      lambda: lib.segment_tree_find_prefixsum_idx(
        tf.zeros([4, 4]), tf.zeros([2])
      )
    ).get_concrete_function()


def test_kernel_errors(lib):
  var = tf.Variable(segment_tree.initial_tree(5, "sum"))
  with pytest.raises(tf.errors.InvalidArgumentError, match="not in \\[0, 8\\)"):
    lib.segment_tree_update(var.handle, [3, 8], [1.0, 1.0], op="sum")
  np.testing.assert_array_equal(var.numpy(), 0)  # Nothing changed.
  bad = tf.Variable(np.zeros(6, np.float32))
  with pytest.raises(tf.errors.InvalidArgumentError, match="power of two"):
    lib.segment_tree_update(bad.handle, [0], [1.0], op="sum")
  with pytest.raises(tf.errors.InvalidArgumentError, match="power of two"):
    lib.resource_segment_tree_find_prefixsum_idx(bad.handle, [0.0])
  with pytest.raises(tf.errors.InvalidArgumentError, match="float32"):
    lib.segment_tree_update(
      tf.Variable(np.zeros(8, np.float64)).handle, [0], [1.0], op="sum"
    )
  with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
    lib.segment_tree_update(var.handle, [0], [1.0], op="max")


# --- parity: custom op vs pure TF vs torch ------------------------------------


@settings(max_examples=40, deadline=None)
@given(
  capacity=st.one_of(
    st.sampled_from([1, 3, 5, 1000, 4097]), st.integers(1, 200)
  ),
  op=st.sampled_from(["sum", "min"]),
  seed=st.integers(0, 2**31 - 1),
  num_batches=st.integers(1, 3),
)
def test_parity_on_arbitrary_floats(capacity, op, seed, num_batches):
  """Same float32 operations in the same order: bitwise identical trees and
  indices, for priorities whose sums round."""
  rng = np.random.default_rng(seed)
  init = segment_tree.initial_tree(capacity, op)
  custom = tf.Variable(init)
  pure = tf.Variable(init)
  mirror = torch.from_numpy(init.copy())
  leaves = init[len(init) // 2 :][:capacity].copy()
  for _ in range(num_batches):
    size = int(rng.integers(0, 64))
    indices = rng.integers(0, capacity, size).astype(np.int32)
    indices[rng.random(size) < 0.3] = indices[0] if size else 0  # Repeats.
    values = rng.lognormal(0, 2, size).astype(np.float32)
    segment_tree.update(custom, indices, values, op, impl="custom_op")
    segment_tree.update(pure, indices, values, op, impl="tf")
    segment_tree.torch_update(mirror, indices, values, op)
    for i, v in zip(indices, values):
      leaves[i] = v
  tree = custom.numpy()
  np.testing.assert_array_equal(tree, pure.numpy())
  np.testing.assert_array_equal(tree, mirror.numpy())
  num_leaves = len(tree) // 2
  np.testing.assert_array_equal(
    tree[num_leaves : num_leaves + capacity], leaves
  )
  if op == "min":
    assert tree[1] == leaves.min()
    return
  np.testing.assert_allclose(tree[1], leaves.sum(dtype=np.float64), rtol=1e-5)
  if tree[1] == 0:
    return
  masses = (rng.random(64) * tree[1]).astype(np.float32)
  found = segment_tree.find_prefixsum_idx(custom, masses, impl="custom_op")
  found = found.numpy()
  np.testing.assert_array_equal(
    found, segment_tree.find_prefixsum_idx(pure, masses, impl="tf")
  )
  np.testing.assert_array_equal(
    found, segment_tree.torch_find_prefixsum_idx(mirror, masses).numpy()
  )
  # Against the float64 prefix sums, up to float32 rounding.
  assert np.all(leaves[found] > 0)
  cumsum = np.cumsum(leaves, dtype=np.float64)
  below = np.where(found > 0, cumsum[found - 1], 0.0)
  slack = 1e-5 * cumsum[-1]
  assert np.all(below - slack <= masses) and np.all(
    masses < cumsum[found] + slack
  )
