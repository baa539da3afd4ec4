"""Shared by the image layers: fold leading ranks into one batch dim (and
NHWC <-> NCHW for torch), and TF's SAME padding for torch."""

import math

import tensorflow as tf


def tf_fold(inputs, num_leading):
  """[*lead, H, W, C] -> ([N, H, W, C], lead shape tensor)."""
  lead = tf.shape(inputs)[:num_leading]
  return tf.reshape(inputs, tf.concat([[-1], tf.shape(inputs)[-3:]], 0)), lead


def tf_unfold(outputs, lead):
  return tf.reshape(outputs, tf.concat([lead, tf.shape(outputs)[1:]], 0))


def torch_fold_nchw(inputs, num_leading):
  """[*lead, H, W, C] -> ([N, C, H, W], lead shape)."""
  lead = tuple(inputs.shape[:num_leading])
  x = inputs.reshape((-1,) + tuple(inputs.shape[-3:])).permute(0, 3, 1, 2)
  return x, lead


def torch_unfold_nchw(outputs, lead):
  """[N, C, H, W] -> [*lead, H, W, C]."""
  out = outputs.permute(0, 2, 3, 1)
  return out.reshape(lead + tuple(out.shape[1:]))


def same_padding(h, w, kernel_size, strides):
  """TF's SAME padding (extra pixel at the bottom/right) as F.pad args."""
  pads = []
  for size, k, s in (
    (w, kernel_size[1], strides[1]),
    (h, kernel_size[0], strides[0]),
  ):
    total = max((math.ceil(size / s) - 1) * s + k - size, 0)
    pads += [total // 2, total - total // 2]
  return pads
