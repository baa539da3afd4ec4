"""Categorical, Normal and DiagGaussian against hand-written NumPy formulas,
TF-vs-torch parity where the result is deterministic, sampling by its
statistics, and bad spaces/inputs."""

import doctest

import numpy as np
import pytest

from ingraph_rl.components.distributions import (
  Categorical,
  DiagGaussian,
  Normal,
)
from ingraph_rl.errors import SpaceError
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.executors.torch import TorchExecutor
from ingraph_rl.spaces import FloatBox, IntBox, Tuple
from ingraph_rl.testing import assert_parity
from ingraph_rl.testing.component_test import to_numpy

EXECUTORS = [TFExecutor, TorchExecutor]
B = dict(add_batch_rank=True)
K, D = 5, 3
LOG_2PI = np.log(2.0 * np.pi)

CAT_SPACES = {
  "parameters": FloatBox((K,), **B),
  "other_parameters": FloatBox((K,), **B),
  "values": IntBox(K, **B),
}
# Gaussian parameters bounded so exp(log_std) stays moderate.
FLAT = FloatBox((2 * D,), low=-2.0, high=2.0, **B)
PAIR = Tuple(
  FloatBox((D,), low=-2.0, high=2.0), FloatBox((D,), low=-2.0, high=2.0), **B
)
GAUSS_SPACES = {
  "flat": {
    "parameters": FLAT,
    "other_parameters": FLAT,
    "values": FloatBox((D,), **B),
  },
  "pair": {
    "parameters": PAIR,
    "other_parameters": PAIR,
    "values": FloatBox((D,), **B),
  },
}


# --- NumPy references (float64) ---------------------------------------------


def log_softmax(logits):
  z = logits - logits.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def cat_log_prob(logits, values):
  return np.take_along_axis(log_softmax(logits), values[..., None], -1)[..., 0]


def cat_entropy(logits):
  logp = log_softmax(logits)
  return -(np.exp(logp) * logp).sum(-1)


def cat_kl(p_logits, q_logits):
  logp, logq = log_softmax(p_logits), log_softmax(q_logits)
  return (np.exp(logp) * (logp - logq)).sum(-1)


def split(params):
  if isinstance(params, (list, tuple)):
    return np.float64(params[0]), np.float64(params[1])
  half = params.shape[-1] // 2
  return np.float64(params[..., :half]), np.float64(params[..., half:])


def normal_log_prob(params, x):
  m, log_s = split(params)
  return -0.5 * ((x - m) / np.exp(log_s)) ** 2 - log_s - 0.5 * LOG_2PI


def normal_entropy(params):
  _, log_s = split(params)
  return 0.5 + 0.5 * LOG_2PI + log_s


def normal_kl(p, q):
  mp, log_sp = split(p)
  mq, log_sq = split(q)
  sp, sq = np.exp(log_sp), np.exp(log_sq)
  return log_sq - log_sp + (sp**2 + (mp - mq) ** 2) / (2 * sq**2) - 0.5


def sample_inputs(spaces, n, seed):
  rng = np.random.default_rng(seed)
  return {k: s.sample(n, rng) for k, s in spaces.items()}


# --- Categorical --------------------------------------------------------------


@pytest.mark.parametrize("executor", EXECUTORS)
def test_categorical_matches_numpy(executor):
  ex = executor(Categorical(), CAT_SPACES)
  x = sample_inputs(CAT_SPACES, 16, 0)
  x["parameters"] = x["parameters"] * 3.0  # Sharper than N(0, 1) logits.
  p, q, v = x["parameters"], x["other_parameters"], x["values"]
  np.testing.assert_allclose(
    to_numpy(ex.execute("log_prob", p, v)),
    cat_log_prob(np.float64(p), v),
    rtol=1e-5,
    atol=1e-6,
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("entropy", p)),
    cat_entropy(np.float64(p)),
    rtol=1e-5,
    atol=1e-6,
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("kl", p, q)),
    cat_kl(np.float64(p), np.float64(q)),
    rtol=1e-5,
    atol=1e-6,
  )
  det = to_numpy(ex.execute("deterministic", p))
  assert det.dtype == np.int64
  np.testing.assert_array_equal(det, p.argmax(-1))
  # KL of a distribution with itself is 0.
  np.testing.assert_allclose(to_numpy(ex.execute("kl", p, p)), 0.0, atol=1e-6)


def test_categorical_parity():
  assert_parity(
    Categorical(),
    CAT_SPACES,
    ["deterministic", "log_prob", "entropy", "kl"],
    size=32,
  )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_categorical_sample_frequencies(executor):
  probs = np.array([0.05, 0.1, 0.15, 0.3, 0.4])
  ex = executor(Categorical(seed=4), CAT_SPACES)
  n = 20000
  logits = np.tile(np.log(probs).astype(np.float32), (n, 1))
  draws = to_numpy(ex.execute("sample", logits))
  assert draws.shape == (n,) and draws.dtype == np.int64
  assert draws.min() >= 0 and draws.max() < K
  counts = np.bincount(draws, minlength=K)
  chi2 = ((counts - n * probs) ** 2 / (n * probs)).sum()
  assert chi2 < 18.47  # 99.9% quantile of chi2 with 4 degrees of freedom.
  # The generator advances: the next draw differs.
  again = to_numpy(ex.execute("sample", logits))
  assert not np.array_equal(draws, again)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_sampling_is_reproducible_per_seed(executor):
  logits = np.zeros((200, K), np.float32)
  a = to_numpy(
    executor(Categorical(seed=1), CAT_SPACES).execute("sample", logits)
  )
  b = to_numpy(
    executor(Categorical(seed=1), CAT_SPACES).execute("sample", logits)
  )
  c = to_numpy(
    executor(Categorical(seed=2), CAT_SPACES).execute("sample", logits)
  )
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)


def test_categorical_output_spaces_carry_the_bound():
  ex = TFExecutor(Categorical(), CAT_SPACES)
  for name in ("sample", "deterministic"):
    assert ex.apis[name].output_space == IntBox(K, dtype=np.int64, **B)


# --- Normal and DiagGaussian ------------------------------------------------


def _gaussian_inputs(spaces, n=16, seed=0):
  x = sample_inputs(spaces, n, seed)
  x["values"] = x["values"] * 2.0
  return x


@pytest.mark.parametrize("form", ["flat", "pair"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_normal_matches_numpy(executor, form):
  spaces = GAUSS_SPACES[form]
  ex = executor(Normal(), spaces)
  x = _gaussian_inputs(spaces)
  p, q, v = x["parameters"], x["other_parameters"], x["values"]
  tol = dict(rtol=1e-5, atol=1e-5)
  lp = to_numpy(ex.execute("log_prob", p, v))
  assert lp.shape == (16, D)  # Elementwise: nothing summed.
  np.testing.assert_allclose(lp, normal_log_prob(p, v), **tol)
  np.testing.assert_allclose(
    to_numpy(ex.execute("entropy", p)), normal_entropy(p), **tol
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("kl", p, q)), normal_kl(p, q), **tol
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("deterministic", p)), split(p)[0], **tol
  )


@pytest.mark.slow
@pytest.mark.parametrize("form", ["flat", "pair"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_diag_gaussian_matches_numpy(executor, form):
  spaces = GAUSS_SPACES[form]
  ex = executor(DiagGaussian(), spaces)
  x = _gaussian_inputs(spaces, seed=1)
  p, q, v = x["parameters"], x["other_parameters"], x["values"]
  tol = dict(rtol=1e-5, atol=1e-5)
  lp = to_numpy(ex.execute("log_prob", p, v))
  assert lp.shape == (16,)  # Summed over the event axis.
  np.testing.assert_allclose(lp, normal_log_prob(p, v).sum(-1), **tol)
  np.testing.assert_allclose(
    to_numpy(ex.execute("entropy", p)), normal_entropy(p).sum(-1), **tol
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("kl", p, q)), normal_kl(p, q).sum(-1), **tol
  )
  np.testing.assert_allclose(
    to_numpy(ex.execute("deterministic", p)), split(p)[0], **tol
  )


@pytest.mark.slow
@pytest.mark.parametrize("cls", [Normal, DiagGaussian])
@pytest.mark.parametrize("form", ["flat", "pair"])
def test_gaussian_parity(cls, form):
  assert_parity(
    cls(),
    GAUSS_SPACES[form],
    ["deterministic", "log_prob", "entropy", "kl"],
    size=32,
  )


@pytest.mark.parametrize("cls", [Normal, DiagGaussian])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_gaussian_sample_moments(executor, cls):
  n = 20000
  mean = np.array([-1.0, 0.0, 2.0], np.float32)
  std = np.array([0.5, 1.0, 2.0], np.float32)
  params = np.tile(np.concatenate([mean, np.log(std)]), (n, 1))
  ex = executor(cls(seed=5), GAUSS_SPACES["flat"])
  draws = np.float64(to_numpy(ex.execute("sample", params)))
  assert draws.shape == (n, D)
  # 5 standard errors: the sample mean's is std / sqrt(n), the sample
  # std's about std / sqrt(2 n).
  np.testing.assert_array_less(
    np.abs(draws.mean(0) - mean), 5 * std / np.sqrt(n)
  )
  np.testing.assert_array_less(
    np.abs(draws.std(0) - std), 5 * std / np.sqrt(2 * n)
  )
  # Independent dimensions: correlations near 0 (standard error 1/sqrt(n)).
  corr = np.corrcoef(draws.T)
  assert np.abs(corr[np.triu_indices(D, 1)]).max() < 5 / np.sqrt(n)
  again = to_numpy(ex.execute("sample", params))
  assert not np.array_equal(draws, np.float64(again))


# --- bad spaces and inputs --------------------------------------------------


@pytest.mark.parametrize("executor", EXECUTORS)
def test_odd_parameter_dim_is_a_space_error(executor):
  spaces = {**GAUSS_SPACES["flat"], "parameters": FloatBox((5,), **B)}
  with pytest.raises(SpaceError) as e:
    executor(Normal(scope="pi"), spaces)
  assert e.value.component == "pi" and e.value.argument == "parameters"
  assert e.value.api in ("sample", "deterministic", "log_prob", "entropy", "kl")
  assert "even" in str(e.value)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_diag_gaussian_needs_an_event_axis(executor):
  spaces = {"parameters": Tuple(FloatBox(), FloatBox(), **B)}
  with pytest.raises(SpaceError, match="rank >= 1") as e:
    executor(DiagGaussian(), spaces, api_names=["entropy"])
  assert e.value.component == "diag_gaussian"
  assert (e.value.api, e.value.argument) == ("entropy", "parameters")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_categorical_values_of_wrong_shape_are_a_space_error(executor):
  spaces = {**CAT_SPACES, "values": IntBox(K, shape=(2,), **B)}
  with pytest.raises(SpaceError) as e:
    executor(Categorical(), spaces)
  assert (e.value.component, e.value.api, e.value.argument) == (
    "categorical",
    "log_prob",
    "values",
  )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_categorical_needs_float_logits(executor):
  spaces = {**CAT_SPACES, "parameters": IntBox(K, shape=(K,), **B)}
  with pytest.raises(SpaceError) as e:
    executor(Categorical(), spaces)
  assert e.value.component == "categorical"
  assert e.value.argument == "parameters"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bad_values_at_execution_are_a_space_error(executor):
  ex = executor(Categorical(), CAT_SPACES)
  logits = np.zeros((4, K), np.float32)
  with pytest.raises(SpaceError) as e:
    ex.execute("log_prob", logits, np.zeros(4, np.float32))  # Not ints.
  assert (e.value.component, e.value.api, e.value.argument) == (
    "categorical",
    "log_prob",
    "values",
  )
  with pytest.raises(SpaceError) as e:
    ex.execute("entropy", np.zeros((4, K + 1), np.float32))
  assert e.value.argument == "parameters"


def test_docstring_examples_run():
  from ingraph_rl.components.distributions import categorical, gaussian

  for module in (categorical, gaussian):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0, module.__name__
