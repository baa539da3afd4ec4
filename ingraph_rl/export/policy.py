"""Export an IMPALA policy as a SavedModel that plain TensorFlow loads.

Signatures (TF-Agents' PolicySaver names), batch dimension open:

  action(observation [B, ...], first bool [B], prev_reward float32 [B],
         prev_action int64 [B], state_c [B, S], state_h [B, S]) ->
         {"action", "greedy_action" int64 [B], "logits" [B, A], "value"
         [B], "state_c", "state_h"}
      `first` marks the first step of an episode (the state is zeroed
      before it); `prev_reward` and `prev_action` are the reward that came
      with the observation and the action that led to it (0 and 0 after a
      reset), which the network takes as inputs. Dict observations (DM
      Lab's frame and instruction) are one input per leaf,
      `observation_<key>` (e.g. observation_RGB_INTERLEAVED uint8 [B, H,
      W, 3], observation_INSTR string [B]). S is the LSTM size, 0 for a
      feed-forward policy: the signature is the same for every network.
  get_initial_state(batch_size int32 []) -> {"state_c", "state_h"} zeros.
  get_train_step() -> {"train_step": int64 []} (learner updates at export).

Loading needs no ingraph_rl import:

    policy = tf.saved_model.load(path)
    state = policy.signatures["get_initial_state"](batch_size=tf.constant(1))
    out = policy.signatures["action"](observation=obs, first=first,
                                      prev_reward=reward, prev_action=action,
                                      **state)

The environment stepping (`tf.numpy_function`) is NOT part of the export:
a SavedModel with it cannot run in another process.
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.impala.networks import (IMPALAPolicy, make_network,
                                               policy_input_spaces)
from ingraph_rl.core import Component, api
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.export.agent import impala_action_function
from ingraph_rl.spaces import Dict, FloatBox


class _PolicyRoot(Component):
  """The policy alone, for export."""

  def __init__(self, config, observation_space):
    super().__init__(scope="exported")
    self.policy = IMPALAPolicy(make_network(config, observation_space),
                               seed=config.seed)

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    return self.policy.act(observations, state, resets, last_rewards,
                           last_actions)

  @api
  def set_weights(self, weights):
    return self.policy.set_weights(weights)


class _PolicyModule(tf.Module):
  """What the SavedModel holds: the policy's variables and three
  signature functions."""

  def __init__(self, executor, observation_space, state_size, train_step):
    super().__init__(name="impala_policy")
    self.policy_variables = executor.module     # Tracks variables, RNG.
    self.train_step = tf.Variable(int(train_step), dtype=tf.int64,
                                  trainable=False, name="train_step")
    action = impala_action_function(executor.function("act"),
                                    observation_space, state_size)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32,
                                                 name="batch_size")])
    def get_initial_state(batch_size):
      zeros = tf.zeros([batch_size, state_size])
      return {"state_c": zeros, "state_h": zeros}

    @tf.function(input_signature=[])
    def get_train_step():
      return {"train_step": self.train_step.read_value()}

    self.action = action
    self.get_initial_state = get_initial_state
    self.get_train_step = get_train_step


def export_impala_policy(config, observation_space, weights, path,
                         train_step=0):
  """Writes the policy of `config` with `weights` (an `IMPALALearner`'s
  `get_weights()` output) to `path` as a SavedModel; returns `path`."""
  root = _PolicyRoot(config, observation_space)
  weights_space = Dict({p: FloatBox(tuple(v.shape),
                                    dtype=np.dtype(v.dtype.as_numpy_dtype))
                        for p, v in weights.items()})
  network = root.policy.network
  executor = TFExecutor(root, dict(
      policy_input_spaces(config, observation_space, network),
      weights=weights_space), seed=config.seed)
  executor.execute("set_weights", weights)
  module = _PolicyModule(executor, observation_space,
                         root.policy.network.state_size, train_step)
  tf.saved_model.save(module, path, signatures={
      "action": module.action,
      "get_initial_state": module.get_initial_state,
      "get_train_step": module.get_train_step})
  return path
