"""The experiments' settings (besides the agents' configs), their embedded
presets, and the configs a run's values make. No flag is defined here:
`impala.py`, `dqn.py` and `apex.py` generate their flags from these
dataclasses and the agents' configs (`config_flags.py`).

Presets: the embedded default of each experiment is CartPole
(`IMPALA_CARTPOLE`, `DQN_CARTPOLE`: what runs with no flags); the other
tuned setups are flagfiles (flagfiles/impala_pong.cfg, impala_dmlab.cfg,
dqn_pong.cfg; impala_cartpole.cfg and dqn_cartpole.cfg write CartPole's
out). A flagfile's flags override the embedded preset like any flag the
user passes; flags not passed never do.
"""

import dataclasses
import os
import pathlib
import time
import typing

import numpy as np
import tensorflow as tf
from absl import flags

from experiments import config_flags
from ingraph_rl.agents.apex import ApexConfig
from ingraph_rl.agents.dqn import DQNConfig
from ingraph_rl.agents.impala import IMPALAConfig
from ingraph_rl.agents.ppo import PPOConfig
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig
from ingraph_rl.agents.sac import SACConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.components.preprocessing import Cast, Divide, PreprocessorStack
from ingraph_rl.distributed.cluster import JOBS as CLUSTER_JOBS
from ingraph_rl.spaces import BoxSpace
from ingraph_rl.utils.config_fields import field


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """What every experiment takes besides its agent's config."""

  env: str = field(
    "CartPole-v1",
    "gymnasium id, ALE/<Game>-v5, atari:<game> or (IMPALA) dmlab:<level>.",
  )
  seed: int = field(0, "Seed (agent, envs, evaluation).", minimum=0)
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
    minimum=0.0,
  )
  checkpoint_every_minutes: float = field(
    5.0, "Checkpoint period.", minimum=0.0
  )
  eval_episodes: int = field(
    20,
    "Greedy episodes played at the end (IMPALA: by the exported "
    "policy in a fresh process; 0: none).",
    minimum=0,
  )
  env_step_timeout_s: typing.Optional[float] = field(
    300.0,
    "Seconds an env worker process may take to answer one step or reset "
    "before it counts as dead (a hung or stopped simulator: the run stops, "
    "or a cluster's launcher restarts the task); 0: wait forever.",
    zero_is_none=True,
    minimum=0.0,
  )
  intra_op_threads: typing.Optional[int] = field(
    None,
    "TF intra-op threads of this process (0: TF's default, one per "
    "core). Default: TF's in learner and ps tasks, else 1 (actors, "
    "env threads and the learner already share the cores).",
    minimum=0,
  )
  onednn: bool = field(
    False,
    "Turn TF's oneDNN kernels on (TF_ENABLE_ONEDNN_OPTS=1; TF leaves "
    "them off on CPUs without AVX-512, such as AMD's). They cut the CPU "
    "of a Nature-CNN update by ~37% on 2 AVX2 cores, but slow the many "
    "small ops of MLP agents (IMPALA CartPole's actors: -35%). TF reads "
    "the setting once, as it loads: experiments/__init__.py takes it from "
    "the command line and flagfiles before that.",
  )


@dataclasses.dataclass(frozen=True)
class ClusterSettings(RunSettings):
  """The flags of one task of a distributed-TF cluster."""

  job_name: typing.Optional[str] = field(
    None,
    "Cluster role (none: everything in this process).",
    choices=CLUSTER_JOBS,
  )
  task: int = field(0, "Task index within --job_name.", minimum=0)
  cluster: typing.Optional[str] = field(
    None,
    'Cluster spec: JSON {"ps": [...], "learner": [...], "replay": '
    '[...], "actor": [...]} or "ps=h:p;learner=h:p;actor=h:p,h:p"; '
    "default: TF_CONFIG (ours, or a Kubernetes TFJob's).",
  )
  ps_linger_s: float = field(
    60.0,
    "A ps task exits once the learner it served has been gone this long "
    "(its run ended; a restarted learner comes back well within it).",
    minimum=0.0,
  )
  allow_remote_hosts: bool = field(
    False,
    "Allow non-loopback cluster addresses (TF gRPC has no "
    "authentication: trusted networks only).",
  )


@dataclasses.dataclass(frozen=True)
class IMPALASettings(ClusterSettings):
  """experiments/impala.py's settings (scalable_agent's flag names where it
  has them)."""

  num_actors: int = field(
    2, "Actor threads (in a cluster: actor tasks).", minimum=1
  )
  # 32: on CartPole ~1.55x the frames/s of 8 (each actor's graph call per
  # vector step is paid once per 32 envs), learning alike per frame
  # (benchmarks/results/learning.json, impala_cartpole's note).
  num_envs_per_actor: int = field(
    32, "Envs each actor steps together.", minimum=1
  )
  num_action_repeats: typing.Optional[int] = field(
    None,
    "Frames per agent step (ALE frame skip, DM Lab repeats); "
    "default 4 there, 1 for gymnasium.",
    minimum=1,
  )
  env_processes: bool = field(
    False,
    "Step envs in env worker processes (shared memory; gymnasium: "
    "one per env, Atari: one per actor). DM Lab always steps in workers, "
    "one per env.",
  )
  total_environment_frames: int = field(
    800_000, "Frames (env steps x action repeats) to train on.", minimum=1
  )
  lr_decay: bool = field(
    True, "Decay the learning rate linearly to 0 over the frame budget."
  )
  log_every_seconds: float = field(5.0, "Progress line period.", minimum=0.0)
  summary_every_seconds: float = field(
    1.0,
    "TensorBoard scalar period: the latest update's losses and the "
    "episodes finished since the last write (0: every update). Eager "
    "summary writes hold the GIL that the actors' env steps need.",
    minimum=0.0,
  )


@dataclasses.dataclass(frozen=True)
class DQNSettings(RunSettings):
  """experiments/dqn.py's settings."""

  num_envs: int = field(4, "Environments stepped together.", minimum=1)
  total_env_steps: int = field(
    60_000, "Training budget in env steps.", minimum=1
  )
  steps_per_call: int = field(
    250, "Vector steps per in-graph train call.", minimum=1
  )


@dataclasses.dataclass(frozen=True)
class ApexSettings(ClusterSettings):
  """experiments/apex.py's settings (RLlib's Ape-X names where it has
  them)."""

  num_actors: int = field(
    2, "Actor threads (in a cluster: actor tasks).", minimum=1
  )
  num_envs_per_actor: int = field(
    4, "Envs each actor steps together.", minimum=1
  )
  num_replay_shards: int = field(
    2, "Replay shards (threads or tasks).", minimum=1
  )
  observation_key: typing.Optional[str] = field(
    None,
    "For Dict observations: the box leaf the Q-network sees (DM Lab: "
    "RGB_INTERLEAVED; the instruction is dropped).",
  )
  total_env_steps: int = field(
    200_000, "Training budget in env steps.", minimum=1
  )
  log_every_seconds: float = field(5.0, "Progress line period.", minimum=0.0)


@dataclasses.dataclass(frozen=True)
class PPOSettings(RunSettings):
  """experiments/ppo.py's and trpo.py's settings (CleanRL's names)."""

  num_envs: int = field(4, "Environments stepped together.", minimum=1)
  total_timesteps: int = field(
    500_000, "Training budget in env steps.", minimum=1
  )
  log_every_seconds: float = field(5.0, "Progress line period.", minimum=0.0)


@dataclasses.dataclass(frozen=True)
class SACSettings(RunSettings):
  """experiments/sac.py's settings (CleanRL's names where it has them)."""

  num_envs: int = field(1, "Environments stepped together (CleanRL: 1).")
  total_timesteps: int = field(15_000, "Training budget in env steps.")
  steps_per_call: int = field(
    1000, "Vector steps per in-graph train call (at most 1000)."
  )


IMPALA_CLASSES = (IMPALASettings, IMPALAConfig)
APEX_CLASSES = (ApexSettings, ApexConfig)
DQN_CLASSES = (DQNSettings, DQNConfig)
SAC_CLASSES = (SACSettings, SACConfig)
PPO_CLASSES = (PPOSettings, PPOConfig)
TRPO_CLASSES = (PPOSettings, TRPOConfig)

# The embedded default of experiments/sac.py: SAC on Pendulum-v1, 15k env
# steps, 64x64 networks (the learning test's setup; flagfiles/
# sac_halfcheetah.cfg and sac_hopper.cfg hold CleanRL's MuJoCo settings).
SAC_PENDULUM = dict(
  env="Pendulum-v1",
  eval_episodes=10,
  hidden_units=64,
  learning_starts=1000,
  batch_size=128,
  policy_lr=1e-3,
)

# The embedded default of experiments/impala.py: IMPALA on CartPole-v1, 2
# actors x 32 envs, 800k frames (IMPALASettings' defaults), and these
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


# The embedded default of experiments/ppo.py: PPO on CartPole-v1 (CleanRL's
# ppo.py settings but 8 envs, a larger learning rate and a 200k budget:
# it reaches greedy 500 within 60 s here, benchmarks/learning.py's
# ppo_cartpole; flagfiles/ppo_cartpole.cfg writes it all out).
PPO_CARTPOLE = dict(num_envs=8, total_timesteps=200_000, learning_rate=1e-3)

# The embedded default of experiments/trpo.py: TRPO on CartPole-v1, 8 envs
# x 128 steps per update, TRPOConfig's defaults (baselines' max KL 0.01,
# 10 CG iterations, damping 0.1); flagfiles/trpo_cartpole.cfg writes it out.
TRPO_CARTPOLE = dict(num_envs=8, total_timesteps=200_000)

# The embedded default of experiments/apex.py: Ape-X on CartPole-v1, 2
# actors x 4 envs, 2 shards, 200k env steps (ApexSettings' defaults), and
# these config values (tests/agents/apex/test_driver.py's settings;
# flagfiles/apex_cartpole.cfg writes it all out).
APEX_CARTPOLE = dict(
  train_batch_size=128,
  learning_starts=1000,
  buffer_size=50_000,
  rollout_fragment_length=50,
  prefetch_batches=16,
  serve_batches=4,
  target_update_period=250,
  learning_rate=1e-3,
  adam_epsilon=1e-7,
  clip_grad_norm=10.0,
  actor_weight_sync_steps=100,
  max_inserts_per_serve=1024,
  training_intensity=8.0,
  epsilon_alpha=2.0,
)


# Cluster roles whose processes keep TF's default thread pools: they run
# one big update (or none) at a time.
WIDE_ROLES = ("learner", "ps")


def intra_op_threads(requested, role=None):
  """A process's TF intra-op thread count: `requested` (--intra_op_threads;
  0 means TF's default, one thread per core), else 0 for a learner or ps
  task (`role`) and 1 for any other task or a one-process run. There,
  actor threads, env stepping threads and the learner already share the
  cores, and splitting each small op over all of them cost more than it
  saved: on 2 cores, 1 thread gave IMPALA Pong +16% env steps/s end to
  end and DQN Pong's loop +31% (benchmarks/README.md, "Intra-op threads").

  >>> [intra_op_threads(None, role) for role in ("actor", "learner", None)]
  [1, 0, 1]
  >>> intra_op_threads(0), intra_op_threads(4, "actor")
  (0, 4)
  """
  if requested is not None:
    if requested < 0:
      raise ValueError(f"--intra_op_threads must be >= 0, got {requested}")
    return requested
  return 0 if role in WIDE_ROLES else 1


def configure_tensorflow(settings, role=None):
  """Applies a run's TF settings before TF runs anything: its intra-op
  threads (`set_intra_op_threads`) and the check that TF loaded with its
  oneDNN kernels on if `--onednn` asks (a UsageError if not)."""
  check_onednn(settings.onednn)
  return set_intra_op_threads(settings.intra_op_threads, role)


def onednn_enabled():
  """Whether the loaded TF runs its oneDNN kernels."""
  from tensorflow.python.util import _pywrap_util_port

  return bool(_pywrap_util_port.IsMklEnabled())


def check_onednn(requested):
  """UsageError if `--onednn` asks for TF's oneDNN kernels and the loaded
  TF runs without them: TF read TF_ENABLE_ONEDNN_OPTS when it loaded,
  before these flags (experiments/__init__.py sets it from the command
  line, so this happens only where TF was imported first)."""
  if requested and not onednn_enabled():
    raise config_flags.UsageError(
      "onednn",
      True,
      "TensorFlow loaded with its oneDNN kernels off "
      f"(TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS')!r}"
      "): pass --onednn on the command line or in a flagfile of "
      "`python -m experiments.<name>`, or set TF_ENABLE_ONEDNN_OPTS=1 "
      "before TensorFlow is imported",
    )


def set_intra_op_threads(requested, role=None):
  """Applies `intra_op_threads(requested, role)` to TF (before TF runs
  anything in this process); returns it."""
  n = intra_op_threads(requested, role)
  if n and tf.config.threading.get_intra_op_parallelism_threads() != n:
    try:
      tf.config.threading.set_intra_op_parallelism_threads(n)
    except RuntimeError as e:
      raise RuntimeError(
        f"--intra_op_threads={n} needs to be set before TensorFlow runs "
        "anything in this process"
      ) from e
  return n


def run_directory(settings, agent):
  """`--logdir`, or runs/{env}__{agent}__{seed}__{time} (CleanRL's)."""
  env = settings.env.replace("/", "_").replace(":", "_")
  return settings.logdir or os.path.join(
    "runs", f"{env}__{agent}__{settings.seed}__{int(time.time())}"
  )


def impala_values(preset=IMPALA_CARTPOLE, flag_values=None):
  """The run's values: `preset` overridden by the passed flags."""
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(IMPALA_CLASSES, preset, **kwargs)


def dqn_values(preset=DQN_CARTPOLE, flag_values=None):
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(DQN_CLASSES, preset, **kwargs)


def apex_values(preset=APEX_CARTPOLE, flag_values=None):
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(APEX_CLASSES, preset, **kwargs)


def ppo_values(preset=PPO_CARTPOLE, flag_values=None, classes=PPO_CLASSES):
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(classes, preset, **kwargs)


def trpo_values(preset=TRPO_CARTPOLE, flag_values=None):
  return ppo_values(preset, flag_values, TRPO_CLASSES)


FLAGFILES = pathlib.Path(__file__).resolve().parent / "flagfiles"


def flagfile_values(classes, preset, flagfile, args=()):
  """The values a run with `--flagfile=flagfiles/<flagfile>` and then
  `args` resolves (`preset` overridden by them), as the experiment would.

  >>> flagfile_values(APEX_CLASSES, APEX_CARTPOLE, "apex_pong.cfg", [
  ...   "--num_actors=4"])["num_actors"]
  4
  """
  fv = flags.FlagValues()
  config_flags.define_flags(*classes, flag_values=fv)
  fv(["flagfile_values", f"--flagfile={FLAGFILES / flagfile}", *args])
  return config_flags.resolve(classes, preset, flag_values=fv)


def apex_settings(values):
  return config_flags.make(ApexSettings, values)


def _q_learning_config(cls, values, num_actions, frames):
  """A DQN or Ape-X config of a run: Nature DQN's torso on `frames` (Atari's
  or any other uint8 image observations), else the config's MLP."""
  network = tuple(NATURE_DQN_SPEC) if frames else cls.network
  return config_flags.make(
    cls,
    values,
    num_actions=num_actions,
    network=network,
    seed=values["seed"],
  )


def apex_config(values, num_actions, frames):
  """The ApexConfig of a run."""
  return _q_learning_config(ApexConfig, values, num_actions, frames)


def impala_settings(values):
  return config_flags.make(IMPALASettings, values)


def dqn_settings(values):
  return config_flags.make(DQNSettings, values)


def impala_config(values, num_actions, frames_per_update):
  """The IMPALAConfig of a run: the values, the env's action count, the
  seed, and with --lr_decay a linear decay to 0 over the updates the frame
  budget holds (`frames_per_update` = batch x unroll x repeats)."""
  # A batch or unroll < 1 is IMPALAConfig's to refuse, not a division's.
  decay = (
    max(1, values["total_environment_frames"] // max(frames_per_update, 1))
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


def scaled_frames():
  """The Q-learning agents' preprocessor of Atari frames (already 84x84x4
  from ale-py's vector env): uint8 -> float32 in [0, 1]."""
  return PreprocessorStack(Cast("float32"), Divide(255.0))


def is_frames(space):
  """uint8 images [H, W, C] (DM Lab's RGB_INTERLEAVED): the Q-learning
  agents' Nature DQN torso on frames scaled to [0, 1]."""
  return (
    isinstance(space, BoxSpace)
    and len(space.shape) == 3
    and space.dtype == np.uint8
  )


def dqn_config(values, num_actions, frames):
  """The DQNConfig of a run."""
  return _q_learning_config(DQNConfig, values, num_actions, frames)


def ppo_settings(values):
  return config_flags.make(PPOSettings, values)


def ppo_config(values, action_space, cls=PPOConfig):
  """The PPOConfig (or TRPOConfig) of a run: the env's action count (or
  Box dims), the seed, and the updates the budget holds (what anneal_lr
  anneals over)."""
  continuous = getattr(action_space, "num_categories", None) is None
  updates = values["total_timesteps"] // max(
    1, values["num_envs"] * values["num_steps"]
  )
  return config_flags.make(
    cls,
    values,
    num_actions=None if continuous else action_space.num_categories,
    action_dim=int(action_space.shape[0]) if continuous else None,
    num_updates=max(1, updates),
    seed=values["seed"],
  )


def sac_values(preset=SAC_PENDULUM, flag_values=None):
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  return config_flags.resolve(SAC_CLASSES, preset, **kwargs)


def sac_settings(values):
  return config_flags.make(SACSettings, values)


def sac_config(values, env):
  """The SACConfig of a run on `env` (its action box), seeded --seed."""
  fields = config_flags.flag_fields(SACConfig)
  kwargs = {f.name: values[f.name] for f in fields}
  return SACConfig.for_env(env, seed=values["seed"], **kwargs)
