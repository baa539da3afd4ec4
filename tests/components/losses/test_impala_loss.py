"""IMPALA loss: a hand-checked rollout, a NumPy reference of every term on
random off-policy rollouts, TF vs torch outputs and gradients, gradients
that only flow where scalable_agent lets them (stop_gradient on the V-trace
targets), named space errors, and time limits: truncated episodes
bootstrap from the value of their final observation (against a NumPy
recomputation written per case)."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.losses import IMPALALoss
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.testing import ComponentTest, assert_parity

A = 3
TM = dict(add_batch_rank=True, add_time_rank=True, time_major=True)
SPACES = {
  "target_logits": FloatBox((A,), **TM),
  "behaviour_logits": FloatBox((A,), **TM),
  "actions": IntBox(A, **TM),
  "rewards": FloatBox(**TM),
  "dones": BoolBox(**TM),
  "values": FloatBox(**TM),
  "bootstrap_value": FloatBox(add_batch_rank=True),
}
ORDER = list(SPACES)
KEYS = (
  "loss",
  "pg_loss",
  "baseline_loss",
  "entropy_loss",
  "mean_vs",
  "mean_pg_advantage",
  "mean_entropy",
  "mean_rho",
)


def rollout(seed, t=6, b=4):
  rng = np.random.default_rng(seed)
  f = lambda x: np.asarray(x, np.float32)
  # Logit scale 1.5: log-rhos of a few units, so the clips matter.
  return [
    f(rng.normal(0, 1.5, (t, b, A))),
    f(rng.normal(0, 1.5, (t, b, A))),
    rng.integers(0, A, (t, b)).astype(np.int32),
    f(rng.normal(size=(t, b))),
    rng.uniform(size=(t, b)) < 0.2,
    f(rng.normal(size=(t, b))),
    f(rng.normal(size=(b,))),
  ]


def log_softmax(z):
  z = z.astype(np.float64) - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def numpy_impala_loss(
  target_logits,
  behaviour_logits,
  actions,
  rewards,
  dones,
  values,
  bootstrap_value,
  discounting=0.99,
  baseline_cost=0.5,
  entropy_cost=0.00025,
  clip_rho_threshold=1.0,
  clip_pg_rho_threshold=1.0,
  lambda_=1.0,
):
  """Every term spelled out, V-trace by its recursion from the end."""
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  target_lp = take(log_softmax(target_logits))
  rhos = np.exp(target_lp - take(log_softmax(behaviour_logits)))
  clip = lambda x, c: x if c is None else np.minimum(c, x)
  discounts = discounting * (1.0 - dones)
  values = values.astype(np.float64)
  vs = np.zeros_like(values)
  next_v, next_vs = bootstrap_value, bootstrap_value
  for t in reversed(range(len(values))):
    delta = clip(rhos[t], clip_rho_threshold) * (
      rewards[t] + discounts[t] * next_v - values[t]
    )
    vs[t] = (
      values[t]
      + delta
      + discounts[t] * lambda_ * np.minimum(1.0, rhos[t]) * (next_vs - next_v)
    )
    next_v, next_vs = values[t], vs[t]
  next_vs = np.concatenate([vs[1:], bootstrap_value[None]])
  pg_adv = clip(rhos, clip_pg_rho_threshold) * (
    rewards + discounts * next_vs - values
  )
  lp = log_softmax(target_logits)
  entropy = -(np.exp(lp) * lp).sum(-1)
  pg_loss = np.sum(-target_lp * pg_adv)
  baseline_loss = baseline_cost * 0.5 * np.sum((vs - values) ** 2)
  entropy_loss = entropy_cost * np.sum(-entropy)
  return (
    {
      "loss": pg_loss + baseline_loss + entropy_loss,
      "pg_loss": pg_loss,
      "baseline_loss": baseline_loss,
      "entropy_loss": entropy_loss,
      "mean_vs": vs.mean(),
      "mean_pg_advantage": pg_adv.mean(),
      "mean_entropy": entropy.mean(),
      "mean_rho": rhos.mean(),
    },
    vs,
    pg_adv,
  )


CONFIGS = [
  dict(),
  dict(
    discounting=0.9,
    baseline_cost=0.25,
    entropy_cost=0.01,
    clip_rho_threshold=3.7,
    clip_pg_rho_threshold=2.2,
    lambda_=0.9,
  ),
  dict(
    discounting=0.95,
    entropy_cost=0.1,
    clip_rho_threshold=None,
    clip_pg_rho_threshold=None,
  ),
]


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_hand_checked_rollout(backend):
  # T=2, B=1, on-policy (rho = 1), uniform policy over 2 actions; the
  # episode ends after step 1, so the bootstrap value 3.0 is never used:
  #   vs = [1 + 0.9 * 2, 2] = [2.8, 2.0]
  #   pg_advantages = [1 + 0.9 * 2.0 - 0.5, 2 - 1] = [2.3, 1.0]
  #   pg_loss = ln 2 * (2.3 + 1.0); entropy = ln 2 per step
  #   baseline_loss = 0.5 * 0.5 * ((2.8 - 0.5)^2 + (2 - 1)^2) = 1.5725
  #   entropy_loss = 0.01 * -(2 ln 2)
  spaces = dict(
    SPACES,
    target_logits=FloatBox((2,), **TM),
    behaviour_logits=FloatBox((2,), **TM),
    actions=IntBox(2, **TM),
  )
  zeros = np.zeros((2, 1, 2), np.float32)
  args = [
    zeros,
    zeros,
    np.array([[0], [1]], np.int32),
    np.array([[1.0], [2.0]], np.float32),
    np.array([[False], [True]]),
    np.array([[0.5], [1.0]], np.float32),
    np.array([3.0], np.float32),
  ]
  t = ComponentTest(
    IMPALALoss(discounting=0.9, entropy_cost=0.01), spaces, backend
  )
  ln2 = np.log(2.0)
  expected = {
    "pg_loss": ln2 * 3.3,
    "baseline_loss": 1.5725,
    "entropy_loss": -0.02 * ln2,
    "mean_vs": 2.4,
    "mean_pg_advantage": 1.65,
    "mean_entropy": ln2,
    "mean_rho": 1.0,
  }
  expected["loss"] = (
    expected["pg_loss"] + expected["baseline_loss"] + expected["entropy_loss"]
  )
  t.test("loss", *args, expected=expected, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_matches_numpy_reference(config, backend):
  t = ComponentTest(IMPALALoss(**config), SPACES, backend)
  args = rollout(0)
  out = t.test("loss", *args)
  assert sorted(out) == sorted(KEYS)
  expected, _, _ = numpy_impala_loss(*args, **config)
  for k in KEYS:
    np.testing.assert_allclose(
      out[k], expected[k], rtol=1e-5, atol=1e-5, err_msg=k
    )


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_parity(config):
  assert_parity(
    IMPALALoss(**config),
    SPACES,
    [("loss", rollout(1)), ("loss", rollout(2, t=3, b=1))],
  )


def grads_tf(component, args):
  """d loss / d (target_logits, behaviour_logits, values, bootstrap_value),
  zeros where unconnected; plus the loss outputs."""
  x = [tf.constant(a) for a in args]
  wrt = [x[0], x[1], x[5], x[6]]
  with tf.GradientTape() as tape:
    tape.watch(wrt)
    out = IMPALALoss._graph_fn_loss.tf_body(component, *x)
    loss = out["loss"]
  grads = tape.gradient(loss, wrt, unconnected_gradients="zero")
  return [g.numpy() for g in grads], out


def grads_torch(component, args):
  x = [torch.as_tensor(a) for a in args]
  wrt = [x[0], x[1], x[5], x[6]]
  for w in wrt:
    w.requires_grad_(True)
  out = IMPALALoss._graph_fn_loss.torch_body(component, *x)
  grads = torch.autograd.grad(out["loss"], wrt, allow_unused=True)
  return [
    np.zeros_like(a) if g is None else g.numpy()
    for g, a in zip(grads, (args[0], args[1], args[5], args[6]))
  ]


@pytest.mark.parametrize("config", CONFIGS[1:], ids=str)
def test_gradients_flow_only_where_scalable_agent_lets_them(config):
  """The V-trace targets are constants: d loss / d values comes from the
  baseline term alone, d loss / d target_logits from the cross-entropy
  (times the constant advantage) and the entropy term, and nothing reaches
  the behaviour logits or the bootstrap value. Missing stop_gradients add
  terms through vs / pg_advantages and fail this."""
  component = IMPALALoss(**config)
  args = rollout(3)
  (g_target, g_behaviour, g_values, g_bootstrap), _ = grads_tf(component, args)
  _, vs, pg_adv = numpy_impala_loss(*args, **config)
  baseline_cost = config.get("baseline_cost", 0.5)
  entropy_cost = config.get("entropy_cost", 0.00025)
  np.testing.assert_allclose(
    g_values, -baseline_cost * (vs - args[5]), rtol=1e-4, atol=1e-5
  )
  lp = log_softmax(args[0])
  p = np.exp(lp)
  entropy = -(p * lp).sum(-1, keepdims=True)
  one_hot = np.eye(A)[args[2]]
  expected = (p - one_hot) * pg_adv[..., None] + entropy_cost * p * (
    lp + entropy
  )
  np.testing.assert_allclose(g_target, expected, rtol=1e-4, atol=1e-5)
  np.testing.assert_array_equal(g_behaviour, 0.0)
  np.testing.assert_array_equal(g_bootstrap, 0.0)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_gradient_parity(config):
  component = IMPALALoss(**config)
  args = rollout(4, t=5, b=3)
  tf_grads, _ = grads_tf(component, args)
  torch_grads = grads_torch(component, args)
  for name, a, b in zip(
    ("target_logits", "behaviour_logits", "values", "bootstrap_value"),
    tf_grads,
    torch_grads,
  ):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
  "argument,space,expected",
  [
    ("values", FloatBox((2,), **TM), "time-major [T, B]"),
    ("target_logits", FloatBox(**TM), "time-major [T, B, A]"),
    ("bootstrap_value", FloatBox(**TM), "time-major [B]"),
    (
      "rewards",
      FloatBox(add_batch_rank=True, add_time_rank=True),
      "time-major [T, B]",
    ),
    ("actions", FloatBox(**TM), "IntBox"),
  ],
  ids=[
    "values_rank",
    "logits_rank",
    "bootstrap_rank",
    "batch_major",
    "actions_kind",
  ],
)
@pytest.mark.slow
def test_bad_space_is_named(argument, space, expected):
  spaces = dict(SPACES, **{argument: space})
  with pytest.raises(SpaceError) as info:
    TFExecutor(IMPALALoss(), spaces)
  msg = str(info.value)
  assert "component 'impala_loss'" in msg
  assert f"argument '{argument}'" in msg and expected in msg


def test_action_counts_must_agree():
  spaces = dict(SPACES, behaviour_logits=FloatBox((A + 1,), **TM))
  with pytest.raises(SpaceError, match="argument 'behaviour_logits'"):
    TFExecutor(IMPALALoss(), spaces)


def test_bad_settings():
  with pytest.raises(BuildError, match="lambda_"):
    IMPALALoss(lambda_=1.5)
  with pytest.raises(BuildError, match="clip_rho_threshold"):
    IMPALALoss(clip_rho_threshold=0.0)


# --- time limits: truncation_values ------------------------------------------


def numpy_truncated_targets(
  target_logits,
  behaviour_logits,
  actions,
  rewards,
  terminated,
  truncated,
  values,
  bootstrap_value,
  final_values,
  discounting,
):
  """V-trace targets with time limits, written per case rather than by
  folding the bootstrap into the reward: after step t the return goes on
  from V_{t+1} (no episode end), from V(final obs) = final_values[t] with
  no trace beyond it (truncated), or stops (terminated)."""
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  rhos = np.exp(
    take(log_softmax(target_logits)) - take(log_softmax(behaviour_logits))
  )
  clipped = np.minimum(1.0, rhos)
  T = len(values)
  v_next = np.concatenate([values[1:], bootstrap_value[None]]).astype(
    np.float64
  )
  vs = np.zeros(values.shape)
  vs_next = bootstrap_value.astype(np.float64)
  for t in reversed(range(T)):
    going_on = ~(terminated[t] | truncated[t])
    after = np.where(
      going_on, v_next[t], np.where(truncated[t], final_values[t], 0.0)
    )
    delta = clipped[t] * (rewards[t] + discounting * after - values[t])
    trace = np.where(
      going_on, discounting * clipped[t] * (vs_next - v_next[t]), 0.0
    )
    vs[t] = values[t] + delta + trace
    vs_next = vs[t]
  vs_tp1 = np.concatenate([vs[1:], bootstrap_value[None]])
  after = np.where(
    ~(terminated | truncated), vs_tp1, np.where(truncated, final_values, 0.0)
  )
  pg_adv = clipped * (rewards + discounting * after - values)
  return vs, pg_adv


def truncated_rollout(seed, t=6, b=3):
  """A rollout with a truncation in the middle (b=0, t=2), one at the last
  step (b=1), and terminations (b=2, t=3; b=0, t=4, two steps after the
  truncation)."""
  args = rollout(seed, t, b)
  terminated = np.zeros((t, b), bool)
  truncated = np.zeros((t, b), bool)
  truncated[2, 0] = truncated[t - 1, 1] = True
  terminated[3, 2] = terminated[4, 0] = True
  final_values = np.where(
    truncated, np.random.default_rng(seed + 100).normal(3.0, 1.0, (t, b)), 0.0
  ).astype(np.float32)
  args[4] = terminated | truncated
  return args, terminated, truncated, final_values


@pytest.mark.slow
def test_truncation_bootstraps_from_the_final_value():
  discounting = 0.9
  loss = IMPALALoss(
    discounting=discounting, baseline_cost=0.5, entropy_cost=0.0
  )
  args, terminated, truncated, final_values = truncated_rollout(5)
  spaces = dict(SPACES, truncation_values=FloatBox(**TM))
  vs, pg_adv = numpy_truncated_targets(
    args[0],
    args[1],
    args[2],
    args[3],
    terminated,
    truncated,
    args[5],
    args[6],
    final_values,
    discounting,
  )
  take = lambda lp: np.take_along_axis(lp, args[2][..., None], -1)[..., 0]
  expected = {
    "mean_vs": vs.mean(),
    "mean_pg_advantage": pg_adv.mean(),
    "pg_loss": np.sum(-take(log_softmax(args[0])) * pg_adv),
    "baseline_loss": 0.25 * np.sum((vs - args[5]) ** 2),
  }
  outs = {}
  for backend in ("tf", "torch"):
    out = ComponentTest(loss, spaces, backend).test("loss", *args, final_values)
    for k, v in expected.items():
      np.testing.assert_allclose(
        out[k], v, rtol=1e-5, atol=1e-5, err_msg=f"{backend}: {k}"
      )
    outs[backend] = out
  # Element by element: d baseline_loss / d values = -0.5 (vs - values),
  # and d pg_loss / d target_logits = (softmax - one_hot) * pg_adv.
  x = [tf.constant(a) for a in args] + [tf.constant(final_values)]
  with tf.GradientTape() as tape:
    tape.watch([x[0], x[5]])
    out = IMPALALoss._graph_fn_loss.tf_body(loss, *x)
  g_target, g_values = tape.gradient(out["loss"], [x[0], x[5]])
  np.testing.assert_allclose(
    g_values, -0.5 * (vs - args[5]), rtol=1e-4, atol=1e-5
  )
  p = np.exp(log_softmax(args[0]))
  np.testing.assert_allclose(
    g_target, (p - np.eye(A)[args[2]]) * pg_adv[..., None], rtol=1e-4, atol=1e-5
  )
  # The final values matter exactly where an episode was truncated, and
  # ending episodes do not leak into the next: as if the episode ended.
  plain = ComponentTest(loss, SPACES).test("loss", *args)
  assert abs(plain["mean_vs"] - outs["tf"]["mean_vs"]) > 1e-2
  zero = ComponentTest(loss, spaces).test(
    "loss", *args, np.zeros_like(final_values)
  )
  for k in KEYS:
    np.testing.assert_allclose(zero[k], plain[k], rtol=1e-6, atol=1e-6)
