"""V-trace (TF and torch) against an independent NumPy double loop over the
paper's formula (Espeholt et al. 2018, eq. 1); from_logits against
from_importance_weights; no gradient through the targets; rank errors."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.losses import vtrace
from ingraph_rl.errors import SpaceError

T = 7


def numpy_vtrace(
  log_rhos,
  discounts,
  rewards,
  values,
  bootstrap_value,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """v_s = V_s + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) rho_t delta_t,
  summed term by term (for a constant gamma the product of discounts is
  gamma^{t-s}); float64."""
  log_rhos, discounts, rewards, values, bootstrap_value = (
    np.asarray(x, np.float64)
    for x in (log_rhos, discounts, rewards, values, bootstrap_value)
  )
  rhos = np.exp(log_rhos)
  rho_bar = (
    rhos if clip_rho_threshold is None else np.minimum(clip_rho_threshold, rhos)
  )
  pg_rho_bar = (
    rhos
    if clip_pg_rho_threshold is None
    else np.minimum(clip_pg_rho_threshold, rhos)
  )
  cs = lambda_ * np.minimum(1.0, rhos)
  n = len(log_rhos)
  next_values = np.concatenate([values[1:], bootstrap_value[None]])
  vs = np.zeros_like(values)
  for s in range(n):
    v = values[s].copy()
    for t in range(s, n):
      trace = np.prod(discounts[s:t] * cs[s:t], axis=0)  # 1 when t == s.
      delta = rewards[t] + discounts[t] * next_values[t] - values[t]
      v += trace * rho_bar[t] * delta
    vs[s] = v
  next_vs = np.concatenate([vs[1:], bootstrap_value[None]])
  pg_advantages = pg_rho_bar * (rewards + discounts * next_vs - values)
  return vs, pg_advantages


def inputs(seed, batch, trailing=()):
  """log_rhos in [-2.5, 2.5]: rho in [0.08, 12.2], so each threshold below
  clips some steps and leaves others; discounts with episode ends (0)."""
  rng = np.random.default_rng(seed)
  shape = (T, batch) + tuple(trailing)
  f = lambda x: np.asarray(x, np.float32)
  return dict(
    log_rhos=f(rng.uniform(-2.5, 2.5, shape)),
    discounts=f(0.9 * (rng.uniform(size=shape) > 0.2)),
    rewards=f(rng.normal(size=shape)),
    values=f(rng.normal(size=shape)),
    bootstrap_value=f(rng.normal(size=shape[1:])),
  )


SETTINGS = [
  dict(clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0),
  dict(clip_rho_threshold=3.7, clip_pg_rho_threshold=2.2),
  dict(clip_rho_threshold=None, clip_pg_rho_threshold=None),
  dict(clip_rho_threshold=3.7, clip_pg_rho_threshold=None, lambda_=0.8),
]


def to_torch(d):
  return {k: torch.from_numpy(v) for k, v in d.items()}


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
@pytest.mark.parametrize("trailing", [(), (3,)], ids=["TxB", "TxBx3"])
@pytest.mark.parametrize("batch", [1, 5])
def test_matches_numpy_double_loop(batch, trailing, settings):
  x = inputs(batch + len(trailing), batch, trailing)
  rhos = np.exp(x["log_rhos"])
  for threshold in (1.0, 2.2, 3.7):  # The data reaches both sides.
    assert (rhos > threshold).any() and (rhos < threshold).any()
  vs, pg = numpy_vtrace(**x, **settings)
  out = vtrace.from_importance_weights(**x, **settings)
  assert isinstance(out, vtrace.VTraceReturns)
  np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(
    out.pg_advantages.numpy(), pg, rtol=1e-5, atol=1e-5
  )
  th = vtrace.torch_from_importance_weights(**to_torch(x), **settings)
  np.testing.assert_allclose(th.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(th.pg_advantages.numpy(), pg, rtol=1e-5, atol=1e-5)


def test_on_policy_without_ends_gives_discounted_returns():
  # rho = 1 everywhere: vs is the bootstrapped n-step return.
  x = inputs(0, 2)
  x["log_rhos"][:] = 0.0
  x["discounts"][:] = 0.9
  out = vtrace.from_importance_weights(**x)
  ret = x["bootstrap_value"].astype(np.float64)
  expected = np.zeros((T, 2))
  for t in reversed(range(T)):
    ret = x["rewards"][t] + 0.9 * ret
    expected[t] = ret
  np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_lambda_zero_is_one_step():
  x = inputs(1, 3)
  out = vtrace.from_importance_weights(
    **x, clip_rho_threshold=None, lambda_=0.0
  )
  next_values = np.concatenate([x["values"][1:], x["bootstrap_value"][None]])
  expected = x["values"] + np.exp(x["log_rhos"]) * (
    x["rewards"] + x["discounts"] * next_values - x["values"]
  )
  np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_unknown_time_and_batch_inside_tf_function():
  spec = tf.TensorSpec([None, None], tf.float32)
  fn = tf.function(
    vtrace.from_importance_weights,
    input_signature=[spec, spec, spec, spec, tf.TensorSpec([None], tf.float32)],
  )
  x = inputs(2, 4)
  out = fn(*x.values())
  vs, pg = numpy_vtrace(**x)
  np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(
    out.pg_advantages.numpy(), pg, rtol=1e-5, atol=1e-5
  )


def logits_inputs(seed, batch, trailing=(), num_actions=4):
  rng = np.random.default_rng(seed)
  x = inputs(seed, batch, trailing)
  del x["log_rhos"]
  shape = (T, batch) + tuple(trailing) + (num_actions,)
  x["behaviour_policy_logits"] = rng.normal(0, 1.5, shape).astype(np.float32)
  x["target_policy_logits"] = rng.normal(0, 1.5, shape).astype(np.float32)
  x["actions"] = rng.integers(0, num_actions, shape[:-1]).astype(np.int32)
  return x


def numpy_log_prob(logits, actions):
  z = logits.astype(np.float64)
  log_softmax = z - z.max(-1, keepdims=True)
  log_softmax -= np.log(np.exp(log_softmax).sum(-1, keepdims=True))
  return np.take_along_axis(log_softmax, actions[..., None], -1)[..., 0]


@pytest.mark.parametrize("trailing", [(), (2,)], ids=["TxB", "TxBx2"])
def test_from_logits_matches_from_importance_weights(trailing):
  x = logits_inputs(3, 5, trailing)
  settings = dict(
    clip_rho_threshold=3.7, clip_pg_rho_threshold=2.2, lambda_=0.9
  )
  out = vtrace.from_logits(**x, **settings)
  assert isinstance(out, vtrace.VTraceFromLogitsReturns)
  b = numpy_log_prob(x["behaviour_policy_logits"], x["actions"])
  t = numpy_log_prob(x["target_policy_logits"], x["actions"])
  np.testing.assert_allclose(
    out.behaviour_action_log_probs.numpy(), b, rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(
    out.target_action_log_probs.numpy(), t, rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(out.log_rhos.numpy(), t - b, rtol=1e-5, atol=1e-5)
  base = vtrace.from_importance_weights(
    out.log_rhos,
    x["discounts"],
    x["rewards"],
    x["values"],
    x["bootstrap_value"],
    **settings,
  )
  np.testing.assert_allclose(out.vs.numpy(), base.vs.numpy(), rtol=1e-6)
  np.testing.assert_allclose(
    out.pg_advantages.numpy(), base.pg_advantages.numpy(), rtol=1e-6
  )
  vs, pg = numpy_vtrace(
    t - b,
    x["discounts"],
    x["rewards"],
    x["values"],
    x["bootstrap_value"],
    **settings,
  )
  np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-4, atol=1e-4)

  th = vtrace.torch_from_logits(**to_torch(x), **settings)
  for name, value in out._asdict().items():
    np.testing.assert_allclose(
      getattr(th, name).detach().numpy(),
      value.numpy(),
      rtol=1e-5,
      atol=1e-5,
      err_msg=name,
    )


def test_no_gradient_through_targets():
  x = logits_inputs(4, 3)
  tf_x = {k: tf.constant(v) for k, v in x.items()}
  floats = [v for k, v in tf_x.items() if k != "actions"]
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(floats)
    out = vtrace.from_logits(**tf_x)
    sums = [
      tf.reduce_sum(out.vs),
      tf.reduce_sum(out.pg_advantages),
      tf.reduce_sum(out.target_action_log_probs),
    ]
  for target in sums[:2]:
    for g in tape.gradient(target, floats, unconnected_gradients="zero"):
      np.testing.assert_array_equal(g.numpy(), 0.0)
  # The log-probabilities stay differentiable.
  g = tape.gradient(sums[2], tf_x["target_policy_logits"])
  assert g is not None and np.abs(g.numpy()).sum() > 0

  th_x = to_torch(x)
  for k in (
    "behaviour_policy_logits",
    "target_policy_logits",
    "values",
    "bootstrap_value",
    "rewards",
    "discounts",
  ):
    th_x[k].requires_grad_(True)
  th = vtrace.torch_from_logits(**th_x)
  assert not th.vs.requires_grad and not th.pg_advantages.requires_grad
  assert th.target_action_log_probs.requires_grad


RANK_CASES = [
  ("values", dict(values=np.zeros((T, 2, 3), np.float32)), "rank 2"),
  (
    "bootstrap_value",
    dict(bootstrap_value=np.zeros((T, 2), np.float32)),
    "rank 1",
  ),
  ("rewards", dict(rewards=np.zeros((T,), np.float32)), "rank 2"),
  (
    "log_rhos",
    dict(
      log_rhos=np.zeros((T,), np.float32),
      discounts=np.zeros((T,), np.float32),
      rewards=np.zeros((T,), np.float32),
      values=np.zeros((T,), np.float32),
      bootstrap_value=np.float32(0.0),
    ),
    "rank >= 2",
  ),
  ("discounts", dict(discounts=np.zeros((T, 3), np.float32)), "shape"),
]


@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize(
  "argument,changes,expected", RANK_CASES, ids=[c[0] for c in RANK_CASES]
)
def test_bad_rank_is_named(argument, changes, expected, backend):
  x = inputs(5, 2)
  x.update(changes)
  if backend == "tf":
    fn, name = vtrace.from_importance_weights, "from_importance_weights"
  else:
    fn, name = (
      vtrace.torch_from_importance_weights,
      "torch_from_importance_weights",
    )
    x = {k: torch.as_tensor(v) for k, v in x.items()}
  with pytest.raises(SpaceError) as info:
    fn(**x)
  msg = str(info.value)
  assert f"argument '{argument}'" in msg and f"vtrace.{name}()" in msg
  assert "expected:" in msg and "received:" in msg and expected in msg


def test_from_logits_bad_actions_rank_is_named():
  x = logits_inputs(6, 2)
  x["actions"] = x["actions"][..., None]
  with pytest.raises(
    SpaceError,
    match=r"argument 'actions': wrong rank or "
    r"shape in vtrace\.from_logits\(\)",
  ):
    vtrace.from_logits(**x)
  x = logits_inputs(6, 2)
  x["target_policy_logits"] = x["target_policy_logits"][..., 0]
  with pytest.raises(
    SpaceError,
    match=r"argument 'target_policy_logits': "
    r"wrong rank in vtrace\.torch_from_logits\(\)",
  ):
    vtrace.torch_from_logits(**to_torch(x))


def test_float64_settings_are_not_rounded_through_float32():
  """Issue 12: lambda_ and the clip thresholds are cast to the inputs'
  dtype without a float32 round trip (tf.cast(0.95, float64) would give
  0.949999988079071): TF, torch and NumPy agree to float64 precision."""
  x = {k: v.astype(np.float64) for k, v in inputs(7, 4).items()}
  settings = dict(
    clip_rho_threshold=1.3, clip_pg_rho_threshold=0.7, lambda_=0.95
  )
  want_vs, want_pg = numpy_vtrace(**x, **settings)
  tf_out = vtrace.from_importance_weights(**x, **settings)
  torch_out = vtrace.torch_from_importance_weights(**to_torch(x), **settings)
  for got_vs, got_pg in (
    (tf_out.vs.numpy(), tf_out.pg_advantages.numpy()),
    (torch_out.vs.numpy(), torch_out.pg_advantages.numpy()),
  ):
    assert got_vs.dtype == np.float64
    np.testing.assert_allclose(got_vs, want_vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_pg, want_pg, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(
    tf_out.vs.numpy(), torch_out.vs.numpy(), rtol=1e-13, atol=1e-13
  )
