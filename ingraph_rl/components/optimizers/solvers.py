"""Solvers as graph loops: conjugate gradient over lists of tensors (the
weights' shapes), and Hessian-of-KL (Fisher) vector products."""

import tensorflow as tf

from ingraph_rl.executors.gradients import tf_no_recording
from ingraph_rl.utils.lazy import torch


def dot(xs, ys):
  """Sum of elementwise products over two lists of tensors (either
  backend)."""
  if isinstance(xs[0], (tf.Tensor, tf.Variable)):
    return tf.add_n([tf.reduce_sum(x * y) for x, y in zip(xs, ys)])
  return sum((x * y).sum() for x, y in zip(xs, ys))


def tf_conjugate_gradient(matvec, b, iterations, tolerance=1e-10):
  """x with A x = b for a symmetric positive-definite A given as `matvec`
  (a list of tensors -> a list like it), starting from x = 0: at most
  `iterations` steps of a `tf.while_loop`, fewer once the squared residual
  is <= `tolerance`. Returns (x, steps run (int32))."""
  x = [tf.zeros_like(t) for t in b]
  rdotr = dot(b, b)

  def body(k, x, r, p, rdotr):
    ap = matvec(p)
    alpha = rdotr / dot(p, ap)
    x = [xi + alpha * pi for xi, pi in zip(x, p)]
    r = [ri - alpha * api for ri, api in zip(r, ap)]
    new = dot(r, r)
    p = [ri + (new / rdotr) * pi for ri, pi in zip(r, p)]
    return k + 1, x, r, p, new

  k, x, _, _, _ = tf.while_loop(
    lambda k, x, r, p, rdotr: (k < iterations) & (rdotr > tolerance),
    body,
    (tf.constant(0), x, list(b), list(b), rdotr),
    parallel_iterations=1,
  )
  return x, k


def torch_conjugate_gradient(matvec, b, iterations, tolerance=1e-10):
  """The torch mirror of `tf_conjugate_gradient`."""
  x = [torch.zeros_like(t) for t in b]
  r, p = list(b), list(b)
  rdotr = dot(r, r)
  k = 0
  while k < iterations and bool(rdotr > tolerance):
    ap = matvec(p)
    alpha = rdotr / dot(p, ap)
    x = [xi + alpha * pi for xi, pi in zip(x, p)]
    r = [ri - alpha * api for ri, api in zip(r, ap)]
    new = dot(r, r)
    p = [ri + (new / rdotr) * pi for ri, pi in zip(r, p)]
    rdotr, k = new, k + 1
  return x, k


def tf_hessian_vector_product(fn, params, vector):
  """H v, H the Hessian of the scalar `fn()` w.r.t. `params` at their
  values (double backprop on tapes of its own). With fn = KL(pi_old ||
  pi) at pi = pi_old this is the Fisher-vector product."""
  with tf_no_recording():
    with tf.GradientTape(watch_accessed_variables=False) as outer:
      outer.watch(params)
      with tf.GradientTape(watch_accessed_variables=False) as inner:
        inner.watch(params)
        value = fn()
      grads = inner.gradient(
        value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO
      )
      gv = dot(grads, vector)
    return outer.gradient(
      gv, params, unconnected_gradients=tf.UnconnectedGradients.ZERO
    )


def torch_hessian_vector_product(fn, params, vector):
  """The torch mirror of `tf_hessian_vector_product`."""
  with torch.enable_grad():
    value = fn()
    grads = torch.autograd.grad(
      value, params, create_graph=True, allow_unused=True
    )
    grads = [
      torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)
    ]
    gv = dot(grads, vector)
    out = torch.autograd.grad(gv, params, allow_unused=True)
  return [
    torch.zeros_like(p) if h is None else h.detach()
    for h, p in zip(out, params)
  ]
