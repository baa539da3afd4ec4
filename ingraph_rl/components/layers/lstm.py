"""LSTM over a sequence, with state in and state out.

One fused kernel of shape [F + units, 4 * units] (TF layout: `[x, h] @
kernel`), gate order i, f, g (cell candidate), o along the last axis, the
same order as torch.nn.LSTM and Keras. So a Keras LSTM's weights map as
`kernel = concat([kernel, recurrent_kernel], 0)`, and torch.nn.LSTM's as
`kernel = concat([weight_ih, weight_hh], 1).T`, `bias = bias_ih + bias_hh`.

Forget bias: like Keras `unit_forget_bias=True`, the f-slice of the bias is
*initialized* to 1.0 (not added in the computation, as TF1's LSTMCell did),
so the step is the textbook one and weights exchange 1:1 with Keras/torch:

    z = [x_t, h] @ kernel + bias;  i, f, g, o = split(z, 4)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)

The torch mirror stores the kernel as (4 * units, F + units) (torch's
layout) and loops over time in Python.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import BoolBox, Dict, FloatBox
from ingraph_rl.utils.lazy import F, torch


class LSTM(Component):
  """LSTM layer over [B, T, F] (or time-major [T, B, F]) inputs.

  APIs:
    call(inputs, initial_state, resets=None) -> {"outputs": [B, T, units]
      (same major-ness as `inputs`), "state": {"c", "h"} of [B, units]}.
      `resets` (bool, same leading dims as `inputs`): where True, the state
      is zeroed *before* that step (an episode starts there), as in
      IMPALA's scalable_agent.
    zero_state(batch_size) -> {"c", "h"} of zeros [batch_size, units].
  """

  # The kernel depends only on the inputs' feature size.
  variable_args = ("inputs",)

  def __init__(
    self,
    units,
    kernel_initializer="glorot_uniform",
    forget_bias=1.0,
    scope="lstm",
  ):
    super().__init__(scope=scope)
    self.units = int(units)
    self.kernel_initializer = kernel_initializer
    self.forget_bias = float(forget_bias)

  def create_variables(self, input_spaces):
    space = self.expect_space(input_spaces, "inputs", FloatBox, rank=1)
    if not (space.has_batch_rank and space.has_time_rank):
      raise SpaceError(
        "the LSTM needs batch and time ranks",
        component=self.path,
        argument="inputs",
        expected="FloatBox with per-item rank 1, batch and time ranks",
        received=repr(space),
      )
    self.time_major = space.time_major
    self.dtype = space.dtype
    self.state_space = Dict(
      {
        "c": FloatBox((self.units,), dtype=space.dtype),
        "h": FloatBox((self.units,), dtype=space.dtype),
      },
      add_batch_rank=True,
    )
    state = input_spaces.get("initial_state")
    if state is not None and not _same_leaves(state, self.state_space):
      raise SpaceError(
        "bad LSTM state space",
        component=self.path,
        argument="initial_state",
        expected=repr(self.state_space),
        received=repr(state),
      )
    resets = input_spaces.get("resets")
    if resets is not None:
      want = BoolBox(
        (), add_batch_rank=True, add_time_rank=True, time_major=space.time_major
      )
      if resets != want or resets.time_major != want.time_major:
        raise SpaceError(
          "bad resets space",
          component=self.path,
          argument="resets",
          expected=repr(want),
          received=repr(resets),
        )
    in_dim, u = space.shape[0], self.units
    self.kernel = self.add_variable(
      "kernel",
      (in_dim + u, 4 * u),
      space.dtype,
      self.kernel_initializer,
      torch_permutation=(1, 0),
    )
    bias = np.zeros(4 * u, space.dtype)
    bias[u : 2 * u] = self.forget_bias
    self.bias = self.add_variable("bias", (4 * u,), space.dtype, bias)
    self.in_dim = in_dim

  @api
  def call(self, inputs, initial_state, resets=None):
    return self._graph_fn_call(inputs, initial_state, resets)

  @api
  def zero_state(self, batch_size):
    return self._graph_fn_zero_state(batch_size)

  # --- TF --------------------------------------------------------------------

  @graph_fn
  def _graph_fn_call(self, inputs, initial_state, resets):
    x = inputs if self.time_major else tf.transpose(inputs, [1, 0, 2])
    # The input part of all steps at once: [T, B, 4u].
    xw = (
      tf.tensordot(x, self.kernel[: self.in_dim], axes=[[2], [0]]) + self.bias
    )
    elems = (xw,)
    if resets is not None:
      r = resets if self.time_major else tf.transpose(resets)
      elems += (1.0 - tf.cast(r, x.dtype),)  # keep: 0 where reset.
    recurrent = self.kernel[self.in_dim :]

    def step(carry, elems):
      c, h = carry
      z = elems[0]
      if len(elems) == 2:
        c, h = c * elems[1][:, None], h * elems[1][:, None]
      i, f, g, o = tf.split(z + tf.matmul(h, recurrent), 4, axis=-1)
      c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
      h = tf.sigmoid(o) * tf.tanh(c)
      return c, h

    c0, h0 = initial_state["c"], initial_state["h"]
    cs, hs = tf.scan(step, elems, initializer=(c0, h0))
    outs = hs if self.time_major else tf.transpose(hs, [1, 0, 2])
    # The last state; with T == 0 the initial state.
    c_last = tf.concat([c0[None], cs], 0)[-1]
    h_last = tf.concat([h0[None], hs], 0)[-1]
    return {"outputs": outs, "state": {"c": c_last, "h": h_last}}

  @_graph_fn_call.torch
  def _graph_fn_call(self, inputs, initial_state, resets):
    x = inputs if self.time_major else inputs.transpose(0, 1)
    xw = F.linear(x, self.kernel[:, : self.in_dim], self.bias)
    recurrent = self.kernel[:, self.in_dim :]
    if resets is None:
      keep = None
    else:
      r = resets if self.time_major else resets.transpose(0, 1)
      keep = 1.0 - r.to(x.dtype)
    c, h = initial_state["c"], initial_state["h"]
    outs = []
    for t in range(x.shape[0]):
      if keep is not None:
        c, h = c * keep[t, :, None], h * keep[t, :, None]
      i, f, g, o = (xw[t] + F.linear(h, recurrent)).chunk(4, dim=-1)
      c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
      h = torch.sigmoid(o) * torch.tanh(c)
      outs.append(h)
    outs = (
      torch.stack(outs, 0)
      if outs
      else x.new_zeros(tuple(x.shape[:2]) + (self.units,))
    )
    if not self.time_major:
      outs = outs.transpose(0, 1)
    return {"outputs": outs, "state": {"c": c, "h": h}}

  # --- zero state ------------------------------------------------------------

  @graph_fn(output_space=lambda self: self.state_space)
  def _graph_fn_zero_state(self, batch_size):
    zeros = tf.zeros(
      tf.stack([tf.cast(batch_size, tf.int32), self.units]), self.dtype
    )
    return {"c": zeros, "h": tf.identity(zeros)}

  @_graph_fn_zero_state.torch
  def _graph_fn_zero_state(self, batch_size):
    shape = (int(batch_size), self.units)
    dtype = torch.from_numpy(np.zeros((), self.dtype)).dtype
    return {
      "c": torch.zeros(shape, dtype=dtype),
      "h": torch.zeros(shape, dtype=dtype),
    }


def _same_leaves(space, want):
  """Leaf-wise equality (an inferred Dict carries its ranks on the leaves,
  not on the container)."""
  try:
    got = space.flatten()
  except AttributeError:
    return False
  return [(p, s) for p, s in got] == [(p, s) for p, s in want.flatten()]
