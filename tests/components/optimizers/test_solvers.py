"""Conjugate gradient, Fisher-vector products, the natural gradient step,
the line search and the evolutionary optimizer, against NumPy and TF vs
torch."""

import numpy as np
import pytest
import tensorflow as tf
import torch

from ingraph_rl.components.optimizers import (
  Adam,
  Evolutionary,
  GradientDescent,
  MultiStep,
  NaturalGradient,
  OptimizedStep,
  SubsamplingStep,
  hash_random,
  solvers,
)
from ingraph_rl.core import Component, api, graph_fn, inline
from ingraph_rl.spaces import FloatBox, IntBox
from ingraph_rl.testing import ComponentTest

RNG = np.random.RandomState(0)


def _spd(n, seed):
  a = np.random.RandomState(seed).randn(n, n)
  return a @ a.T + 0.1 * np.eye(n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conjugate_gradient_solves_spd_systems_as_numpy(seed):
  n = 7
  a, b = _spd(n, seed), np.random.RandomState(10 + seed).randn(n)
  want = np.linalg.solve(a, b)
  # Split into two "weights" to exercise the list form.
  split = [slice(0, 3), slice(3, n)]

  def tf_matvec(v):
    full = tf.linalg.matvec(tf.constant(a), tf.concat(v, 0))
    return [full[s] for s in split]

  x, k = tf.function(
    lambda: solvers.tf_conjugate_gradient(
      tf_matvec, [tf.constant(b[s]) for s in split], 3 * n, 1e-20
    )
  )()
  np.testing.assert_allclose(
    np.concatenate([t.numpy() for t in x]), want, rtol=1e-6, atol=1e-8
  )
  assert int(k) <= 3 * n

  def torch_matvec(v):
    full = torch.from_numpy(a) @ torch.cat(v)
    return [full[s] for s in split]

  xt, _ = solvers.torch_conjugate_gradient(
    torch_matvec, [torch.from_numpy(b[s]) for s in split], 3 * n, 1e-20
  )
  np.testing.assert_allclose(torch.cat(xt).numpy(), want, rtol=1e-6, atol=1e-8)
  # Fewer iterations than the dimension: not yet the solution (the test
  # can tell a solver from its first step).
  x2, _ = tf.function(
    lambda: solvers.tf_conjugate_gradient(
      tf_matvec, [tf.constant(b[s]) for s in split], 2, 1e-20
    )
  )()
  assert np.abs(np.concatenate([t.numpy() for t in x2]) - want).max() > 1e-3


# --- Fisher-vector products ----------------------------------------------

B, D, A = 6, 3, 4
XS = RNG.randn(B, D)
W0 = 0.5 * RNG.randn(D, A)
LOGSTD0 = 0.3 * RNG.randn(A)


def _softmax(z):
  e = np.exp(z - z.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _categorical_fisher():
  """Exact Fisher of softmax(x W) w.r.t. vec(W) (row-major), batch mean:
  J^T (diag(p) - p p^T) J with d logit_a / d W[i, b] = x_i [a = b]."""
  f = np.zeros((D * A, D * A))
  for x, p in zip(XS, _softmax(XS @ W0)):
    f += np.kron(np.outer(x, x), np.diag(p) - np.outer(p, p))
  return f / B


def _gaussian_fisher():
  """Exact Fisher of N(x W, exp(log_std)^2) w.r.t. (vec(W), log_std):
  1 / sigma^2 for the mean, 2 for each log std, no cross terms."""
  inv_var = np.exp(-2 * LOGSTD0)
  fw = sum(np.kron(np.outer(x, x), np.diag(inv_var)) for x in XS) / B
  f = np.zeros((D * A + A, D * A + A))
  f[: D * A, : D * A] = fw
  f[D * A :, D * A :] = 2 * np.eye(A)
  return f


def _tf_kl_categorical(w):
  old = tf.stop_gradient(tf.nn.log_softmax(XS @ W0))
  new = tf.nn.log_softmax(tf.constant(XS) @ w)
  return tf.reduce_mean(tf.reduce_sum(tf.exp(old) * (old - new), -1))


def _tf_kl_gaussian(w, logstd):
  mu_old, mu = XS @ W0, tf.constant(XS) @ w
  var_old, var = np.exp(2 * LOGSTD0), tf.exp(2 * logstd)
  kl = logstd - LOGSTD0 + (var_old + (mu_old - mu) ** 2) / (2 * var) - 0.5
  return tf.reduce_mean(tf.reduce_sum(kl, -1))


def _torch_kl_categorical(w):
  old = torch.log_softmax(torch.from_numpy(XS @ W0), -1)
  new = torch.log_softmax(torch.from_numpy(XS) @ w, -1)
  return (old.exp() * (old - new)).sum(-1).mean()


def _torch_kl_gaussian(w, logstd):
  mu_old, mu = torch.from_numpy(XS @ W0), torch.from_numpy(XS) @ w
  var_old, var = torch.from_numpy(np.exp(2 * LOGSTD0)), torch.exp(2 * logstd)
  kl = (
    logstd
    - torch.from_numpy(LOGSTD0)
    + (var_old + (mu_old - mu) ** 2) / (2 * var)
    - 0.5
  )
  return kl.sum(-1).mean()


@pytest.mark.parametrize("policy", ["categorical", "gaussian"])
def test_fisher_vector_product_matches_exact_fisher(policy):
  gaussian = policy == "gaussian"
  fisher = _gaussian_fisher() if gaussian else _categorical_fisher()
  v = np.random.RandomState(5).randn(fisher.shape[0])
  vs = [v[: D * A].reshape(D, A)] + ([v[D * A :]] if gaussian else [])
  want = fisher @ v
  inits = [W0] + ([LOGSTD0] if gaussian else [])

  params = [tf.Variable(x) for x in inits]
  kl = (
    (lambda: _tf_kl_gaussian(*params))
    if gaussian
    else (lambda: _tf_kl_categorical(*params))
  )
  hv = tf.function(
    lambda: solvers.tf_hessian_vector_product(
      kl, params, [tf.constant(x) for x in vs]
    )
  )()
  np.testing.assert_allclose(
    np.concatenate([h.numpy().ravel() for h in hv]), want, rtol=1e-6, atol=1e-9
  )

  tparams = [torch.tensor(x, requires_grad=True) for x in inits]
  tkl = (
    (lambda: _torch_kl_gaussian(*tparams))
    if gaussian
    else (lambda: _torch_kl_categorical(*tparams))
  )
  thv = solvers.torch_hessian_vector_product(
    tkl, tparams, [torch.from_numpy(x) for x in vs]
  )
  np.testing.assert_allclose(
    np.concatenate([h.numpy().ravel() for h in thv]), want, rtol=1e-6, atol=1e-9
  )


# --- optimizers on a small categorical policy ----------------------------


class Policy(Component):
  """softmax(x W) policy; loss = -mean(ratio * advantage), "kl" = mean
  KL(old || new), the old log-probs in the batch."""

  def __init__(self, optimizer):
    super().__init__(scope="policy")
    self.optimizer = optimizer

  variable_args = ()

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"loss"}

  def create_variables(self, input_spaces):
    self.w = self.add_variable("w", (D, A), initializer=W0.astype(np.float32))

  @api
  def loss(self, batch):
    return self._graph_fn_loss(batch)

  @api
  def update(self, x, actions, advantages, old_logp):
    batch = {"x": x, "a": actions, "adv": advantages, "old": old_logp}
    return self.optimizer.minimize(
      inline(self.loss), self._graph_fn_vars(), batch
    )

  @graph_fn
  def _graph_fn_vars(self):
    return {"w": self.w}

  @_graph_fn_vars.torch
  def _graph_fn_vars(self):
    return {"w": self.w}

  @graph_fn
  def _graph_fn_loss(self, b):
    logp = tf.nn.log_softmax(b["x"] @ self.w)
    taken = tf.gather(logp, b["a"], batch_dims=1)
    old_taken = tf.gather(b["old"], b["a"], batch_dims=1)
    ratio = tf.exp(taken - old_taken)
    kl = tf.reduce_sum(tf.exp(b["old"]) * (b["old"] - logp), -1)
    return {"loss": -tf.reduce_mean(ratio * b["adv"]), "kl": tf.reduce_mean(kl)}

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, b):
    logp = torch.log_softmax(b["x"] @ self.w, -1)
    taken = logp.gather(1, b["a"][:, None])[:, 0]
    old_taken = b["old"].gather(1, b["a"][:, None])[:, 0]
    ratio = torch.exp(taken - old_taken)
    kl = (b["old"].exp() * (b["old"] - logp)).sum(-1)
    return {"loss": -(ratio * b["adv"]).mean(), "kl": kl.mean()}


POLICY_SPACES = {
  "x": FloatBox((D,), add_batch_rank=True),
  "actions": IntBox(A, add_batch_rank=True),
  "advantages": FloatBox(add_batch_rank=True),
  "old_logp": FloatBox((A,), add_batch_rank=True),
}
ACTIONS = RNG.randint(0, A, B).astype(np.int32)
ADV = RNG.randn(B).astype(np.float32)
OLD = np.log(_softmax(XS @ W0)).astype(np.float32)
BATCH = (XS.astype(np.float32), ACTIONS, ADV, OLD)


def _policy_gradient():
  """d loss / d W at W0 (the ratio is 1 there): -mean(adv * d logp_a)."""
  p = _softmax(XS @ W0)
  g = np.zeros((D, A))
  for x, a, adv, pi in zip(XS, ACTIONS, ADV, p):
    g -= adv * np.outer(x, np.eye(A)[a] - pi)
  return g / B


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_natural_gradient_step_matches_numpy(backend):
  max_kl, damping = 0.01, 0.1
  opt = NaturalGradient(max_kl, cg_iterations=30, cg_damping=damping)
  t = ComponentTest(Policy(opt), POLICY_SPACES, backend)
  out = t.test("update", *BATCH)
  f = _categorical_fisher() + damping * np.eye(D * A)
  x = np.linalg.solve(f, -_policy_gradient().ravel())
  step = x * np.sqrt(max_kl / (0.5 * x @ f @ x))
  np.testing.assert_allclose(
    t.get_weights()["policy/w"].ravel(), W0.ravel() + step, rtol=1e-3, atol=1e-5
  )
  np.testing.assert_allclose(out["quadratic_kl"], max_kl, rtol=1e-4)
  np.testing.assert_allclose(out["kl"], 0.0, atol=1e-6)  # At the start.


class Bumpy(Component):
  """loss(w) = sum(w^4 - 3 w^2 + w): GD's full step overshoots."""

  def __init__(self, optimizer):
    super().__init__(scope="bumpy")
    self.optimizer = optimizer

  variable_args = ()

  @classmethod
  def internal_apis(cls):
    return super().internal_apis() | {"loss"}

  def create_variables(self, input_spaces):
    self.w = self.add_variable(
      "w", (2,), initializer=np.array([1.7, -0.2], np.float32)
    )

  @api
  def loss(self, batch):
    return self._graph_fn_loss(batch)

  @api
  def update(self, x):
    return self.optimizer.minimize(
      inline(self.loss), self._graph_fn_vars(), {"x": x}
    )

  @graph_fn
  def _graph_fn_vars(self):
    return {"w": self.w}

  @_graph_fn_vars.torch
  def _graph_fn_vars(self):
    return {"w": self.w}

  @graph_fn
  def _graph_fn_loss(self, b):
    w = self.w
    return {
      "loss": tf.reduce_sum(w**4 - 3 * w**2 + w) + 0.0 * tf.reduce_sum(b["x"])
    }

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, b):
    w = self.w
    return {"loss": (w**4 - 3 * w**2 + w).sum() + 0.0 * b["x"].sum()}


def _numpy_line_search(w, lr, ratio=0.1, backtrack=0.5, max_iterations=10):
  loss = lambda w: np.sum(w**4 - 3 * w**2 + w)
  grad = 4 * w**3 - 6 * w + 1
  step = -lr * grad
  expected = -grad @ step
  for k in range(max_iterations):
    f = backtrack**k
    actual = loss(w) - loss(w + f * step)
    if actual > 0 and actual >= ratio * f * expected:
      return f, k + 1, w + f * step
  return 0.0, max_iterations, w


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("lr", [0.05, 0.3, 0.6, 5.0])
def test_line_search_accepts_the_fraction_numpy_does(backend, lr):
  w0 = np.array([1.7, -0.2])
  f, k, w = _numpy_line_search(w0, lr)
  t = ComponentTest(
    Bumpy(OptimizedStep(GradientDescent(lr))),
    {"x": FloatBox(add_batch_rank=True)},
    backend,
  )
  out = t.test("update", np.zeros(2, np.float32))
  np.testing.assert_allclose(out["line_search_fraction"], f)
  assert int(out["line_search_steps"]) == k
  np.testing.assert_allclose(
    t.get_weights()["bumpy/w"], w, rtol=1e-4, atol=1e-5
  )


def test_line_search_cases_differ():
  """The lrs above reach different fractions (incl. rejection), so the
  test checks the search, not one lucky case."""
  fractions = {
    _numpy_line_search(np.array([1.7, -0.2]), lr)[0]
    for lr in [0.05, 0.3, 0.6, 5.0]
  }
  assert len(fractions) >= 3


def _quadratic_loss(w):
  return float(np.sum((w - np.array([1.0, -2.0])) ** 2))


class Quadratic(Bumpy):
  @graph_fn
  def _graph_fn_loss(self, b):
    return {
      "loss": tf.reduce_sum((self.w - [1.0, -2.0]) ** 2)
      + 0.0 * tf.reduce_sum(b["x"])
    }

  @_graph_fn_loss.torch
  def _graph_fn_loss(self, b):
    return {
      "loss": ((self.w - torch.tensor([1.0, -2.0])) ** 2).sum()
      + 0.0 * b["x"].sum()
    }


@pytest.mark.slow
@pytest.mark.parametrize("shaping", ["sign", "difference"])
def test_evolutionary_improves_a_quadratic_and_matches_torch(shaping):
  lr = 0.1 if shaping == "sign" else 0.2
  opt = Evolutionary(lr, num_samples=4, noise_std=0.1, shaping=shaping)
  component = Quadratic(opt)
  spaces = {"x": FloatBox(add_batch_rank=True)}
  tests = [ComponentTest(component, spaces, b) for b in ("tf", "torch")]
  start = _quadratic_loss(tests[0].get_weights()["bumpy/w"])
  for _ in range(30):
    outs = [t.test("update", np.zeros(2, np.float32)) for t in tests]
    np.testing.assert_allclose(outs[1]["loss"], outs[0]["loss"], rtol=1e-5)
  w = [t.get_weights()["bumpy/w"] for t in tests]
  np.testing.assert_allclose(w[1], w[0], rtol=1e-5)
  assert _quadratic_loss(w[0]) < 0.1 * start
  assert int(tests[0].get_weights()["bumpy/evolutionary/draws"]) == 30


def _numpy_evolutionary(w, lr, num_samples, noise_std, shaping, seed, draw):
  """One antithetic update by its definition: the mean over samples of
  c_i * e_i, c_i = (L(w - s e_i) - L(w + s e_i)) / (2 s) (an estimate of
  -grad L) or its sign, times the learning rate; noise e_i of this draw."""
  total = np.zeros_like(w)
  for i in range(num_samples):
    e = hash_random.tf_normal(seed, draw, w.size, i).numpy().astype(np.float32)
    plus = _quadratic_loss(w + noise_std * e)
    minus = _quadratic_loss(w - noise_std * e)
    c = (minus - plus) / (2 * noise_std)
    total += (np.sign(c) if shaping == "sign" else c) * e
  return w + lr * total / num_samples


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
@pytest.mark.parametrize("shaping", ["sign", "difference"])
def test_evolutionary_steps_are_the_antithetic_estimate_as_numpy(
  backend, shaping
):
  """Three updates (draws 0, 1, 2: fresh noise each) against the
  definition: the step goes down the loss (minus - plus), scaled by
  1 / (2 noise_std) for "difference"."""
  lr, n, std, seed = 0.05, 3, 0.1, 7
  opt = Evolutionary(
    lr, num_samples=n, noise_std=std, shaping=shaping, seed=seed
  )
  t = ComponentTest(
    Quadratic(opt), {"x": FloatBox(add_batch_rank=True)}, backend
  )
  w = t.get_weights()["bumpy/w"].astype(np.float64)
  for draw in range(3):
    t.test("update", np.zeros(2, np.float32))
    w = _numpy_evolutionary(w, lr, n, std, shaping, seed, draw)
    np.testing.assert_allclose(
      t.get_weights()["bumpy/w"], w, rtol=1e-5, atol=1e-6
    )


COMPOSED = {
  "natural_gradient": lambda: NaturalGradient(0.01, cg_iterations=5),
  "trpo": lambda: OptimizedStep(NaturalGradient(0.05, cg_iterations=5)),
  "evolutionary": lambda: Evolutionary(0.02, num_samples=3, noise_std=0.05),
  "ppo": lambda: MultiStep(SubsamplingStep(Adam(0.01), 2), 3),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_tf_and_torch_agree_on_the_policy(name):
  component = Policy(COMPOSED[name]())
  tests = [ComponentTest(component, POLICY_SPACES, b) for b in ("tf", "torch")]
  for _ in range(2):
    outs = [t.test("update", *BATCH) for t in tests]
    assert sorted(outs[0]) == sorted(outs[1])
    for k in outs[0]:
      np.testing.assert_allclose(
        outs[1][k], outs[0][k], rtol=2e-4, atol=1e-6, err_msg=k
      )
  a, b = (t.get_weights() for t in tests)
  for k in a:
    np.testing.assert_allclose(b[k], a[k], rtol=2e-4, atol=1e-6, err_msg=k)
  assert not np.allclose(a["policy/w"], W0, atol=1e-4)  # It moved.
