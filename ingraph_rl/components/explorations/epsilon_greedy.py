"""Epsilon-greedy action selection with a scheduled epsilon."""

import numpy as np
import tensorflow as tf

from ingraph_rl.components.explorations.schedules import Constant, Schedule
from ingraph_rl.core import Component, api, graph_fn
from ingraph_rl.errors import BuildError, SpaceError
from ingraph_rl.spaces import BoolBox, FloatBox, IntBox
from ingraph_rl.utils.lazy import torch


def _action_space(component):
  q = component.input_spaces["q_values"]
  return IntBox(
    component.num_actions,
    shape=q.shape[:-1],
    dtype=np.int64,
    add_batch_rank=q.has_batch_rank,
    add_time_rank=q.has_time_rank,
    time_major=q.time_major,
  )


class EpsilonGreedy(Component):
  """Greedy (argmax) actions, replaced per row by a uniformly random action
  with probability epsilon; epsilon follows `schedule` over a global step.

  API (fixed return structure):
    get_action(q_values, explore=True, advance=True) -> {"action": int64
      [...], "epsilon": float32 scalar}.
      q_values: FloatBox of per-item shape (num_actions,), any leading ranks.
      explore: a Python default (always explore) unless the input spaces
        give it a space (`BoolBox()`), then chosen per call. With explore,
        each row draws u ~ U[0, 1) and takes a uniform random action (which
        may equal the greedy one) where u < epsilon, and the "timestep"
        variable (int64) advances by one after the call. Without explore
        the actions are the argmax and the step stays.
      advance: a Python bool fixed when the graph is built (never an
        input space). False: the "timestep" stays also when exploring (the
        actions are drawn as with True), so several calls share one
        schedule step: a caller acting on one vector step in parts
        advances on one part only.
      "epsilon" is the schedule's value at the step the call used (the step
      before the advance), also when explore is off. A vector schedule
      value (k rates, e.g. `Constant((0.4, 0.1))`) gives each row its own
      rate: row r of the flattened leading dims uses rate r mod k (an
      actor's envs, one rate each); "epsilon" is then that vector.

  The probability of a non-greedy action is epsilon * (1 - 1/num_actions).

      >>> from ingraph_rl.executors.tensorflow import TFExecutor
      >>> from ingraph_rl.components.explorations.schedules import LinearDecay
      >>> ex = TFExecutor(EpsilonGreedy(3, LinearDecay(1.0, 0.0, 10)),
      ...     {"q_values": FloatBox((3,), add_batch_rank=True),
      ...      "explore": BoolBox()})
      >>> out = ex.execute("get_action", np.eye(3, dtype=np.float32), False)
      >>> out["action"].numpy().tolist(), float(out["epsilon"])
      ([0, 1, 2], 1.0)
  """

  variable_args = ("q_values",)

  def __init__(self, num_actions, schedule, seed=0, scope="epsilon_greedy"):
    super().__init__(scope=scope)
    self.num_actions = int(num_actions)
    if self.num_actions < 1:
      raise BuildError(
        f"'{scope}': num_actions must be >= 1, got {num_actions}"
      )
    if not isinstance(schedule, Schedule):
      schedule = Constant(schedule)
    self.schedule = schedule
    self.seed = seed

  def create_variables(self, input_spaces):
    q = self.expect_space(input_spaces, "q_values", FloatBox, rank=1)
    if q.shape[-1] != self.num_actions:
      raise SpaceError(
        f"last dim must be num_actions={self.num_actions}, got {q.shape[-1]}",
        component=self.path,
        api="get_action",
        argument="q_values",
        received=repr(q),
      )
    explore = input_spaces.get("explore")
    if explore is not None and (
      not isinstance(explore, BoolBox)
      or explore.rank != 0
      or explore.num_leading_ranks
    ):
      raise SpaceError(
        "explore must be one bool per call",
        component=self.path,
        api="get_action",
        argument="explore",
        expected="BoolBox()",
        received=repr(explore),
      )
    self.timestep = self.add_variable("timestep", (), np.int64, trainable=False)
    self.rng = self.add_resource(
      "rng",
      tf=lambda: tf.random.Generator.from_seed(self.seed),
      torch=lambda: torch.Generator().manual_seed(self.seed),
    )

  @api
  def get_action(self, q_values, explore=True, advance=True):
    if not isinstance(advance, bool):
      raise BuildError(
        f"'{self.path}'.get_action: advance must be a Python bool (fixed "
        f"at build), got {advance!r}"
      )
    step = self._graph_fn_advance(explore, advance)
    epsilon = self.schedule.value(step)
    action = self._graph_fn_select(q_values, explore, epsilon)
    return {"action": action, "epsilon": epsilon}

  # --- TF bodies -------------------------------------------------------------

  @graph_fn
  def _graph_fn_advance(self, explore, advance):
    """Advances the step when exploring (and `advance`); returns the step
    before."""
    if not advance:
      return self.timestep.read_value()
    inc = tf.cast(tf.convert_to_tensor(explore, tf.bool), tf.int64)
    return self.timestep.assign_add(inc) - inc

  @graph_fn(output_space=_action_space)
  def _graph_fn_select(self, q_values, explore, epsilon):
    greedy = tf.argmax(q_values, axis=-1, output_type=tf.int64)
    shape = tf.shape(greedy)
    u = self.rng.uniform(shape, dtype=tf.float32)
    random = self.rng.uniform(shape, 0, self.num_actions, dtype=tf.int64)
    if epsilon.shape.rank == 1:  # Per-row rates, cycled over the rows.
      rows = tf.range(tf.size(greedy)) % tf.size(epsilon)
      epsilon = tf.gather(epsilon, tf.reshape(rows, shape))
    take = tf.logical_and(tf.convert_to_tensor(explore, tf.bool), u < epsilon)
    return tf.where(take, random, greedy)

  # --- torch bodies ----------------------------------------------------------

  @_graph_fn_advance.torch
  def _graph_fn_advance(self, explore, advance):
    step = self.timestep.detach().clone()
    if advance and bool(explore):
      with torch.no_grad():
        self.timestep.add_(1)
    return step

  @_graph_fn_select.torch
  def _graph_fn_select(self, q_values, explore, epsilon):
    greedy = q_values.argmax(-1)
    u = torch.rand(greedy.shape, generator=self.rng)
    random = torch.randint(
      0, self.num_actions, greedy.shape, generator=self.rng, dtype=torch.int64
    )
    if epsilon.dim() == 1:  # Per-row rates, cycled over the rows.
      rows = torch.arange(greedy.numel()) % epsilon.numel()
      epsilon = epsilon[rows.reshape(greedy.shape)]
    take = (u < epsilon) & bool(explore)
    return torch.where(take, random, greedy)
