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
  return torch.from_numpy(np.zeros((), dtype)).dtype


def numpy_dtype(dtype: typing.Any) -> np.dtype:
  """The NumPy dtype of a `torch.dtype`."""
  return torch.empty((), dtype=dtype).numpy().dtype
