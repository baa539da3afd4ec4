"""Fuzz: the SAC agent without an env (`SACBuilder.make_agent(obs)`:
get_actions, observe, update_critic, update_actor, update_alpha,
sync_targets, copy_targets, update, get_weights, get_train_step) on both
executors.

Model: the replay size; the critic's Adam steps (an accepted update_critic
or update adds one; a refused call adds none and changes nothing: an
update on an empty memory, a non-finite loss); actions inside the box;
finite weights; weights read back equal the actor's variables.
"""

import numpy as np
import pytest

from ingraph_rl.agents.sac import SACBuilder, SACConfig
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.fuzz import MAY, REJECT, VALID, Target, numpy_of, sample

OBS, CAPACITY = FloatBox((3,)), 32
LOW, HIGH = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
BATCH_APIS = ("observe", "update_critic")
ROWS = ("states", "actions", "rewards", "next_states", "terminals")


class SACTarget(Target):
  weights = {
    "get_actions": 3,
    "observe": 4,
    "update_critic": 2,
    "update_actor": 2,
    "update_alpha": 1,
    "sync_targets": 1,
    "copy_targets": 1,
    "update": 3,
    "get_weights": 1,
    "get_train_step": 1,
  }
  edge_sizes = (0, 40)

  def __init__(self, backend):
    self.name = "sac"
    config = SACConfig(
      action_low=tuple(LOW),
      action_high=tuple(HIGH),
      hidden_units=8,
      hidden_layers=1,
      buffer_size=CAPACITY,
      batch_size=4,
      learning_starts=4,
      seed=5,
    )
    root = SACBuilder(config).make_agent(OBS)
    self.spaces = dict(root.input_spaces)
    super().__init__(backend, root.build(backend))
    self.size = self.train_step = 0

  def good_args(self, api, rng, batch=None):
    b = int(rng.integers(1, 6)) if batch is None else batch
    if api == "get_actions":
      return [
        sample(self.spaces["states"], rng, batch=b),
        bool(rng.integers(2)),
      ], VALID
    if api in BATCH_APIS:
      args = [sample(self.spaces[n], rng, batch=b) for n in ROWS]
      # An empty batch has no mean to learn from: refused or harmless.
      return args, VALID if b or api == "observe" else MAY
    if api in ("update_actor", "update_alpha"):
      return [sample(self.spaces["states"], rng, batch=b)], VALID if b else MAY
    if api == "update":
      return [], VALID if self.size else REJECT
    return [], VALID

  def check(self, api, args, out):
    out = numpy_of(out)
    if api == "observe":
      self.size = min(self.size + len(np.asarray(args[0])), CAPACITY)
      if int(out) != self.size:
        self.fuzzer.inconsistent(api, f"size {out} != {self.size}")
    elif api in ("update_critic", "update"):
      self.train_step += 1
    elif api == "get_train_step" and int(out) != self.train_step:
      self.fuzzer.inconsistent(api, f"train step {out} != {self.train_step}")
    elif api == "get_actions":
      a = out["actions"]
      if len(a) != len(args[0]) or np.any((a < LOW) | (a > HIGH)):
        self.fuzzer.inconsistent(api, f"actions {a}")
    elif api == "get_weights":
      for path, value in out.items():
        if not np.array_equal(
          value, self.fuzzer.state[f"var:sac/actor/{path}"]
        ):
          self.fuzzer.inconsistent(api, f"weight {path} differs")
    state = self.fuzzer.state
    if int(state["var:sac/q_optimizer/iterations"]) != self.train_step:
      self.fuzzer.inconsistent(api, "critic steps differ from the model")
    if int(state["var:sac/memory/size"]) != self.size:
      self.fuzzer.inconsistent(api, "memory size differs from the model")
    for k, v in state.items():
      if (
        k.startswith("var:")
        and v.dtype.kind == "f"
        and not np.all(np.isfinite(v))
      ):
        self.fuzzer.inconsistent(api, f"non-finite values in {k}")
        return


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_sac(backend, budget, run):
  run(SACTarget(backend), budget)
