"""Spaces in torch's terms: dtype conversions.

Spaces themselves know only NumPy; the torch executor and torch bodies
convert them here. Importing this module does not import torch (components
import it at module level and TF users never load torch).

    >>> import numpy as np
    >>> from ingraph_rl.spaces import IntBox
    >>> torch_dtype(IntBox(3))
    torch.int32
    >>> numpy_dtype(torch_dtype(IntBox(3, dtype=np.uint8)))
    dtype('uint8')
"""

import typing

import ml_dtypes
import numpy as np

from ingraph_rl.spaces import BoxSpace
from ingraph_rl.utils.lazy import torch


def torch_dtype(space_or_dtype: BoxSpace | typing.Any) -> typing.Any:
  """The `torch.dtype` of a box space's values, or of a NumPy dtype. There
  is none for text (`TextBox`)."""
  if isinstance(space_or_dtype, BoxSpace):
    dtype = space_or_dtype.dtype
  else:
    dtype = np.dtype(space_or_dtype)
  if dtype.name == "bfloat16":  # ml_dtypes' type: torch cannot take it.
    return torch.bfloat16
  return torch.from_numpy(np.zeros((), dtype)).dtype


def numpy_dtype(dtype: typing.Any) -> np.dtype:
  """The NumPy dtype of a `torch.dtype`."""
  if dtype == torch.bfloat16:
    return np.dtype(ml_dtypes.bfloat16)
  return torch.empty((), dtype=dtype).numpy().dtype


def from_numpy(array: np.ndarray) -> typing.Any:
  """`torch.from_numpy`, also for ml_dtypes' bfloat16 (via float32)."""
  if array.dtype.name == "bfloat16":
    return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
  return torch.from_numpy(array)


def to_numpy(tensor: typing.Any) -> np.ndarray:
  """`tensor.numpy()`, also for bfloat16 (as ml_dtypes' bfloat16)."""
  if tensor.dtype == torch.bfloat16:
    return tensor.float().numpy().astype(ml_dtypes.bfloat16)
  return tensor.numpy()
