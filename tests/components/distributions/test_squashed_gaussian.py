"""The tanh-squashed Gaussian against a NumPy reference of SAC's formula
(CleanRL's `get_action`: log N(u) - sum log(scale (1 - tanh(u)^2))), in
both backends."""

import numpy as np
import pytest
import tensorflow as tf

from ingraph_rl.components.distributions import SquashedGaussian
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import FloatBox

EXECUTORS = {"tf": TFExecutor, "torch": TorchExecutor}
LOW, HIGH = np.array([-2.0, 0.0, -1.0]), np.array([2.0, 1.0, 3.0])


def spaces(dim=3):
  box = FloatBox((dim,), add_batch_rank=True)
  return {
    "parameters": FloatBox((2 * dim,), add_batch_rank=True),
    "values": box,
    "noise": box,
  }


def reference(params, noise, low=LOW, high=HIGH):
  """(actions, log_prob) in float64, the textbook way (no stable forms)."""
  params, noise = np.float64(params), np.float64(noise)
  mean, log_std = np.split(params, 2, axis=-1)
  std = np.exp(log_std)
  u = mean + std * noise
  scale, shift = (high - low) / 2, (high + low) / 2
  y = np.tanh(u)
  log_normal = (
    -0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
  )
  log_prob = np.sum(log_normal - np.log(scale * (1 - y**2)), axis=-1)
  return y * scale + shift, log_prob


@pytest.fixture(scope="module", params=sorted(EXECUTORS))
def executor(request):
  return EXECUTORS[request.param](SquashedGaussian(LOW, HIGH, seed=3), spaces())


def numpy(x):
  return np.asarray(x.detach() if hasattr(x, "detach") else x)


@pytest.mark.slow
def test_squash_and_log_prob_match_numpy(executor):
  rng = np.random.default_rng(0)
  params = rng.normal(size=(16, 6)).astype(np.float32)
  noise = rng.normal(size=(16, 3)).astype(np.float32)
  out = executor.execute("squash", params, noise)
  actions, log_prob = reference(params, noise)
  np.testing.assert_allclose(
    numpy(out["actions"]), actions, rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(
    numpy(out["log_prob"]), log_prob, rtol=1e-4, atol=1e-4
  )
  # log_prob of the squashed values goes back through atanh: the same,
  # away from the box's edges (where float32 atanh cannot invert tanh).
  again = numpy(executor.execute("log_prob", params, numpy(out["actions"])))
  u = params[:, :3] + np.exp(params[:, 3:]) * noise
  inner = np.all(np.abs(np.tanh(u)) < 0.99, axis=1)
  assert inner.sum() >= 8
  np.testing.assert_allclose(
    again[inner], log_prob[inner], rtol=1e-3, atol=1e-3
  )


def test_log_prob_stays_finite_where_tanh_saturates(executor):
  # |u| ~ 12: 1 - tanh(u)^2 underflows float32 in the textbook form.
  params = np.array([[12.0, -12.0, 9.0, -5.0, -5.0, -5.0]], np.float32)
  noise = np.zeros((1, 3), np.float32)
  log_prob = numpy(executor.execute("squash", params, noise)["log_prob"])
  expected = reference(np.float64(params), noise)[1]
  np.testing.assert_allclose(log_prob, expected, rtol=1e-4)


def test_deterministic_is_the_squashed_mean(executor):
  params = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
  mean = params[:, :3]
  expected = np.tanh(mean) * (HIGH - LOW) / 2 + (HIGH + LOW) / 2
  got = numpy(executor.execute("deterministic", params))
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_draws_lie_in_the_box_and_match_their_log_prob(executor):
  params = np.random.default_rng(2).normal(size=(256, 6)).astype(np.float32)
  out = executor.execute("sample_with_log_prob", params)
  actions = numpy(out["actions"])
  assert np.all(actions >= LOW) and np.all(actions <= HIGH)
  assert actions.std(axis=0).min() > 0.05  # Random, not the mode.
  back = numpy(executor.execute("log_prob", params, actions))
  close = np.abs(actions - (HIGH + LOW) / 2) < 0.99 * (HIGH - LOW) / 2
  rows = close.all(axis=1)  # atanh is ill-conditioned at the box's edges.
  np.testing.assert_allclose(
    numpy(out["log_prob"])[rows], back[rows], rtol=1e-3, atol=1e-3
  )
  samples = numpy(executor.execute("sample", params))
  assert samples.shape == (256, 3)
  assert np.all(samples >= LOW) and np.all(samples <= HIGH)


@pytest.mark.slow
def test_gradients_reach_the_parameters_through_the_draw():
  """Reparameterized: d actions / d mean = scale (1 - tanh(u)^2)."""
  dist = SquashedGaussian(LOW, HIGH)
  ex = TFExecutor(dist, spaces())
  params = tf.Variable(
    np.random.default_rng(3).normal(size=(4, 6)), dtype=tf.float32
  )
  noise = tf.constant(np.random.default_rng(4).normal(size=(4, 3)), tf.float32)
  with tf.GradientTape() as tape:
    total = tf.reduce_sum(dist._tf_squash(params, noise)["actions"])
  grad = tape.gradient(total, params).numpy()
  mean, log_std = np.split(params.numpy(), 2, axis=-1)
  u = mean + np.exp(log_std) * noise.numpy()
  np.testing.assert_allclose(
    grad[:, :3], (HIGH - LOW) / 2 * (1 - np.tanh(u) ** 2), rtol=1e-4, atol=1e-6
  )
  del ex


@pytest.mark.slow
def test_scalar_bounds_apply_to_every_dim():
  ex = TFExecutor(SquashedGaussian(-2.0, 2.0), spaces())
  params = np.random.default_rng(5).normal(size=(3, 6)).astype(np.float32)
  noise = np.random.default_rng(6).normal(size=(3, 3)).astype(np.float32)
  out = ex.execute("squash", params, noise)
  _, log_prob = reference(params, noise, np.full(3, -2.0), np.full(3, 2.0))
  np.testing.assert_allclose(out["log_prob"].numpy(), log_prob, rtol=1e-4)


@pytest.mark.parametrize(
  "low, high",
  [(1.0, -1.0), (0.0, 0.0), (-np.inf, 1.0), ([-1.0, 0], [1.0, np.nan])],
)
def test_bad_bounds_are_refused(low, high):
  with pytest.raises(BuildError, match="squashed_gaussian"):
    SquashedGaussian(low, high)


def test_bounds_must_fit_the_action_dims():
  with pytest.raises(SpaceError, match="action box"):
    TFExecutor(SquashedGaussian([-1.0, -1.0], [1.0, 1.0]), spaces(3))


def test_no_entropy_or_kl_apis():
  ex = TFExecutor(SquashedGaussian(LOW, HIGH), spaces())
  assert "entropy" not in ex.apis and "kl" not in ex.apis
