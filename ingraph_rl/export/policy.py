"""Export an agent's policy (any builder's `make_policy`, e.g. IMPALA's) as
a SavedModel that plain TensorFlow loads.

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
      W, 3], observation_INSTR string [B]). The state inputs are one per
      leaf of the policy's state (IMPALA: state_c, state_h, S the LSTM
      size, 0 for a feed-forward policy: the signature is the same for
      every network).
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

import tensorflow as tf

from ingraph_rl.export.agent import (
  initial_state_function,
  policy_action_function,
)


class _PolicyModule(tf.Module):
  """What the SavedModel holds: the policy's variables and three
  signature functions."""

  def __init__(self, executor, observation_space, state_space, train_step):
    super().__init__(name="exported_policy")
    self.policy_variables = executor.module  # Tracks variables, RNG.
    self.train_step = tf.Variable(
      int(train_step), dtype=tf.int64, trainable=False, name="train_step"
    )
    self.action = policy_action_function(
      executor.function("act"), observation_space, state_space
    )
    self.get_initial_state = initial_state_function(state_space)

    @tf.function(input_signature=[])
    def get_train_step():
      return {"train_step": self.train_step.read_value()}

    self.get_train_step = get_train_step


def export_policy(builder, observation_space, weights, path, train_step=0):
  """Writes `builder`'s policy (`builder.make_policy(observation_space)`)
  with `weights` (a learner's `get_weights()` output) to `path` as a
  SavedModel; returns `path`."""
  root = builder.make_policy(observation_space)
  executor = root.build()
  executor.execute("set_weights", weights)
  module = _PolicyModule(
    executor, observation_space, root.input_spaces["state"], train_step
  )
  tf.saved_model.save(
    module,
    path,
    signatures={
      "action": module.action,
      "get_initial_state": module.get_initial_state,
      "get_train_step": module.get_train_step,
    },
  )
  return path
