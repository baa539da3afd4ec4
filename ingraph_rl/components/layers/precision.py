"""Mixed precision for the layers that multiply: the variables and the
layer's inputs and outputs stay float32, the product (conv or matmul, bias
and activation) runs in `compute_dtype`.

On CPUs with AMX or AVX512-BF16 (oneDNN picks them), bfloat16 cuts the
cost of large products: DQN's Nature-CNN update by ~26% of its CPU. Small
ones (IMPALA's shallow torso, MLPs) gain little or lose it to the casts
(benchmarks/results/cpu_budget_bfloat16_intel.json). Gradients flow
through the casts, so the backward products run in bfloat16 too and
arrive float32 at the variables, as in Keras' `mixed_bfloat16` policy.

A layer's `weights_dtype` stores its variables in that dtype instead (as
Keras' `bfloat16` policy), for copies of weights that are loaded, never
trained (an actor's networks): the cast happens once per load
(`Synchronizable.sync`), not in every call, and the products run in it.
"""

import ml_dtypes
import numpy as np
import tensorflow as tf

from ingraph_rl.errors import BuildError
from ingraph_rl.utils import config_fields
from ingraph_rl.utils.lazy import torch

# None: the inputs' dtype (no casts).
COMPUTE_DTYPES = (None,) + config_fields.COMPUTE_DTYPES


def check_compute_dtype(name, component, argument="compute_dtype"):
  if name not in COMPUTE_DTYPES:
    raise BuildError(
      f"'{component}': {argument} must be one of {COMPUTE_DTYPES}, got {name!r}"
    )
  return name


def weights_dtype_of(name, inputs_dtype):
  """The numpy dtype of a layer's variables: its `weights_dtype` `name`, or
  the inputs' dtype (None)."""
  if name is None:
    return np.dtype(inputs_dtype)
  if name == "bfloat16":
    return np.dtype(ml_dtypes.bfloat16)
  return np.dtype(name)


def tf_cast(compute_dtype, *tensors):
  """`tensors` in `compute_dtype` (None entries stay None)."""
  if compute_dtype is None:
    return tensors
  return tuple(
    None if t is None else tf.cast(t, compute_dtype) for t in tensors
  )


def torch_cast(compute_dtype, *tensors):
  if compute_dtype is None:
    return tensors
  dtype = getattr(torch, compute_dtype)
  return tuple(None if t is None else t.to(dtype) for t in tensors)
