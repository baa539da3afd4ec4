"""GAE and the PPO loss against NumPy references of the formulas (CleanRL's
loops, written independently of ours), in both backends."""

import numpy as np
import pytest
import torch

from ingraph_rl.components.losses.gae import GAE
from ingraph_rl.components.losses.ppo_loss import _TF, _TORCH, PPOLoss
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import BoolBox, FloatBox


def numpy_gae(rewards, values, dones, bootstrap, gamma, lam):
  """CleanRL's ppo.py loop, time-major there: done[t] there is 'obs t
  starts a new episode', i.e. our dones[t - 1]; next_done ours [T - 1]."""
  B, T = rewards.shape
  adv = np.zeros((B, T))
  last = np.zeros(B)
  for t in reversed(range(T)):
    if t == T - 1:
      next_nonterminal = 1.0 - dones[:, T - 1]
      next_values = bootstrap
    else:
      next_nonterminal = 1.0 - dones[:, t]
      next_values = values[:, t + 1]
    delta = (
      rewards[:, t] + gamma * next_values * next_nonterminal - values[:, t]
    )
    last = delta + gamma * lam * next_nonterminal * last
    adv[:, t] = last
  return adv, adv + values


def gae_inputs(seed=0, B=3, T=7):
  rng = np.random.default_rng(seed)
  return (
    rng.normal(size=(B, T)).astype(np.float32),
    rng.normal(size=(B, T)).astype(np.float32),
    rng.random((B, T)) < 0.25,
    rng.normal(size=B).astype(np.float32),
  )


@pytest.mark.parametrize("executor", [TFExecutor, TorchExecutor])
@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0)])
def test_gae_matches_numpy(executor, gamma, lam):
  rewards, values, dones, bootstrap = gae_inputs()
  B, T = rewards.shape
  spaces = {
    "rewards": FloatBox((T,), add_batch_rank=True),
    "values": FloatBox((T,), add_batch_rank=True),
    "dones": BoolBox((T,), add_batch_rank=True),
    "bootstrap_value": FloatBox(add_batch_rank=True),
  }
  ex = executor(GAE(gamma, lam), spaces)
  out = ex.execute("advantages", rewards, values, dones, bootstrap)
  adv, ret = numpy_gae(rewards, values, dones, bootstrap, gamma, lam)
  np.testing.assert_allclose(
    np.asarray(out["advantages"]), adv, rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(
    np.asarray(out["returns"]), ret, rtol=1e-5, atol=1e-5
  )


def test_gae_hand_computed():
  # One env, two steps, the episode ends after step 0: step 0 sees only
  # its reward; step 1 bootstraps. gamma 0.5, lambda 1.
  out = TFExecutor(
    GAE(0.5, 1.0),
    {
      "rewards": FloatBox((2,), add_batch_rank=True),
      "values": FloatBox((2,), add_batch_rank=True),
      "dones": BoolBox((2,), add_batch_rank=True),
      "bootstrap_value": FloatBox(add_batch_rank=True),
    },
  ).execute(
    "advantages",
    np.array([[1.0, 2.0]], np.float32),
    np.array([[0.5, 1.0]], np.float32),
    np.array([[True, False]]),
    np.array([4.0], np.float32),
  )
  # A_1 = 2 + 0.5 * 4 - 1 = 3; A_0 = 1 - 0.5 = 0.5 (nothing flows back).
  np.testing.assert_allclose(out["advantages"].numpy(), [[0.5, 3.0]])


def numpy_ppo_loss(logp, ent, v, old_logp, old_v, adv, ret, c):
  """CleanRL's ppo.py loss (torch's unbiased std in the normalization)."""
  log_ratio = logp - old_logp
  ratio = np.exp(log_ratio)
  if c["norm_adv"]:
    adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
  if c["clip_coef"] is None:
    pg = np.mean(-adv * ratio)
  else:
    clipped = np.clip(ratio, 1 - c["clip_coef"], 1 + c["clip_coef"])
    pg = np.mean(np.maximum(-adv * ratio, -adv * clipped))
  if c["clip_vloss"]:
    unclipped = (v - ret) ** 2
    v_clip = old_v + np.clip(v - old_v, -c["clip_coef"], c["clip_coef"])
    vl = 0.5 * np.mean(np.maximum(unclipped, (v_clip - ret) ** 2))
  else:
    vl = 0.5 * np.mean((v - ret) ** 2)
  loss = pg - c["ent_coef"] * ent.mean() + c["vf_coef"] * vl
  clip = c["clip_coef"] or 0.2
  return {
    "loss": loss,
    "policy_loss": pg,
    "value_loss": vl,
    "entropy": ent.mean(),
    "approx_kl": np.mean((ratio - 1) - log_ratio),
    "clipfrac": np.mean(np.abs(ratio - 1) > clip),
  }


SETTINGS = [
  dict(
    clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, norm_adv=True
  ),
  dict(
    clip_coef=0.1, clip_vloss=False, ent_coef=0.0, vf_coef=1.0, norm_adv=False
  ),
  # A2C: no clipping.
  dict(
    clip_coef=None, clip_vloss=False, ent_coef=0.01, vf_coef=0.5, norm_adv=False
  ),
]


@pytest.mark.parametrize("executor", [TFExecutor, TorchExecutor])
@pytest.mark.parametrize("c", SETTINGS)
def test_ppo_loss_matches_numpy(executor, c):
  rng = np.random.default_rng(1)
  n = 64
  old_logp = rng.normal(-1.0, 0.3, n).astype(np.float32)
  # Ratios spread across the clip range, both sides.
  logp = (old_logp + rng.normal(0, 0.3, n)).astype(np.float32)
  args = [
    logp,
    rng.random(n).astype(np.float32),
    rng.normal(size=n).astype(np.float32),
    old_logp,
    rng.normal(size=n).astype(np.float32),
    rng.normal(size=n).astype(np.float32),
    rng.normal(size=n).astype(np.float32),
  ]
  names = [
    "log_probs",
    "entropy",
    "values",
    "old_log_probs",
    "old_values",
    "advantages",
    "returns",
  ]
  spaces = {k: FloatBox(add_batch_rank=True) for k in names}
  out = executor(PPOLoss(**c), spaces).execute("loss", *args)
  want = numpy_ppo_loss(*[a.astype(np.float64) for a in args], c)
  assert 0.05 < want["clipfrac"] < 0.95  # Both branches of the clip run.
  for k, v in want.items():
    np.testing.assert_allclose(
      np.asarray(out[k]), v, rtol=2e-5, atol=1e-6, err_msg=k
    )


def test_ppo_loss_gradient_tf_vs_torch():
  """d loss / d (log_probs, values) agree across backends (the clip's
  zero-gradient region included)."""
  import tensorflow as tf

  rng = np.random.default_rng(2)
  n = 32
  arrays = [rng.normal(size=n).astype(np.float32) for _ in range(7)]
  arrays[0] = arrays[3] + rng.normal(0, 0.4, n).astype(np.float32)
  loss = PPOLoss(0.2, True, 0.01, 0.5, True)
  xs = [tf.constant(a) for a in arrays]
  with tf.GradientTape() as tape:
    tape.watch(xs[:3])
    out = loss._formula(_TF, *xs)
  tf_grads = [g.numpy() for g in tape.gradient(out["loss"], xs[:3])]
  ts = [torch.tensor(a, requires_grad=i < 3) for i, a in enumerate(arrays)]
  out = loss._formula(_TORCH, *ts)
  torch_grads = [g.numpy() for g in torch.autograd.grad(out["loss"], ts[:3])]
  for a, b in zip(tf_grads, torch_grads):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
