"""IMPALA's agent network: preprocessing -> torso -> optional LSTM ->
policy logits and a state value, over [B, T, ...] observations.

Actor and learner each own a copy: the actor runs it with T == 1 inside its
unroll loop, the learner over whole [B, T + 1, ...] rollouts. The weights
are exchanged through `variables()` / `sync(values)` (same paths).
"""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.common import Synchronizable, TimeRankFolder
from ingraph_rl.components.layers import LSTM, Dense
from ingraph_rl.components.networks import (ImpalaDeepTorso,
                                             ImpalaSmallNetwork, NeuralNetwork)
from ingraph_rl.components.preprocessing import (Cast, Divide,
                                                PreprocessorStack)
from ingraph_rl.components.distributions import Categorical
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.spaces import Dict, FloatBox
from ingraph_rl.utils.lazy import torch


class IMPALANetwork(Synchronizable):
  """`unroll(observations, initial_state, resets)` over batch-major inputs:

    observations [B, T, ...] (raw env observations; `preprocessor` casts
      and scales them), initial_state {"c", "h"} [B, state_size],
    resets bool [B, T]: True where an episode starts (the LSTM state is
      zeroed before that step).
    -> {"logits": [B, T, A], "values": [B, T], "state": {"c", "h"}}.

  Without an LSTM (`lstm_units=None`) the state has size 0 and passes
  through unchanged, so actor, learner and exported policy keep ONE
  structure for every network.

  Args:
    torso: a list spec for a NeuralNetwork, or a component with `call`
      (e.g. `ImpalaSmallNetwork()`), applied to single frames [N, ...].
    num_actions: size of the discrete action set.
    lstm_units: LSTM size on top of the torso, or None.
    preprocessor: a component with `call`, applied first (None: none).
  """

  def __init__(self, torso, num_actions, lstm_units=None, preprocessor=None,
               scope="impala_network"):
    super().__init__(scope=scope)
    self.num_actions = int(num_actions)
    self.lstm_units = int(lstm_units) if lstm_units else 0
    self.preprocessor = preprocessor
    self.folder = TimeRankFolder(scope="folder")
    self.torso = NeuralNetwork(list(torso), scope="torso") if isinstance(
        torso, (list, tuple)) else torso
    self.lstm = LSTM(self.lstm_units, scope="lstm") if self.lstm_units \
        else None
    self.policy_head = Dense(self.num_actions, scope="policy_head")
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
  def unroll(self, observations, initial_state, resets):
    frames = self.folder.fold(observations)
    if self.preprocessor is not None:
      frames = self.preprocessor.call(frames)
    features = self.folder.unfold(self.torso.call(frames), observations)
    if self.lstm is not None:
      out = self.lstm.call(features, initial_state, resets)
      features, state = out["outputs"], out["state"]
    else:
      state = self._graph_fn_pass_state(initial_state)
    flat = self.folder.fold(features)
    logits = self.folder.unfold(self.policy_head.call(flat), observations)
    values = self.folder.unfold(
        self._graph_fn_squeeze(self.value_head.call(flat)), observations)
    return {"logits": logits, "values": values, "state": state}

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
  """`act(observations, state, resets)` -> {"action", "greedy_action":
  int64 [B, T], "logits": [B, T, A], "values": [B, T], "state"}: the
  network plus a Categorical sampled with its own seeded generator.

  `set_weights(weights)`: the network's `sync` (a learner's
  `network.variables()` output).
  """

  def __init__(self, network, seed=0, scope="policy"):
    super().__init__(scope=scope)
    self.network = network
    self.distribution = Categorical(seed=seed)

  @api
  def act(self, observations, state, resets):
    out = self.network.unroll(observations, state, resets)
    logits = out["logits"]
    return {"action": self.distribution.sample(logits),
            "greedy_action": self.distribution.deterministic(logits),
            "logits": logits, "values": out["values"],
            "state": out["state"]}

  @api
  def set_weights(self, weights):
    return self.network.sync(weights)


def make_network(config, observation_space, scope="impala_network"):
  """The `IMPALANetwork` of an `IMPALAConfig` for `observation_space`.

  Integer (frame) observations are cast to float32 and divided by
  `config.scale_observations` (default 255 for uint8, else 1: none).
  """
  if config.torso == "small":
    torso = ImpalaSmallNetwork(scope="torso")
  elif config.torso == "large":
    torso = ImpalaDeepTorso(scope="torso")
  else:
    torso = list(config.torso)
  scale = config.scale_observations
  if scale is None and observation_space.dtype == np.uint8:
    scale = 255.0
  preprocessor = None
  if observation_space.dtype != np.float32 or scale:
    steps = [Cast("float32", round=False)]
    if scale:
      steps.append(Divide(float(scale)))
    preprocessor = PreprocessorStack(*steps, scope="preprocessor")
  return IMPALANetwork(torso, config.num_actions, config.lstm_units,
                       preprocessor, scope=scope)
