"""V-trace off-policy targets (Espeholt et al. 2018, IMPALA, eq. 1), as
plain functions: a TensorFlow version and a torch mirror.

Everything is time-major: `[T, B, ...]`, with any number of trailing dims
as long as all per-step inputs share them (`bootstrap_value` is
`[B, ...]`). With rho_t = pi(a_t|x_t) / mu(a_t|x_t) (`log_rhos` is its log),
gamma_t the per-step discount and V_T = bootstrap_value:

    delta_t = clip_rho(rho_t) * (r_t + gamma_t V_{t+1} - V_t)
    c_t = lambda * min(1, rho_t)
    v_s = V_s + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t
        = V_s + delta_s + gamma_s c_s (v_{s+1} - V_{s+1})      (computed so)
    pg_advantage_s = clip_pg_rho(rho_s) * (r_s + gamma_s v_{s+1} - V_s)

with v_T = V_T, clip_rho(x) = min(clip_rho_threshold, x) (no clip for a
None threshold) and likewise clip_pg_rho. `vs` and `pg_advantages` are
targets: no gradient flows through them.

    >>> import numpy as np
    >>> z = np.zeros((3, 2), np.float32)
    >>> out = from_importance_weights(z, z + 0.9, z + 1.0, z,
    ...                               np.zeros(2, np.float32))
    >>> np.round(out.vs.numpy()[:, 0], 2)  # On-policy: discounted returns.
    array([2.71, 1.9 , 1.  ], dtype=float32)
"""

import collections

import tensorflow as tf

from ingraph_rl.errors import SpaceError
from ingraph_rl.utils.lazy import F, torch

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])

VTraceFromLogitsReturns = collections.namedtuple(
  "VTraceFromLogitsReturns",
  [
    "vs",
    "pg_advantages",
    "log_rhos",
    "behaviour_action_log_probs",
    "target_action_log_probs",
  ],
)


# --- checks (shared by both backends) ----------------------------------------


def _shape_of(x):
  """Static shape as a tuple (None for unknown dims), or None if the rank
  itself is unknown (a TF graph tensor of unknown rank)."""
  shape = getattr(x, "shape", None)
  if shape is None:
    return ()  # A Python number: rank 0.
  if isinstance(shape, tf.TensorShape):
    return None if shape.rank is None else tuple(shape.as_list())
  return tuple(int(d) for d in shape)


def _check_ranks(fn_name, reference, args):
  """Raises a SpaceError unless every argument has its expected rank and
  agrees with `reference` on the leading dims it shares with it.

  reference: (name, tensor, description) whose rank defines the others.
  args: (name, tensor, rank offset from the reference rank, description).
  """
  ref_name, ref, ref_desc = reference
  ref_shape = _shape_of(ref)
  if ref_shape is None:
    return  # Unknown rank: nothing to check statically.
  for name, x, offset, desc in args:
    shape = _shape_of(x)
    if shape is None:
      continue
    want = len(ref_shape) + offset
    if len(shape) != want:
      raise SpaceError(
        f"wrong rank in vtrace.{fn_name}()",
        argument=name,
        expected=f"rank {want}: {desc} (from {ref_name} {ref_desc} of "
        f"shape {ref_shape})",
        received=f"rank {len(shape)}, shape {shape}",
      )
    # The leading dims this argument shares with the reference must agree
    # (bootstrap_value [B, ...] lines up with the reference's [1:]).
    ref_dims = ref_shape[1:] if offset < 0 else ref_shape
    for i, (a, b) in enumerate(zip(shape, ref_dims)):
      if a is not None and b is not None and a != b:
        raise SpaceError(
          f"shape mismatch in vtrace.{fn_name}() (dim {i})",
          argument=name,
          expected=f"{desc}, compatible with {ref_name} of shape {ref_shape}",
          received=f"shape {shape}",
        )


def _check_min_rank(fn_name, name, x, min_rank, desc):
  shape = _shape_of(x)
  if shape is not None and len(shape) < min_rank:
    raise SpaceError(
      f"wrong rank in vtrace.{fn_name}()",
      argument=name,
      expected=f"rank >= {min_rank}: {desc}",
      received=f"rank {len(shape)}, shape {shape}",
    )


def _check_importance_weight_args(
  fn_name,
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  ref_name,
  ref_desc,
):
  _check_min_rank(fn_name, ref_name, log_rhos, 2, f"{ref_desc}")
  _check_ranks(
    fn_name,
    (ref_name, log_rhos, ref_desc),
    [
      ("discounts", discounts, 0, "[T, B, ...]"),
      ("rewards", rewards, 0, "[T, B, ...]"),
      ("values", values, 0, "[T, B, ...]"),
      ("bootstrap_value", bootstrap_value, -1, "[B, ...]"),
    ],
  )


def _check_logits_args(
  fn_name, behaviour_policy_logits, target_policy_logits, actions
):
  _check_min_rank(
    fn_name,
    "behaviour_policy_logits",
    behaviour_policy_logits,
    3,
    "[T, B, ..., NUM_ACTIONS]",
  )
  _check_ranks(
    fn_name,
    (
      "behaviour_policy_logits",
      behaviour_policy_logits,
      "[T, B, ..., NUM_ACTIONS]",
    ),
    [
      (
        "target_policy_logits",
        target_policy_logits,
        0,
        "[T, B, ..., NUM_ACTIONS]",
      )
    ],
  )
  shape, actions_shape = _shape_of(behaviour_policy_logits), _shape_of(actions)
  if (
    shape is not None
    and actions_shape is not None
    and (
      len(actions_shape) != len(shape) - 1
      or any(
        a is not None and b is not None and a != b
        for a, b in zip(actions_shape, shape[:-1])
      )
    )
  ):
    raise SpaceError(
      f"wrong rank or shape in vtrace.{fn_name}()",
      argument="actions",
      expected=f"[T, B, ...]: the logits' shape {shape} without the "
      f"action axis",
      received=f"rank {len(actions_shape)}, shape {actions_shape}",
    )


def _check_settings(
  fn_name, clip_rho_threshold, clip_pg_rho_threshold, lambda_
):
  for name, value in (
    ("clip_rho_threshold", clip_rho_threshold),
    ("clip_pg_rho_threshold", clip_pg_rho_threshold),
    ("lambda_", lambda_),
  ):
    if value is not None and _shape_of(value) not in ((), None):
      raise SpaceError(
        f"wrong rank in vtrace.{fn_name}()",
        argument=name,
        expected="a scalar (or None for the thresholds)",
        received=f"shape {_shape_of(value)}",
      )


# --- TensorFlow --------------------------------------------------------------


def _as_dtype(x, dtype):
  """A setting (lambda_, a clip threshold) in the inputs' dtype, exactly:
  `tf.cast(0.95, tf.float64)` would go through float32 first."""
  if tf.is_tensor(x):
    return tf.cast(x, dtype)
  return tf.constant(x, dtype)


def from_importance_weights(
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """V-trace targets from log importance weights.

  Args:
    log_rhos: [T, B, ...] log(pi(a_t|x_t) / mu(a_t|x_t)), float.
    discounts: [T, B, ...] per-step discount (0 where the episode ended).
    rewards: [T, B, ...].
    values: [T, B, ...] V(x_t) of the learner's baseline.
    bootstrap_value: [B, ...] V(x_T).
    clip_rho_threshold: rho-bar of the value target; None: no clipping.
    clip_pg_rho_threshold: rho-bar of the policy-gradient advantage; None:
      no clipping.
    lambda_: scales the traces c_t (1.0: plain V-trace).

  Returns:
    VTraceReturns(vs [T, B, ...], pg_advantages [T, B, ...]), no gradient.
  """
  _check_importance_weight_args(
    "from_importance_weights",
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    "log_rhos",
    "[T, B, ...]",
  )
  _check_settings(
    "from_importance_weights",
    clip_rho_threshold,
    clip_pg_rho_threshold,
    lambda_,
  )
  return _tf_vtrace(
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold,
    clip_pg_rho_threshold,
    lambda_,
  )


def _tf_vtrace(
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold,
  clip_pg_rho_threshold,
  lambda_,
):
  with tf.name_scope("vtrace"):
    # Targets only: keep the scan's while loop off any gradient tape.
    log_rhos = tf.stop_gradient(log_rhos)
    dtype = log_rhos.dtype
    discounts = tf.stop_gradient(_as_dtype(discounts, dtype))
    rewards = tf.stop_gradient(_as_dtype(rewards, dtype))
    values = tf.stop_gradient(_as_dtype(values, dtype))
    bootstrap_value = tf.stop_gradient(_as_dtype(bootstrap_value, dtype))

    rhos = tf.exp(log_rhos)
    clipped_rhos = (
      rhos
      if clip_rho_threshold is None
      else tf.minimum(_as_dtype(clip_rho_threshold, dtype), rhos)
    )
    cs = _as_dtype(lambda_, dtype) * tf.minimum(tf.ones([], dtype), rhos)
    values_tp1 = tf.concat([values[1:], bootstrap_value[tf.newaxis]], 0)
    deltas = clipped_rhos * (rewards + discounts * values_tp1 - values)

    # v_s - V_s = delta_s + gamma_s c_s (v_{s+1} - V_{s+1}), from the end.
    vs_minus_values = tf.scan(
      lambda acc, x: x[1] + x[0] * acc,
      (discounts * cs, deltas),
      initializer=tf.zeros_like(bootstrap_value),
      reverse=True,
    )
    vs = vs_minus_values + values

    vs_tp1 = tf.concat([vs[1:], bootstrap_value[tf.newaxis]], 0)
    pg_rhos = (
      rhos
      if clip_pg_rho_threshold is None
      else tf.minimum(_as_dtype(clip_pg_rho_threshold, dtype), rhos)
    )
    pg_advantages = pg_rhos * (rewards + discounts * vs_tp1 - values)
    # Targets, not functions of the parameters: no gradient through them.
    return VTraceReturns(
      vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages)
    )


def from_logits(
  behaviour_policy_logits,
  target_policy_logits,
  actions,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """V-trace for softmax policies given by logits.

  Args:
    behaviour_policy_logits: [T, B, ..., NUM_ACTIONS] logits of mu (the
      actors' policy).
    target_policy_logits: [T, B, ..., NUM_ACTIONS] logits of pi (the
      learner's policy).
    actions: [T, B, ...] int actions taken by mu.
    discounts, rewards, values, bootstrap_value, clip_rho_threshold,
    clip_pg_rho_threshold, lambda_: as in `from_importance_weights`.

  Returns:
    VTraceFromLogitsReturns(vs, pg_advantages, log_rhos,
    behaviour_action_log_probs, target_action_log_probs), all [T, B, ...].
    `vs` and `pg_advantages` carry no gradient; the log-probabilities do.
  """
  _check_logits_args(
    "from_logits", behaviour_policy_logits, target_policy_logits, actions
  )
  _check_importance_weight_args(
    "from_logits",
    actions,
    discounts,
    rewards,
    values,
    bootstrap_value,
    "actions",
    "[T, B, ...]",
  )
  _check_settings(
    "from_logits", clip_rho_threshold, clip_pg_rho_threshold, lambda_
  )
  with tf.name_scope("vtrace_from_logits"):
    actions = tf.convert_to_tensor(actions)
    behaviour = tf.convert_to_tensor(behaviour_policy_logits)
    target = tf.convert_to_tensor(target_policy_logits, behaviour.dtype)
    behaviour_log_probs = -tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=actions, logits=behaviour
    )
    target_log_probs = -tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=actions, logits=target
    )
    log_rhos = target_log_probs - behaviour_log_probs
    vtrace = _tf_vtrace(
      log_rhos,
      discounts,
      rewards,
      values,
      bootstrap_value,
      clip_rho_threshold,
      clip_pg_rho_threshold,
      lambda_,
    )
    return VTraceFromLogitsReturns(
      vs=vtrace.vs,
      pg_advantages=vtrace.pg_advantages,
      log_rhos=log_rhos,
      behaviour_action_log_probs=behaviour_log_probs,
      target_action_log_probs=target_log_probs,
    )


# --- torch mirror ------------------------------------------------------------


def torch_from_importance_weights(
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """The torch mirror of `from_importance_weights` (same arguments, torch
  tensors; returns detached tensors)."""
  _check_importance_weight_args(
    "torch_from_importance_weights",
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    "log_rhos",
    "[T, B, ...]",
  )
  _check_settings(
    "torch_from_importance_weights",
    clip_rho_threshold,
    clip_pg_rho_threshold,
    lambda_,
  )
  return _torch_vtrace(
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold,
    clip_pg_rho_threshold,
    lambda_,
  )


def _torch_vtrace(
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold,
  clip_pg_rho_threshold,
  lambda_,
):
  # Targets carry no gradient: no autograd history at all.
  with torch.no_grad():
    dtype = log_rhos.dtype
    discounts = discounts.to(dtype)
    rewards = rewards.to(dtype)
    values = values.to(dtype)
    bootstrap_value = bootstrap_value.to(dtype)

    rhos = torch.exp(log_rhos)
    clipped_rhos = (
      rhos
      if clip_rho_threshold is None
      else torch.clamp(rhos, max=float(clip_rho_threshold))
    )
    cs = float(lambda_) * torch.clamp(rhos, max=1.0)
    values_tp1 = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], 0)
    deltas = clipped_rhos * (rewards + discounts * values_tp1 - values)

    discounted_cs = discounts * cs
    acc = torch.zeros_like(bootstrap_value)
    out = []
    for t in reversed(range(log_rhos.shape[0])):
      acc = deltas[t] + discounted_cs[t] * acc
      out.append(acc)
    vs_minus_values = (
      torch.stack(out[::-1], 0) if out else torch.zeros_like(values)
    )
    vs = vs_minus_values + values

    vs_tp1 = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], 0)
    pg_rhos = (
      rhos
      if clip_pg_rho_threshold is None
      else torch.clamp(rhos, max=float(clip_pg_rho_threshold))
    )
    pg_advantages = pg_rhos * (rewards + discounts * vs_tp1 - values)
  return VTraceReturns(vs=vs, pg_advantages=pg_advantages)


def torch_from_logits(
  behaviour_policy_logits,
  target_policy_logits,
  actions,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """The torch mirror of `from_logits`."""
  _check_logits_args(
    "torch_from_logits", behaviour_policy_logits, target_policy_logits, actions
  )
  _check_importance_weight_args(
    "torch_from_logits",
    actions,
    discounts,
    rewards,
    values,
    bootstrap_value,
    "actions",
    "[T, B, ...]",
  )
  _check_settings(
    "torch_from_logits", clip_rho_threshold, clip_pg_rho_threshold, lambda_
  )
  index = actions.long().unsqueeze(-1)
  behaviour_log_probs = (
    F.log_softmax(behaviour_policy_logits, -1).gather(-1, index).squeeze(-1)
  )
  target_log_probs = (
    F.log_softmax(target_policy_logits.to(behaviour_policy_logits.dtype), -1)
    .gather(-1, index)
    .squeeze(-1)
  )
  log_rhos = target_log_probs - behaviour_log_probs
  vtrace = _torch_vtrace(
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold,
    clip_pg_rho_threshold,
    lambda_,
  )
  return VTraceFromLogitsReturns(
    vs=vtrace.vs,
    pg_advantages=vtrace.pg_advantages,
    log_rhos=log_rhos,
    behaviour_action_log_probs=behaviour_log_probs,
    target_action_log_probs=target_log_probs,
  )
