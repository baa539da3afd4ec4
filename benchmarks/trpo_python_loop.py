"""TRPO's update driven from Python: the baseline of `ppo_throughput`'s
TRPO case (TensorForce's "before": solvers as Python loops of graph calls).

The same update as `TRPOAgent.update` in one call, step for step: GAE and
the advantage normalization in NumPy; the surrogate's gradient (one
graph call); conjugate gradient on Fisher-vector products, one graph
call per product and the vector algebra in NumPy; the max-KL scaling (one
more product); the backtracking line search, two graph calls per trial
(assign the weights, evaluate the surrogate); then the value function's
Adam epochs x minibatches, one graph call per minibatch. The losses are
the agent's own (`policy_loss`, `value_loss` as root APIs of a second
agent without an env, with its own weights: the timing needs the same
work, not the same weights).
"""

import numpy as np
import tensorflow as tf

from benchmarks.numpy_gae import numpy_gae
from ingraph_rl.agents.ppo.trpo import TRPOAgent
from ingraph_rl.agents.ppo.trpo_builder import TRPOBuilder
from ingraph_rl.runners.builder import Root
from ingraph_rl.spaces import Dict

POLICY = ("/policy_torso/", "/policy_head/", "/log_std")
VALUE = ("/value_torso/", "/value_head/")


def _any(path, parts):
  return any(p in path for p in parts)


def _flat(tensors):
  return np.concatenate([np.ravel(t) for t in tensors])


class PythonLoopTRPO:
  """`update(batch)`: the Python-driven TRPO update (see the module)."""

  def __init__(self, config, observation_space, seed=0):
    self.config = c = config
    builder = TRPOBuilder(config)
    spaces = builder.input_spaces(observation_space, weights=False)
    samples = Dict(
      {
        k: spaces[f"mb_{k}"]
        for k in (
          "observations",
          "actions",
          "log_probs",
          "values",
          "advantages",
          "returns",
        )
      }
    )
    spaces["batch"] = samples
    self.executor = Root(
      TRPOAgent(config, observation_space=observation_space),
      spaces,
      ("policy_loss", "value_loss"),
      seed=seed,
    ).build()
    variables = self.executor.variables()
    self.policy = [v for k, v in sorted(variables.items()) if _any(k, POLICY)]
    self.value = [v for k, v in sorted(variables.items()) if _any(k, VALUE)]
    self.shapes = [tuple(v.shape) for v in self.policy]
    policy_loss = self.executor.function("policy_loss")
    value_loss = self.executor.function("value_loss")
    params = self.policy
    damping = c.cg_damping

    @tf.function
    def gradient(samples):
      with tf.GradientTape() as tape:
        loss = policy_loss(samples)["loss"]
      return loss, tape.gradient(loss, params)

    @tf.function
    def fisher_vector(samples, vector):
      with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
          kl = policy_loss(samples)["kl"]
        grads = inner.gradient(kl, params)
        gv = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, vector)])
      hv = outer.gradient(gv, params)
      return [h + damping * v for h, v in zip(hv, vector)]

    @tf.function
    def assign_and_loss(values, samples):
      for p, v in zip(params, values):
        p.assign(v)
      return policy_loss(samples)["loss"]

    adam = tf.keras.optimizers.Adam(
      c.value_learning_rate, epsilon=c.adam_epsilon
    )
    adam.build(self.value)

    @tf.function
    def value_step(minibatch):
      with tf.GradientTape() as tape:
        loss = value_loss(minibatch)["loss"]
      adam.apply_gradients(zip(tape.gradient(loss, self.value), self.value))
      return loss

    self.gradient, self.fisher_vector = gradient, fisher_vector
    self.assign_and_loss, self.value_step = assign_and_loss, value_step
    self.rng = np.random.default_rng(seed)
    self.calls = 0

  def _split(self, flat):
    out, at = [], 0
    for shape in self.shapes:
      n = int(np.prod(shape))
      out.append(tf.constant(flat[at : at + n].reshape(shape)))
      at += n
    return out

  def _fvp(self, samples, flat):
    self.calls += 1
    return _flat(
      [t.numpy() for t in self.fisher_vector(samples, self._split(flat))]
    )

  def update(self, batch):
    """One TRPO update on a rollout batch (NumPy, batch-major [B, T])."""
    c = self.config
    adv, ret = numpy_gae(
      batch["rewards"],
      batch["values"],
      batch["dones"],
      batch["bootstrap_value"],
      c.gamma,
      c.gae_lambda,
    )
    fields = {
      "observations": batch["observations"],
      "actions": batch["actions"],
      "log_probs": batch["log_probs"],
      "values": batch["values"],
      "advantages": adv,
      "returns": ret,
    }
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in fields.items()}
    if c.norm_adv:
      a = flat["advantages"]
      # Bessel's std, as the agent's.
      flat["advantages"] = (a - a.mean()) / (a.std(ddof=1) + 1e-8)
    samples = {k: tf.constant(v) for k, v in flat.items()}

    # The natural-gradient step: CG on (F + damping I) x = -g.
    loss0, grads = self.gradient(samples)
    loss0, g = float(loss0), _flat([t.numpy() for t in grads])
    self.calls = 1
    x, r = np.zeros_like(g), -g
    p, rdotr = r.copy(), r @ r
    for _ in range(c.cg_iterations):
      if rdotr <= 1e-10:
        break
      ap = self._fvp(samples, p)
      alpha = rdotr / (p @ ap)
      x += alpha * p
      r -= alpha * ap
      new = r @ r
      p = r + (new / rdotr) * p
      rdotr = new
    shs = 0.5 * (x @ self._fvp(samples, x))
    before = _flat([v.numpy() for v in self.policy])
    if shs > 0:
      step = np.sqrt(c.max_kl / shs) * x
      expected = -(g @ step)
      # Backtracking: fractions 1, 1/2, 1/4, ...
      accepted = False
      for k in range(c.line_search_steps):
        f = 0.5**k
        loss = float(
          self.assign_and_loss(self._split(before + f * step), samples)
        )
        self.calls += 1
        actual = loss0 - loss
        if actual > 0 and actual >= c.accept_ratio * f * expected:
          accepted = True
          break
      if not accepted:
        self.assign_and_loss(self._split(before), samples)

    # The value function: epochs x minibatches of Adam.
    size = flat["returns"].shape[0]
    mb = size // c.num_minibatches
    for _ in range(c.value_epochs):
      perm = self.rng.permutation(size)
      for m in range(c.num_minibatches):
        idx = perm[m * mb : (m + 1) * mb]
        self.value_step({k: v[idx] for k, v in flat.items()})
        self.calls += 1
    return {"graph_calls": self.calls}
