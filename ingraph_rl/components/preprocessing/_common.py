"""Shared input-space checks of the preprocessors."""

import numpy as np

from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoxSpace


def check_inputs(
  component,
  input_spaces,
  arg="inputs",
  api="call",
  kinds="fiu",
  ranks=None,
  time_rank=True,
  last_dim=None,
):
  """The space of `arg`: a single tensor with a batch rank (and a time rank
  only where `time_rank`), a dtype of one of the numpy `kinds`, a per-item
  rank in `ranks` (None: any) and, when given, last dim `last_dim`. Raises
  a SpaceError naming the component, the API method and the argument."""
  space = input_spaces.get(arg)
  want = [f"a tensor of dtype kind {'/'.join(kinds)} with a batch rank"]
  if not time_rank:
    want.append("no time rank")
  if ranks is not None:
    want.append(f"per-item rank in {tuple(ranks)}")
  if last_dim is not None:
    want.append(f"last dim {last_dim}")
  problem = None
  if not isinstance(space, BoxSpace):
    problem = "inputs must be a single tensor"
  elif not space.has_batch_rank:
    problem = "a batch rank is required"
  elif space.has_time_rank and not time_rank:
    problem = "a time rank is not supported"
  elif np.dtype(space.dtype).kind not in kinds:
    problem = f"unsupported dtype {space.dtype}"
  elif ranks is not None and space.rank not in ranks:
    problem = f"unsupported per-item rank {space.rank}"
  elif last_dim is not None and (space.rank < 1 or space.shape[-1] != last_dim):
    problem = f"last dim must be {last_dim}"
  if problem is not None:
    raise SpaceError(
      problem,
      component=component.path,
      api=api,
      argument=arg,
      expected=", ".join(want),
      received=repr(space),
    )
  return space


def float_dtype(dtype):
  """The compute dtype of a value of `dtype`: itself when floating, else
  float32."""
  dtype = np.dtype(dtype)
  return dtype if dtype.kind == "f" else np.dtype(np.float32)


def torch_dtype(dtype):
  """The torch dtype of a numpy dtype."""
  from ingraph_rl.utils.lazy import torch

  return torch.from_numpy(np.zeros((), np.dtype(dtype))).dtype
