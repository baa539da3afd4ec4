"""TFExecutor: one tf.function per root API, no retracing, XLA, devices,
weights I/O."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.layers import Dense
from ingraph_rl.errors import AssemblyError, BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.toy_components import Chain

X = {"x": FloatBox((3,), add_batch_rank=True)}


def test_batch_size_changes_never_retrace():
  ex = TFExecutor(Chain(), X)
  fn = ex.function("call")
  assert fn.experimental_get_tracing_count() == 1  # Traced at build.
  for batch in (1, 7, 32, 1):
    out = ex.execute("call", np.ones((batch, 3), np.float32))
    assert out.shape == (batch, 3)
  assert fn.experimental_get_tracing_count() == 1


def test_results_match_hand_computation():
  ex = TFExecutor(Chain(), X)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  # counter(scale(x)) = 3 * x + 1 (offset initialised to ones).
  np.testing.assert_allclose(ex.execute("call", x), 3 * x + 1)
  both = ex.execute("both", x)
  np.testing.assert_allclose(both["scaled"], 3 * x)
  np.testing.assert_allclose(both["shifted"], x + 1)


def test_jit_compile_gives_the_same_numbers():
  x = FloatBox((5,), add_batch_rank=True).sample(8, seed=0)
  spaces = {"inputs": FloatBox((5,), add_batch_rank=True)}
  plain = TFExecutor(Dense(4, activation="tanh"), spaces, seed=3)
  xla = TFExecutor(
    Dense(4, activation="tanh"), spaces, seed=3, jit_compile=True
  )
  assert xla.function("call")._jit_compile
  np.testing.assert_allclose(
    xla.execute("call", x), plain.execute("call", x), rtol=1e-5, atol=1e-6
  )


def test_same_seed_same_initial_weights_other_seed_differs():
  spaces = {"inputs": FloatBox((5,), add_batch_rank=True)}
  a = TFExecutor(Dense(4), spaces, seed=1).get_weights()
  b = TFExecutor(Dense(4), spaces, seed=1).get_weights()
  c = TFExecutor(Dense(4), spaces, seed=2).get_weights()
  np.testing.assert_array_equal(a["dense/kernel"], b["dense/kernel"])
  assert not np.allclose(a["dense/kernel"], c["dense/kernel"])


def test_weights_round_trip_and_clear_errors():
  ex = TFExecutor(Chain(), X)
  w = ex.get_weights()
  w["chain/counter/offset"] = np.array([5, 6, 7], np.float32)
  ex.set_weights(w)
  np.testing.assert_allclose(
    ex.execute("call", np.zeros((1, 3), np.float32)), [[5, 6, 7]]
  )
  with pytest.raises(BuildError, match=r"missing \['chain/counter/offset'\]"):
    ex.set_weights({})
  with pytest.raises(BuildError, match=r"has shape \(2,\), expected \(3,\)"):
    ex.set_weights({"chain/counter/offset": np.zeros(2)})


def test_execute_by_keyword_unknown_api_and_describe():
  ex = TFExecutor(Chain(), X)
  np.testing.assert_allclose(
    ex.execute("call", x=np.zeros((1, 3), np.float32)), [[1, 1, 1]]
  )
  with pytest.raises(
    AssemblyError,
    match=r"no built API 'nope'; built APIs: "
    r"\['both', 'call'\]",
  ):
    ex.execute("nope", 1)
  with pytest.raises(SpaceError, match=r"missing arguments \['x'\]"):
    ex.execute("call")
  assert (
    "call(x: FloatBox(shape=(3,), dtype=float32, batch)) -> FloatBox"
    in ex.describe()
  )


def test_input_check_can_be_switched_off():
  bad = np.zeros((2, 4), np.float32)
  with pytest.raises(SpaceError):
    TFExecutor(Chain(), X).execute("call", bad)
  fast = TFExecutor(Chain(), X, check_inputs=False)
  # Without the check TF itself rejects the value (no SpaceError).
  with pytest.raises(
    (TypeError, ValueError, tf.errors.InvalidArgumentError)
  ) as e:
    fast.execute("call", bad)
  assert not isinstance(e.value, SpaceError)


def test_variables_are_tracked_by_a_tf_module_for_checkpoints(tmp_path):
  ex = TFExecutor(Chain(), X)
  ckpt = tf.train.Checkpoint(model=ex.module)
  path = ckpt.write(str(tmp_path / "ckpt"))
  ex.set_weights({"chain/counter/offset": np.full(3, 9, np.float32)})
  ckpt.read(path).assert_consumed()
  np.testing.assert_allclose(
    ex.get_weights()["chain/counter/offset"], np.ones(3)
  )


@pytest.mark.slow
def test_device_map_places_components_on_logical_devices():
  # Logical devices must be configured before TF starts: a fresh process.
  code = textwrap.dedent("""
      import numpy as np, tensorflow as tf
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
      from ingraph_rl.executors.tensorflow import TFExecutor
      from ingraph_rl.spaces import FloatBox
      from ingraph_rl.testing.toy_components import Chain
      ex = TFExecutor(Chain(), {"x": FloatBox((3,), add_batch_rank=True)},
                      device_map={"chain/counter": "/device:CPU:1"})
      var = ex.variables()["chain/counter/offset"]
      print("DEVICE", var.device)
      graph = ex.function("call").get_concrete_function().graph
      adds = [op.device for op in graph.get_operations()
              if op.type == "AddV2"]
      print("OPS", adds)
      print("OUT", ex.execute("call", np.ones((1, 3), np.float32)).numpy())
  """)
  out = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
  )
  assert out.returncode == 0, out.stderr[-2000:]
  assert "DEVICE /job:localhost/replica:0/task:0/device:CPU:1" in out.stdout
  assert "OPS ['/device:CPU:1']" in out.stdout
  assert "OUT [[4. 4. 4.]]" in out.stdout
