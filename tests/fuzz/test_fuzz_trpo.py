"""Fuzz: the TRPO agent without an env (`TRPOBuilder.make_agent(obs)`:
get_actions, update, get_weights, set_weights, get_train_step) on both
executors, categorical and Gaussian: its update runs the composed
optimizers (OptimizedStep(NaturalGradient) for the policy,
MultiStep(SubsamplingStep(Adam)) for the value function) in one call.

Model: an accepted update adds one TRPO update and value_epochs x
min(num_minibatches, samples) Adam steps; a refused call adds none and
changes nothing; the weights stay finite (an empty batch included: no
step); weights read back equal the variables.
"""

import dataclasses

import numpy as np
import pytest

from ingraph_rl.agents.ppo.trpo_builder import TRPOBuilder
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import VALID, Target, numpy_of, sample
from tests.fuzz.actor_critic_checks import check_actor_critic

OBS = FloatBox((3,))
T, VALUE_EPOCHS, MINIBATCHES, NUM_ACTIONS, ACTION_DIM = 4, 2, 2, 3, 2


class TRPOTarget(Target):
  weights = {
    "get_actions": 3,
    "update": 3,
    "get_weights": 1,
    "set_weights": 1,
    "get_train_step": 1,
  }
  edge_sizes = (0, 40)  # An empty batch: update refuses it.

  def __init__(self, backend, kind):
    self.name = f"trpo[{kind}]"
    self.continuous = kind == "gaussian"
    config = TRPOConfig(
      num_actions=None if self.continuous else NUM_ACTIONS,
      action_dim=ACTION_DIM if self.continuous else None,
      num_steps=T,
      num_minibatches=MINIBATCHES,
      value_epochs=VALUE_EPOCHS,
      cg_iterations=3,
      line_search_steps=3,
      hidden_units=8,
      hidden_layers=1,
      normalize_observations=self.continuous,
      seed=3,
    )
    root = TRPOBuilder(config).make_agent(OBS)
    if backend == "torch":
      # set_weights takes the TF layout; the torch mirror keeps its
      # kernels transposed (as for PPO's and Ape-X's targets).
      root = dataclasses.replace(
        root, api_names=[a for a in root.api_names if a != "set_weights"]
      )
      self.weights = {
        k: v for k, v in self.weights.items() if k != "set_weights"
      }
    self.spaces = dict(root.input_spaces)
    super().__init__(backend, root.build(backend))
    self.updates = self.adam_steps = 0

  def good_args(self, api, rng, batch=None):
    b = int(rng.integers(1, 4)) if batch is None else batch
    if api == "get_actions":
      return [
        sample(self.spaces["observations"], rng, batch=b),
        bool(rng.integers(2)),
      ], VALID
    if api == "update":
      return [sample(self.spaces["batch"], rng, batch=b)], VALID
    if api == "set_weights":
      return [numpy_of(self.executor.execute("get_weights"))], VALID
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "update":
      samples = len(np.asarray(args[0]["rewards"])) * T
      self.updates += 1
      self.adam_steps += VALUE_EPOCHS * min(MINIBATCHES, samples)
      if int(out["train_step"]) != self.updates:
        self.fuzzer.inconsistent(api, f"train step {out['train_step']}")
      if samples and not np.isfinite(out["value_loss"]):
        self.fuzzer.inconsistent(api, f"value loss {out['value_loss']}")
    elif api == "get_train_step" and int(out) != self.updates:
      self.fuzzer.inconsistent(api, f"train step {out} != {self.updates}")
    check_actor_critic(
      self, api, args, out, "trpo", NUM_ACTIONS, self.adam_steps
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_trpo(backend, kind, budget, run):
  run(TRPOTarget(backend, kind), budget)
