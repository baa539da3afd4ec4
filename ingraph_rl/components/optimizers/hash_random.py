"""Counter-based random numbers that TF and torch compute bit for bit alike.

Optimizers that draw (a minibatch shuffle, evolutionary perturbations) must
give the same weights in both executors, and TF's and torch's generators
differ. So they hash (seed, counter, index) with integer ops both backends
share (a murmur-style finalizer in 31 bits, so int64 products never
overflow), and keep the counter in a variable (checkpointed with the rest).
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.utils.lazy import torch

_MASK = 0x7FFFFFFF
_ROUNDS = ((16, 0x2C1B3C6D), (13, 0x297A2D39), (16, 0x3B9AC9FB))


def _hash(x, xp):
  """Mixes int64 values in [0, 2^31) into [0, 2^31)."""
  for s, m in _ROUNDS:
    x = ((xp.xor(x, xp.shift(x, s)) * m) + 0x165667B1) & _MASK
  return xp.xor(x, xp.shift(x, 15))


def _keys(seed, counter, n, stream, xp):
  """[n] int64 hashes of (seed, counter, stream, i)."""
  i = xp.arange(n)
  base = (seed * 0x9E3779B1 + stream * 0x61C88647) & _MASK
  start = _hash((xp.cast(counter) * 0x5BD1E995 + base) & _MASK, xp)
  # Two rounds: the index's bits reach every output bit.
  return _hash(_hash((start + i * 0x27D4EB2F) & _MASK, xp), xp)


class _TF:
  xor = staticmethod(tf.bitwise.bitwise_xor)

  @staticmethod
  def shift(x, s):
    return tf.bitwise.right_shift(x, tf.constant(s, tf.int64))

  @staticmethod
  def arange(n):
    return tf.range(tf.cast(n, tf.int64), dtype=tf.int64)

  @staticmethod
  def cast(c):
    return tf.cast(c, tf.int64)


class _Torch:
  @staticmethod
  def xor(a, b):
    return a ^ b

  @staticmethod
  def shift(x, s):
    return x >> s

  @staticmethod
  def arange(n):
    return torch.arange(int(n), dtype=torch.int64)

  @staticmethod
  def cast(c):
    return torch.as_tensor(c).to(torch.int64)


def tf_uniform(seed, counter, n, stream=0):
  """[n] float64 uniforms in (0, 1) for (seed, counter, stream)."""
  keys = _keys(seed, counter, n, stream, _TF)
  return (tf.cast(keys, tf.float64) + 0.5) / float(_MASK + 1)


def torch_uniform(seed, counter, n, stream=0):
  keys = _keys(seed, counter, n, stream, _Torch)
  return (keys.to(torch.float64) + 0.5) / float(_MASK + 1)


def tf_normal(seed, counter, n, stream=0):
  """[n] float64 standard normals (Box-Muller on two uniform streams)."""
  u1 = tf_uniform(seed, counter, n, 2 * stream + 1)
  u2 = tf_uniform(seed, counter, n, 2 * stream + 2)
  return tf.sqrt(-2.0 * tf.math.log(u1)) * tf.cos(2.0 * np.pi * u2)


def torch_normal(seed, counter, n, stream=0):
  u1 = torch_uniform(seed, counter, n, 2 * stream + 1)
  u2 = torch_uniform(seed, counter, n, 2 * stream + 2)
  return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * np.pi * u2)


def tf_permutation(seed, counter, n):
  """A permutation of range(n) (int64): indices sorted by their hash, ties
  by index (a stable sort; both backends agree)."""
  keys = _keys(seed, counter, n, 0, _TF)
  return tf.cast(tf.argsort(keys, stable=True), tf.int32)


def torch_permutation(seed, counter, n):
  keys = _keys(seed, counter, n, 0, _Torch)
  return torch.argsort(keys, stable=True).to(torch.int32)
