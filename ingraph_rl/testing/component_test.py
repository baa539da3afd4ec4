"""`ComponentTest` and `assert_parity`: build any component from input spaces
with either executor, call its APIs, and compare TF against torch.

    >>> from ingraph_rl.components.layers import Dense
    >>> from ingraph_rl.spaces import FloatBox
    >>> spaces = {"inputs": FloatBox((4,), add_batch_rank=True)}
    >>> assert_parity(Dense(3, activation="tanh"), spaces, ["call"])
"""

import copy

import numpy as np
import tree


def _executor_class(backend):
  if backend == "tf":
    from ingraph_rl.executors.tensorflow import TFExecutor

    return TFExecutor
  if backend == "torch":
    from ingraph_rl.executors.torch import TorchExecutor

    return TorchExecutor
  raise ValueError(f"backend must be 'tf' or 'torch', got {backend!r}")


def to_numpy(nest):
  """Tensors of either backend (or NumPy) -> NumPy, in the same nest."""

  def leaf(x):
    if x is None or isinstance(x, np.ndarray):
      return x
    if hasattr(x, "detach"):
      return x.detach().cpu().numpy()
    if hasattr(x, "numpy"):
      return x.numpy()
    return np.asarray(x)

  return tree.map_structure(leaf, nest)


class ComponentTest:
  """Builds `component` with one executor ('tf' or 'torch').

  The component is deep-copied first, so one composed component can be
  tested with several executors.
  """

  def __init__(
    self, component, input_spaces, backend="tf", seed=0, **executor_kwargs
  ):
    self.component = copy.deepcopy(component)
    self.backend = backend
    self.executor = _executor_class(backend)(
      self.component, input_spaces, seed=seed, **executor_kwargs
    )

  def sample(self, api_name, size=4, seed=0):
    return self.executor.sample_inputs(api_name, size, seed)

  def test(self, api_name, *args, expected=None, rtol=1e-6, atol=1e-6):
    """Calls the API; compares with `expected` (a nest) when given.
    Returns the outputs as NumPy."""
    out = to_numpy(self.executor.execute(api_name, *args))
    if expected is not None:
      try:
        tree.assert_same_structure(expected, out)
      except (ValueError, TypeError) as e:
        raise AssertionError(f"'{api_name}' output structure: {e}") from None
      tree.map_structure(
        lambda e, o: np.testing.assert_allclose(o, e, rtol=rtol, atol=atol),
        expected,
        out,
      )
    return out

  def get_weights(self):
    return self.executor.get_weights()

  def set_weights(self, weights):
    self.executor.set_weights(weights)


def assert_parity(
  component,
  input_spaces,
  calls,
  rtol=1e-5,
  atol=1e-5,
  size=4,
  seed=0,
  copy_weights=True,
  tf_kwargs=None,
  api_names=None,
):
  """Builds `component` under TF and torch, copies the weights TF -> torch,
  feeds the same inputs and compares outputs within `rtol`/`atol`.

  calls: list of API names (inputs sampled from the input spaces with
    leading size `size`) or of `(api_name, args)` pairs; calls run in
    order on both executors, so stateful components are compared step by
    step.
  api_names: build only these APIs (default: all).
  Returns `(tf_outputs, torch_outputs)`, one entry per call.
  """
  both = {} if api_names is None else {"api_names": list(api_names)}
  tf_test = ComponentTest(
    component, input_spaces, "tf", seed, **both, **(tf_kwargs or {})
  )
  torch_test = ComponentTest(component, input_spaces, "torch", seed + 1, **both)
  if copy_weights:
    torch_test.set_weights(tf_test.get_weights())
  tf_outs, torch_outs = [], []
  for i, call in enumerate(calls):
    name, args = (call, None) if isinstance(call, str) else call
    if args is None:
      args = tf_test.sample(name, size, seed + i)
    a = tf_test.test(name, *args)
    b = torch_test.test(name, *args)
    try:
      tree.assert_same_structure(a, b)
      tree.map_structure(
        lambda x, y: np.testing.assert_allclose(y, x, rtol=rtol, atol=atol),
        a,
        b,
      )
    except (AssertionError, ValueError, TypeError) as e:
      raise AssertionError(
        f"TF vs torch differ in call {i} ('{name}'): {e}"
      ) from None
    tf_outs.append(a)
    torch_outs.append(b)
  return tf_outs, torch_outs
