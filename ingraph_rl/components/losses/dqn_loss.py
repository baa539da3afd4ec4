"""The DQN loss: (double) Q-learning targets, n-step bootstrapping, Huber
loss and importance weights in, TD errors out (for prioritized replay)."""

import tensorflow as tf

from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError
from ingraph_rl.utils.lazy import F


class DQNLoss(Component):
  """`loss(q_values, actions, rewards, terminals, next_q_target,
  next_q_online, importance_weights, discounts=None)` -> {"loss": scalar,
  "td_errors": [B]}.

  q_values: online Q(s_t, .) [B, A]; rewards: the n-step return
  sum_{k<n} discount^k r_{t+k} [B]; terminals: the episode ended within the
  n steps [B]; next_q_target / next_q_online: Q(s_{t+n}, .) of the target
  and online networks [B, A]; discounts (optional): the bootstrap discount
  of each sample [B], e.g. discount^m for n-step transitions shortened to
  m < n steps at an episode end (see `NStepAccumulator`). Without it every
  sample uses the constant discount^n_step.

    target = rewards + (1 - terminals) * discounts * Q_target(s', a*)
    a* = argmax_a Q_online(s', a)   (double_q)   or   argmax_a Q_target(s', a)
    td_error = target - Q(s_t, a_t)      (no gradient through the target)
    loss = mean(importance_weights * huber(td_error))

  With `huber_delta=None` the loss is 0.5 * td_error^2.
  """

  def __init__(
    self,
    discount=0.99,
    n_step=1,
    double_q=True,
    huber_delta=1.0,
    scope="dqn_loss",
  ):
    super().__init__(scope=scope)
    if not 0.0 <= discount <= 1.0 or n_step < 1:
      raise BuildError(f"'{scope}': need 0 <= discount <= 1 and n_step >= 1")
    self.discount = float(discount)
    self.n_step = int(n_step)
    self.double_q = bool(double_q)
    self.huber_delta = huber_delta

  @api
  def loss(
    self,
    q_values,
    actions,
    rewards,
    terminals,
    next_q_target,
    next_q_online,
    importance_weights,
    discounts=None,
  ):
    return self._graph_fn_loss(
      q_values,
      actions,
      rewards,
      terminals,
      next_q_target,
      next_q_online,
      importance_weights,
      discounts,
    )

  @graph_fn
  def _graph_fn_loss(
    self,
    q_values,
    actions,
    rewards,
    terminals,
    next_q_target,
    next_q_online,
    importance_weights,
    discounts=None,
  ):
    num_actions = tf.shape(q_values)[-1]
    q_taken = tf.reduce_sum(
      q_values * tf.one_hot(actions, num_actions, dtype=q_values.dtype), -1
    )
    chooser = next_q_online if self.double_q else next_q_target
    best = tf.argmax(chooser, axis=-1, output_type=tf.int32)
    next_value = tf.reduce_sum(
      next_q_target * tf.one_hot(best, num_actions, dtype=q_values.dtype), -1
    )
    not_done = 1.0 - tf.cast(terminals, q_values.dtype)
    if discounts is None:
      discounts = self.discount**self.n_step
    else:
      discounts = tf.cast(discounts, q_values.dtype)
    target = tf.stop_gradient(rewards + not_done * discounts * next_value)
    td = target - q_taken
    if self.huber_delta is None:
      per_sample = 0.5 * tf.square(td)
    else:
      d = self.huber_delta
      abs_td = tf.abs(td)
      quad = tf.minimum(abs_td, d)
      per_sample = 0.5 * tf.square(quad) + d * (abs_td - quad)
    loss = tf.reduce_mean(importance_weights * per_sample)
    return {"loss": loss, "td_errors": tf.stop_gradient(td)}

  @_graph_fn_loss.torch
  def _graph_fn_loss(
    self,
    q_values,
    actions,
    rewards,
    terminals,
    next_q_target,
    next_q_online,
    importance_weights,
    discounts=None,
  ):
    q_taken = q_values.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    chooser = next_q_online if self.double_q else next_q_target
    best = chooser.argmax(-1, keepdim=True)
    next_value = next_q_target.gather(-1, best).squeeze(-1)
    not_done = 1.0 - terminals.to(q_values.dtype)
    if discounts is None:
      discounts = self.discount**self.n_step
    else:
      discounts = discounts.to(q_values.dtype)
    target = (rewards + not_done * discounts * next_value).detach()
    td = target - q_taken
    if self.huber_delta is None:
      per_sample = 0.5 * td * td
    else:
      per_sample = F.huber_loss(
        q_taken, target, reduction="none", delta=self.huber_delta
      )
    loss = (importance_weights * per_sample).mean()
    return {"loss": loss, "td_errors": td.detach()}
