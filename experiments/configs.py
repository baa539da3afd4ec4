"""The experiments' settings (besides the agents' configs), their embedded
presets, and the configs a run's values make. No flag is defined here:
`impala.py` and `dqn.py` generate their flags from these dataclasses and
the agents' configs (`config_flags.py`).

Presets: the embedded default of each experiment is CartPole
(`IMPALA_CARTPOLE`, `DQN_CARTPOLE`: what runs with no flags); the other
tuned setups are flagfiles (flagfiles/impala_pong.cfg, impala_dmlab.cfg,
dqn_pong.cfg; impala_cartpole.cfg and dqn_cartpole.cfg write CartPole's
out). A flagfile's flags override the embedded preset like any flag the
user passes; flags not passed never do.
"""

import dataclasses
import typing

from experiments import config_flags
from ingraph_rl.agents.dqn import DQNConfig
from ingraph_rl.agents.impala import IMPALAConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.utils.config_fields import field

JOBS = ("ps", "learner", "actor")


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """What every experiment takes besides its agent's config."""

  env: str = field(
    "CartPole-v1",
    "gymnasium id, ALE/<Game>-v5, atari:<game> or (IMPALA) dmlab:<level>.",
  )
  seed: int = field(0, "Seed (agent, envs, evaluation).")
  logdir: typing.Optional[str] = field(
    None,
    "Run directory (resumes if it has checkpoints); default "
    "runs/{env}__{agent}__{seed}__{time}.",
  )
  max_train_seconds: typing.Optional[float] = field(
    None,
    "Also stop training after this much wall time from its start "
    "(then checkpoint, export and evaluate as usual); default: no "
    "limit.",
  )
  checkpoint_every_minutes: float = field(5.0, "Checkpoint period.")
  eval_episodes: int = field(
    20,
    "Greedy episodes played at the end (IMPALA: by the exported "
    "policy in a fresh process; 0: none).",
  )


@dataclasses.dataclass(frozen=True)
class IMPALASettings(RunSettings):
  """experiments/impala.py's settings (scalable_agent's flag names where it
  has them)."""

  num_actors: int = field(2, "Actor threads (in a cluster: actor tasks).")
  num_envs_per_actor: int = field(8, "Envs each actor steps together.")
  num_action_repeats: typing.Optional[int] = field(
    None,
    "Frames per agent step (ALE frame skip, DM Lab repeats); "
    "default 4 there, 1 for gymnasium.",
  )
  env_processes: bool = field(
    False,
    "Step envs in env worker processes (shared memory; gymnasium: "
    "one per env, Atari: one per actor). DM Lab always steps in workers, "
    "one per env.",
  )
  total_environment_frames: int = field(
    800_000, "Frames (env steps x action repeats) to train on."
  )
  lr_decay: bool = field(
    True, "Decay the learning rate linearly to 0 over the frame budget."
  )
  log_every_seconds: float = field(5.0, "Progress line period.")
  job_name: typing.Optional[str] = field(
    None, "Cluster role (none: everything in this process).", choices=JOBS
  )
  task: int = field(0, "Task index within --job_name.")
  cluster: typing.Optional[str] = field(
    None,
    'Cluster spec: JSON {"ps": [...], "learner": [...], "actor": '
    '[...]} or "ps=h:p;learner=h:p;actor=h:p,h:p"; default: TF_CONFIG.',
  )
  allow_remote_hosts: bool = field(
    False,
    "Allow non-loopback cluster addresses (TF gRPC has no "
    "authentication: trusted networks only).",
  )


@dataclasses.dataclass(frozen=True)
class DQNSettings(RunSettings):
  """experiments/dqn.py's settings."""

  num_envs: int = field(4, "Environments stepped together.")
  total_env_steps: int = field(60_000, "Training budget in env steps.")
  steps_per_call: int = field(250, "Vector steps per in-graph train call.")


IMPALA_CLASSES = (IMPALASettings, IMPALAConfig)
DQN_CLASSES = (DQNSettings, DQNConfig)

# The embedded default of experiments/impala.py: IMPALA on CartPole-v1, 2
# actors x 8 envs, 800k frames (IMPALASettings' defaults), and these
# config values (flagfiles/impala_cartpole.cfg writes it all out).
IMPALA_CARTPOLE = dict(
  unroll_length=20,
  batch_size=8,
  queue_capacity=32,
  learning_rate=0.001,
  epsilon=0.01,
  entropy_cost=0.01,
  reward_clipping="none",
)

# The embedded default of experiments/dqn.py: DQN on CartPole-v1, 4 envs,
# 60k env steps (DQNSettings' defaults), Adam 2.5e-4.
DQN_CARTPOLE = dict(learning_rate=2.5e-4)


def impala_values(preset=IMPALA_CARTPOLE, flag_values=None):
  """The run's values: `preset` overridden by the passed flags."""
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(IMPALA_CLASSES, preset, **kwargs)


def dqn_values(preset=DQN_CARTPOLE, flag_values=None):
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(DQN_CLASSES, preset, **kwargs)


def impala_settings(values):
  return config_flags.make(IMPALASettings, values)


def dqn_settings(values):
  return config_flags.make(DQNSettings, values)


def impala_config(values, num_actions, frames_per_update):
  """The IMPALAConfig of a run: the values, the env's action count, the
  seed, and with --lr_decay a linear decay to 0 over the updates the frame
  budget holds (`frames_per_update` = batch x unroll x repeats)."""
  decay = (
    max(1, values["total_environment_frames"] // frames_per_update)
    if values["lr_decay"]
    else None
  )
  return config_flags.make(
    IMPALAConfig,
    values,
    num_actions=num_actions,
    lr_decay_steps=decay,
    seed=values["seed"],
  )


def dqn_config(values, num_actions, atari):
  """The DQNConfig of a run: Nature DQN's torso on Atari frames."""
  network = tuple(NATURE_DQN_SPEC) if atari else DQNConfig.network
  return config_flags.make(
    DQNConfig,
    values,
    num_actions=num_actions,
    network=network,
    seed=values["seed"],
  )
