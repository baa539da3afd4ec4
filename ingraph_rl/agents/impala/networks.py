"""IMPALA's agent network (scalable_agent's `Agent`): preprocessing ->
torso, with the clipped last reward, the one-hot last action and an
instruction encoding beside it -> optional LSTM -> policy logits and a
state value, over [B, T, ...] observations.

Actor and learner each own a copy: the actor runs it with T == 1 inside its
unroll loop, the learner over whole [B, T + 1, ...] rollouts. The weights
are exchanged through `variables()` / `sync(values)` (same paths).
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.agents.impala.config import MLP_TORSO
from ingraph_rl.components.common import Synchronizable, TimeRankFolder
from ingraph_rl.components.distributions import Categorical
from ingraph_rl.components.layers import LSTM, Dense
from ingraph_rl.components.networks import (
  ImpalaDeepTorso,
  ImpalaSmallNetwork,
  InstructionEncoder,
  NeuralNetwork,
)
from ingraph_rl.components.preprocessing import Cast, Divide, PreprocessorStack
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.core.variables import Scaled
from ingraph_rl.errors import BuildError
from ingraph_rl.spaces import Dict, FloatBox, TextBox
from ingraph_rl.utils.lazy import F, torch


class IMPALANetwork(Synchronizable):
  """`unroll(observations, initial_state, resets, last_rewards,
  last_actions)` over batch-major inputs (scalable_agent's `Agent`):

    observations [B, T, ...]: raw env observations (`preprocessor` casts
      and scales the frames); a Dict of a frame leaf (`frame_key`) and,
      for language levels, a text leaf (`instruction_key`).
    initial_state {"c", "h"} [B, state_size].
    resets bool [B, T]: True where an episode starts (the LSTM state is
      zeroed before that step).
    last_rewards float [B, T], last_actions int [B, T]: the reward that
      came with observation t and the action that led to it (a rollout's
      rewards[t] and actions[t]).
    -> {"logits": [B, T, A], "values": [B, T], "state": {"c", "h"}}.

  Per step: torso(frame) || clip(last reward, -1, 1) || one_hot(last
  action) || instruction encoding (`InstructionEncoder`: the LSTM output
  at the instruction's last word) -> LSTM (optional) -> policy logits and
  value. `feed_reward_action=False` leaves the reward and action out (the
  inputs are then ignored).

  Without an LSTM (`lstm_units=None`) the state has size 0 and passes
  through unchanged, so actor, learner and exported policy keep ONE
  structure for every network.

  Args:
    torso: a list spec for a NeuralNetwork, or a component with `call`
      (e.g. `ImpalaSmallNetwork()`), applied to single frames [N, ...].
    num_actions: size of the discrete action set.
    lstm_units: LSTM size on top of the torso, or None.
    preprocessor: a component with `call`, applied to frames first (None:
      none).
    feed_reward_action: feed the clipped last reward and one-hot last
      action to the core.
    instruction_encoder: an `InstructionEncoder` for the `instruction_key`
      leaf, or None.
    frame_key, instruction_key: the leaves of Dict observations (None: the
      observation is the frame).
  """

  def __init__(
    self,
    torso,
    num_actions,
    lstm_units=None,
    preprocessor=None,
    feed_reward_action=True,
    instruction_encoder=None,
    frame_key=None,
    instruction_key=None,
    scope="impala_network",
  ):
    super().__init__(scope=scope)
    if (instruction_encoder is None) != (instruction_key is None):
      raise BuildError(
        f"'{scope}': give instruction_encoder and instruction_key together"
      )
    self.num_actions = int(num_actions)
    self.lstm_units = int(lstm_units) if lstm_units else 0
    self.preprocessor = preprocessor
    self.feed_reward_action = bool(feed_reward_action)
    self.frame_key = frame_key
    self.instruction_key = instruction_key
    self.folder = TimeRankFolder(scope="folder")
    self.torso = (
      NeuralNetwork(list(torso), scope="torso")
      if isinstance(torso, (list, tuple))
      else torso
    )
    self.instruction_encoder = instruction_encoder
    self.lstm = LSTM(self.lstm_units, scope="lstm") if self.lstm_units else None
    # A near-uniform initial policy (logits ~0.01x Glorot's).
    self.policy_head = Dense(
      self.num_actions,
      scope="policy_head",
      kernel_initializer=Scaled("glorot_uniform", 0.01),
    )
    self.value_head = Dense(1, scope="value_head")

  @property
  def state_size(self):
    return self.lstm_units

  def state_space(self, batch_rank=True):
    box = FloatBox((self.lstm_units,), add_batch_rank=batch_rank)
    return Dict(c=box, h=box)

  def zero_state(self, batch_size):
    """NumPy zeros in the state structure (for feeding root APIs)."""
    z = np.zeros((batch_size, self.lstm_units), np.float32)
    return {"c": z, "h": z.copy()}

  @api
  def unroll(
    self, observations, initial_state, resets, last_rewards, last_actions
  ):
    frames = (
      observations if self.frame_key is None else observations[self.frame_key]
    )
    folded = self.folder.fold(frames)
    if self.preprocessor is not None:
      folded = self.preprocessor.call(folded)
    parts = [self.folder.unfold(self.torso.call(folded), frames)]
    if self.feed_reward_action:
      parts.append(self._graph_fn_reward_action(last_rewards, last_actions))
    if self.instruction_encoder is not None:
      instructions = observations[self.instruction_key]
      parts.append(
        self.folder.unfold(
          self.instruction_encoder.call(self.folder.fold(instructions)),
          instructions,
        )
      )
    features = self._graph_fn_concat(*parts) if len(parts) > 1 else parts[0]
    if self.lstm is not None:
      out = self.lstm.call(features, initial_state, resets)
      features, state = out["outputs"], out["state"]
    else:
      state = self._graph_fn_pass_state(initial_state)
    flat = self.folder.fold(features)
    logits = self.folder.unfold(self.policy_head.call(flat), frames)
    values = self.folder.unfold(
      self._graph_fn_squeeze(self.value_head.call(flat)), frames
    )
    return {"logits": logits, "values": values, "state": state}

  def _features_space(self, spaces):
    """[B, T, sum of the parts' feature sizes] (declared: static [B, T]
    dims can equal a feature size)."""
    lead = spaces[0]
    size = sum(s.shape[-1] for s in spaces)
    return FloatBox(
      (size,),
      add_batch_rank=lead.has_batch_rank,
      add_time_rank=lead.has_time_rank,
      time_major=lead.time_major,
    )

  @graph_fn(
    output_space=lambda self, spaces: FloatBox(
      (1 + self.num_actions,),
      add_batch_rank=True,
      add_time_rank=True,
      time_major=spaces[0].time_major,
    )
  )
  def _graph_fn_reward_action(self, last_rewards, last_actions):
    reward = tf.clip_by_value(tf.cast(last_rewards, tf.float32), -1.0, 1.0)
    action = tf.one_hot(tf.cast(last_actions, tf.int32), self.num_actions)
    return tf.concat([reward[..., None], action], -1)

  @_graph_fn_reward_action.torch
  def _graph_fn_reward_action(self, last_rewards, last_actions):
    reward = torch.clamp(last_rewards.float(), -1.0, 1.0)
    action = F.one_hot(last_actions.long(), self.num_actions).float()
    return torch.cat([reward[..., None], action], -1)

  @graph_fn(output_space=lambda self, spaces: self._features_space(spaces))
  def _graph_fn_concat(self, *parts):
    return tf.concat(parts, -1)

  @_graph_fn_concat.torch
  def _graph_fn_concat(self, *parts):
    return torch.cat(parts, -1)

  @graph_fn
  def _graph_fn_pass_state(self, state):
    return {"c": tf.identity(state["c"]), "h": tf.identity(state["h"])}

  @_graph_fn_pass_state.torch
  def _graph_fn_pass_state(self, state):
    return {"c": state["c"].clone(), "h": state["h"].clone()}

  @graph_fn
  def _graph_fn_squeeze(self, values):
    return tf.squeeze(values, -1)

  @_graph_fn_squeeze.torch
  def _graph_fn_squeeze(self, values):
    return values.squeeze(-1)


class IMPALAPolicy(Component):
  """The network plus a Categorical sampled with its own seeded generator.

  APIs (arguments as `IMPALANetwork.unroll`):
    act(observations, state, resets, last_rewards, last_actions) ->
      {"action", "greedy_action": int64 [B, T], "logits": [B, T, A],
      "values": [B, T], "state"}.
    values(observations, state, resets, last_rewards, last_actions) ->
      [B, T]: the value alone, no sampling (the stepper's V(final obs) of
      truncated episodes).
    set_weights(weights): the network's `sync` (a learner's
      `network.variables()` output).
  """

  def __init__(self, network, seed=0, scope="policy"):
    super().__init__(scope=scope)
    self.network = network
    self.distribution = Categorical(seed=seed)

  @api
  def act(self, observations, state, resets, last_rewards, last_actions):
    out = self.network.unroll(
      observations, state, resets, last_rewards, last_actions
    )
    logits = out["logits"]
    return {
      "action": self.distribution.sample(logits),
      "greedy_action": self.distribution.deterministic(logits),
      "logits": logits,
      "values": out["values"],
      "state": out["state"],
    }

  @api
  def values(self, observations, state, resets, last_rewards, last_actions):
    return self.network.unroll(
      observations, state, resets, last_rewards, last_actions
    )["values"]

  @api
  def set_weights(self, weights):
    return self.network.sync(weights)


def observation_keys(observation_space):
  """(frame_key, instruction_key) of a Dict observation space: its one
  non-text leaf and its text leaf (None if it has none); (None, None) for
  a box."""
  if not isinstance(observation_space, Dict):
    return None, None
  text = [k for k, s in observation_space.items() if isinstance(s, TextBox)]
  frames = [
    k
    for k, s in observation_space.items()
    if not isinstance(s, (TextBox, Dict))
  ]
  if len(frames) != 1 or len(text) > 1:
    raise BuildError(
      f"IMPALA needs Dict observations of one frame (box) "
      f"leaf and at most one text leaf, got "
      f"{observation_space!r}"
    )
  return frames[0], (text[0] if text else None)


def make_network(
  config, observation_space, scope="impala_network", weights_dtype=None
):
  """The `IMPALANetwork` of an `IMPALAConfig` for `observation_space` (a
  box, or a Dict of a frame and optionally an instruction: see
  `observation_keys`).

  Integer (frame) observations are cast to float32 and divided by
  `config.scale_observations` (default 255 for uint8, else 1: none). The
  torso multiplies in `config.compute_dtype`; the LSTM and heads in
  float32. `weights_dtype` (an actor's copy, loaded and never trained:
  `config.actor_weights_dtype`) stores the torso's variables in that
  dtype, and its products run in it (see `layers.precision`).
  """
  dtypes = dict(
    compute_dtype=weights_dtype or config.compute_dtype,
    weights_dtype=weights_dtype,
  )
  if config.torso == "small":
    torso = ImpalaSmallNetwork(scope="torso", **dtypes)
  elif config.torso == "large":
    torso = ImpalaDeepTorso(scope="torso", **dtypes)
  else:
    spec = MLP_TORSO if config.torso == "mlp" else config.torso
    torso = NeuralNetwork(list(spec), scope="torso", **dtypes)
  frame_key, instruction_key = observation_keys(observation_space)
  frame_space = (
    observation_space if frame_key is None else observation_space[frame_key]
  )
  scale = config.scale_observations
  if scale is None and frame_space.dtype == np.uint8:
    scale = 255.0
  preprocessor = None
  if frame_space.dtype != np.float32 or scale:
    steps = [Cast("float32", round=False)]
    if scale:
      steps.append(Divide(float(scale)))
    preprocessor = PreprocessorStack(*steps, scope="preprocessor")
  encoder = (
    None
    if instruction_key is None
    else InstructionEncoder(scope="instruction_encoder")
  )
  return IMPALANetwork(
    torso,
    config.num_actions,
    config.lstm_units,
    preprocessor,
    config.feed_reward_action,
    encoder,
    frame_key,
    instruction_key,
    scope=scope,
  )
