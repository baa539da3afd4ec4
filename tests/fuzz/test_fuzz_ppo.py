"""Fuzz: the PPO agent without an env (`PPOBuilder.make_agent(obs)`:
get_actions, minibatch_step, update, get_weights, set_weights,
get_train_step) on both executors, categorical and Gaussian.

Model: Adam's step count (an accepted update adds update_epochs x
min(num_minibatches, samples) steps, an accepted minibatch_step one; a
refused call adds none and changes nothing), actions in range, finite
stats and weights, weights read back equal the variables.
"""

import dataclasses

import numpy as np
import pytest

from ingraph_rl.agents.ppo import PPOBuilder, PPOConfig
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import MAY, VALID, Target, numpy_of, sample
from tests.fuzz.actor_critic_checks import check_actor_critic

OBS = FloatBox((3,))
T, EPOCHS, MINIBATCHES, NUM_ACTIONS, ACTION_DIM = 4, 2, 2, 3, 2
MB_ARGS = (
  "mb_observations",
  "mb_actions",
  "mb_log_probs",
  "mb_values",
  "mb_advantages",
  "mb_returns",
)


class PPOTarget(Target):
  weights = {
    "get_actions": 3,
    "minibatch_step": 2,
    "update": 3,
    "get_weights": 1,
    "set_weights": 1,
    "get_train_step": 1,
  }
  edge_sizes = (0, 40)

  def __init__(self, backend, kind):
    self.name = f"ppo[{kind}]"
    self.continuous = kind == "gaussian"
    config = PPOConfig(
      num_actions=None if self.continuous else NUM_ACTIONS,
      action_dim=ACTION_DIM if self.continuous else None,
      num_steps=T,
      num_minibatches=MINIBATCHES,
      update_epochs=EPOCHS,
      hidden_units=8,
      hidden_layers=1,
      normalize_observations=self.continuous,
      num_updates=100,
      seed=3,
    )
    root = PPOBuilder(config).make_agent(OBS)
    if backend == "torch":
      # set_weights takes the TF layout (the weights space); the torch
      # mirror keeps its kernels transposed (as for Ape-X's agent).
      root = dataclasses.replace(
        root, api_names=[a for a in root.api_names if a != "set_weights"]
      )
      self.weights = {
        k: v for k, v in self.weights.items() if k != "set_weights"
      }
    self.spaces = dict(root.input_spaces)
    super().__init__(backend, root.build(backend))
    self.train_step = 0

  def good_args(self, api, rng, batch=None):
    spaces = self.spaces
    b = int(rng.integers(1, 4)) if batch is None else batch
    if api == "get_actions":
      return [
        sample(spaces["observations"], rng, batch=b),
        bool(rng.integers(2)),
      ], VALID
    if api == "update":
      return [sample(spaces["batch"], rng, batch=b)], VALID
    if api == "minibatch_step":
      rows = int(rng.integers(2, 9)) if batch is None else batch
      return [
        sample(spaces[name], rng, batch=rows) for name in MB_ARGS
      ], VALID if rows else MAY
    if api == "set_weights":
      return [numpy_of(self.executor.execute("get_weights"))], VALID
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "update":
      samples = len(np.asarray(args[0]["rewards"])) * T
      self.train_step += EPOCHS * min(MINIBATCHES, samples)
      if int(out["train_step"]) != self.train_step:
        self.fuzzer.inconsistent(api, f"train step {out['train_step']}")
      if samples and not np.isfinite(out["policy_loss"]):
        self.fuzzer.inconsistent(api, f"policy loss {out['policy_loss']}")
    elif api == "minibatch_step":
      self.train_step += 1
    elif api == "get_train_step" and int(out) != self.train_step:
      self.fuzzer.inconsistent(api, f"train step {out} != {self.train_step}")
    check_actor_critic(
      self, api, args, out, "ppo", NUM_ACTIONS, self.train_step
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_ppo(backend, kind, budget, run):
  run(PPOTarget(backend, kind), budget)
