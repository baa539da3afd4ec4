"""Spaces in TensorFlow's terms: dtypes and `tf.TensorSpec`s.

Spaces themselves know only NumPy; the TF executor, TF bodies and exports
convert them here.

    >>> from ingraph_rl.spaces import FloatBox
    >>> tensor_spec(FloatBox((4,), add_batch_rank=True))
    TensorSpec(shape=(None, 4), dtype=tf.float32, name=None)
"""

import typing

import tensorflow as tf
import tree

from ingraph_rl.spaces import BoxSpace, Space


def tf_dtype(space: BoxSpace) -> tf.DType:
  """The TF dtype of a box space's values (`tf.string` for text)."""
  if space.dtype.kind in "OUS":
    return tf.string
  return tf.as_dtype(space.dtype)


def tensor_spec(space: Space, name: str | None = None) -> typing.Any:
  """`tf.TensorSpec` of a box space, with None for its batch and time dims
  (a nest of them for a container space, whose leaves get no name)."""
  if isinstance(space, BoxSpace):
    return tf.TensorSpec(space.full_shape(), tf_dtype(space), name=name)
  return tree.map_structure(tensor_spec, space.structure())
