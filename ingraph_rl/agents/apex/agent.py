"""The complete Ape-X agent in ONE component: an actor's policy and n-step
accumulator, one replay shard's prioritized memory and the learner's
update, without queues or an env. It is what `export.export_agent` saves
as a SavedModel (act, observe, update and every piece of state), and a
single-machine Ape-X whose caller steps the env.

    agent = builder.make_agent(observation_space, num_envs).build()
    out = agent.execute("get_actions", obs, True)
    agent.execute("observe", obs, out["actions"], rewards, next_obs,
                  terminated, truncated)   # initial priorities, insert
    agent.execute("update")                # sample, train, new priorities
"""

import tensorflow as tf

from ingraph_rl.agents.apex.actor import ApexPolicy
from ingraph_rl.agents.apex.learner import PrioritizedUpdate, make_optimizer
from ingraph_rl.components.memories import NStepAccumulator, PrioritizedReplay
from ingraph_rl.core import api, graph_fn
from ingraph_rl.utils.lazy import torch


class ApexAgent(PrioritizedUpdate, ApexPolicy):
  """APIs (fixed dict results):
    get_actions(states, explore) -> {"actions", "q_values", "epsilon"}.
    observe(states, actions, rewards, next_states, terminals, truncated)
      -> {"transitions", "priority_sum", "size"}: one vector step (one row
      per env); its finished n-step transitions go into the memory with
      their initial priorities |TD| + 1e-6, as an actor's do.
    update() -> {"loss", "mean_q", "grad_norm", "train_step"}: a
      prioritized batch sampled, trained on with importance weights (Adam,
      the target synced every `target_update_period` updates), and its
      new priorities written back. Needs `train_batch_size` transitions.
    get_weights() -> {"online", "target"}; set_weights(weights) loads
      both; get_train_step() -> int64.

  epsilon: the exploration rate of `get_actions(..., explore=True)`.
  """

  def __init__(self, config, q, epsilon, num_envs, scope="agent"):
    super().__init__(config, q, epsilon, scope=scope)
    c = config
    self.accumulator = NStepAccumulator(c.n_step, c.discount, num_envs)
    self.memory = PrioritizedReplay(
      c.buffer_size,
      c.prioritized_replay_alpha,
      c.prioritized_replay_beta,
      seed=c.seed,
      scope="memory",
    )
    self.optimizer = make_optimizer(c)

  @api
  def set_weights(self, weights):
    return self.q.set_weights(weights)

  @api
  def get_weights(self):
    return self.q.get_weights()

  @api
  def get_train_step(self):
    return self.optimizer.get_iterations()

  @api
  def observe(
    self, states, actions, rewards, next_states, terminals, truncated
  ):
    rows = self.accumulator.push(
      states, actions, rewards, next_states, terminals, truncated
    )
    priorities = self.q.td(rows, self._graph_fn_ones(rows["rewards"]))[
      "priorities"
    ]
    size = self.memory.insert_with_priorities(rows, priorities)
    return self._graph_fn_observed(priorities, size)

  @api
  def update(self):
    batch = self.memory.sample(self.config.train_batch_size)
    return self._update_on(
      batch["records"],
      batch["weights"],
      lambda priorities: self.memory.update_priorities(
        batch["indices"], priorities
      ),
    )

  # --- bodies (TF, and torch for the eager mirror) ---------------------------

  @graph_fn
  def _graph_fn_ones(self, like):
    return tf.ones_like(like)

  @_graph_fn_ones.torch
  def _graph_fn_ones(self, like):
    return torch.ones_like(like)

  @graph_fn
  def _graph_fn_observed(self, priorities, size):
    return {
      "transitions": tf.shape(priorities, out_type=tf.int64)[0],
      "priority_sum": tf.reduce_sum(priorities),
      "size": tf.cast(size, tf.int64),
    }

  @_graph_fn_observed.torch
  def _graph_fn_observed(self, priorities, size):
    return {
      "transitions": torch.tensor(priorities.shape[0], dtype=torch.int64),
      "priority_sum": priorities.sum(),
      "size": torch.as_tensor(size).to(torch.int64),
    }
