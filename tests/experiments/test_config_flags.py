"""One source of configuration: the experiments' flags are generated from
the config dataclasses (`experiments/config_flags.py`) and agree with them
(name, type, default, help, choices); the experiment modules declare no
other flag; only passed flags override the embedded preset; and every
preset (the embedded CartPole, each flagfile) makes exactly the configs
the hand-declared flags made before."""

import pytest
from absl import flags

from experiments import config_flags, configs
from ingraph_rl.agents.apex import ApexConfig
from ingraph_rl.agents.dqn import DQNConfig
from ingraph_rl.agents.impala import IMPALAConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.testing.fresh_process import run_python
from ingraph_rl.utils.config_fields import HELP

FLAGFILES = configs.FLAGFILES
EXPERIMENTS = {
  "impala": configs.IMPALA_CLASSES,
  "dqn": configs.DQN_CLASSES,
  "apex": configs.APEX_CLASSES,
}


def parsed(classes, *argv):
  """Fresh flags of `classes`, parsed from `argv`."""
  flag_values = flags.FlagValues()
  config_flags.define_flags(*classes, flag_values=flag_values)
  flag_values(["prog", *argv])
  return flag_values


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_flags_agree_with_their_fields(name):
  classes = EXPERIMENTS[name]
  flag_values = parsed(classes)
  assert config_flags.agreement_problems(classes, flag_values) == []
  for cls in classes:
    for field in config_flags.flag_fields(cls):
      flag = flag_values[field.name]
      assert flag.default == field.default and flag.value == field.default
      assert flag.help == config_flags.flag_help(field)
      assert field.metadata[HELP] in flag.help


def test_a_disagreeing_flag_is_reported():
  flag_values = flags.FlagValues()
  flags.DEFINE_integer(
    "unroll_length", 20, "Steps per rollout (T).", flag_values=flag_values
  )
  flags.DEFINE_float(
    "entropy_cost", 0.00025, "Another help.", flag_values=flag_values
  )
  flags.DEFINE_string(
    "batch_size", "32", "Rollouts per learner batch.", flag_values=flag_values
  )
  problems = "\n".join(
    config_flags.agreement_problems((IMPALAConfig,), flag_values)
  )
  assert (
    "--unroll_length (IMPALAConfig.unroll_length): default 20 != 100"
    in problems
  )
  assert "--entropy_cost (IMPALAConfig.entropy_cost): help" in problems
  assert (
    "--batch_size (IMPALAConfig.batch_size): type string != integer" in problems
  )
  assert (
    "--queue_capacity (IMPALAConfig.queue_capacity): no such flag" in problems
  )


def test_a_name_declared_twice_is_refused():
  with pytest.raises(ValueError, match="'env' is declared by two"):
    config_flags.define_flags(
      configs.IMPALASettings,
      configs.DQNSettings,
      flag_values=flags.FlagValues(),
    )


# What `python -m experiments.<name>` defines at import: the generated flags
# (attributed to the experiment, so --help lists them), and no other.
MODULE_FLAGS = r"""
import importlib, json, sys
from absl import flags
from experiments import config_flags, configs, dmlab_settings
name = sys.argv[1]
module = importlib.import_module(f"experiments.{name}")
# IMPALA also takes the DM Lab flags (--dataset_path, ...).
classes = {"impala": configs.IMPALA_CLASSES + (dmlab_settings.DMLabSettings,),
           "dqn": configs.DQN_CLASSES, "apex": configs.APEX_CLASSES}[name]
declared = sorted(f.name for f in
                  flags.FLAGS.flags_by_module_dict()[f"experiments.{name}"])
print(json.dumps({
    "problems": config_flags.agreement_problems(classes),
    "declared": declared,
    "fields": sorted(f.name for cls in classes
                     for f in config_flags.flag_fields(cls))}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_experiment_modules_declare_exactly_the_generated_flags(name):
  got = run_python(MODULE_FLAGS, name)
  assert got["problems"] == []
  assert got["declared"] == got["fields"]


def test_only_passed_flags_override_the_preset():
  # The field default (100) passed explicitly still overrides the preset
  # (20); unpassed flags keep the preset's values.
  values = configs.impala_values(
    flag_values=parsed(
      configs.IMPALA_CLASSES,
      "--unroll_length=100",
      "--lstm_units=0",
      "--clip_grad_norm=0",
    )
  )
  assert values["unroll_length"] == 100
  assert values["batch_size"] == 8 and values["queue_capacity"] == 32
  assert values["lstm_units"] is None and values["clip_grad_norm"] is None


# The configs the hand-declared flags made before the flags were generated
# (num_actions and the frames per update as a run computes them).
IMPALA_CARTPOLE = IMPALAConfig(
  num_actions=2,
  torso="mlp",
  lstm_units=None,
  unroll_length=20,
  batch_size=8,
  discounting=0.99,
  baseline_cost=0.5,
  entropy_cost=0.01,
  reward_clipping="none",
  learning_rate=0.001,
  decay=0.99,
  momentum=0.0,
  epsilon=0.01,
  clip_grad_norm=40.0,
  lr_decay_steps=800_000 // 160,
  queue_capacity=32,
  seed=0,
)
IMPALA_PONG = IMPALAConfig(
  num_actions=6,
  torso="small",
  lstm_units=None,
  unroll_length=20,
  batch_size=8,
  discounting=0.99,
  baseline_cost=0.5,
  entropy_cost=0.01,
  reward_clipping="abs_one",
  learning_rate=0.0006,
  decay=0.99,
  momentum=0.0,
  epsilon=0.0001,
  clip_grad_norm=40.0,
  lr_decay_steps=50_000_000 // 640,
  queue_capacity=64,
  seed=0,
)
IMPALA_DMLAB = IMPALAConfig(
  num_actions=9,
  torso="large",
  lstm_units=256,
  unroll_length=100,
  batch_size=32,
  discounting=0.99,
  baseline_cost=0.5,
  entropy_cost=0.0033391318945337044,
  reward_clipping="abs_one",
  learning_rate=0.00048,
  decay=0.99,
  momentum=0.0,
  epsilon=0.1,
  clip_grad_norm=40.0,
  lr_decay_steps=1_000_000_000 // 12_800,
  queue_capacity=64,
  seed=0,
)
IMPALA_SETTINGS = {
  # flagfile: (env, actors, envs per actor, frames, action repeats,
  #            frames per update)
  None: ("CartPole-v1", 2, 32, 800_000, None, 160, 2, IMPALA_CARTPOLE),
  "impala_cartpole.cfg": (
    "CartPole-v1",
    2,
    32,
    800_000,
    None,
    160,
    2,
    IMPALA_CARTPOLE,
  ),
  "impala_pong.cfg": ("atari:pong", 2, 32, 50_000_000, 4, 640, 6, IMPALA_PONG),
  "impala_dmlab.cfg": (
    "dmlab:seekavoid_arena_01",
    4,
    4,
    1_000_000_000,
    4,
    12_800,
    9,
    IMPALA_DMLAB,
  ),
}


@pytest.mark.parametrize("flagfile", list(IMPALA_SETTINGS))
def test_impala_presets_make_the_configs_of_before(flagfile):
  argv = [] if flagfile is None else [f"--flagfile={FLAGFILES / flagfile}"]
  values = configs.impala_values(
    flag_values=parsed(configs.IMPALA_CLASSES, *argv)
  )
  (env, actors, envs, frames, repeats, per_update, num_actions, expected) = (
    IMPALA_SETTINGS[flagfile]
  )
  settings = configs.impala_settings(values)
  assert (
    settings.env,
    settings.num_actors,
    settings.num_envs_per_actor,
    settings.total_environment_frames,
    settings.num_action_repeats,
    settings.lr_decay,
    settings.seed,
  ) == (env, actors, envs, frames, repeats, True, 0)
  config = configs.impala_config(values, num_actions, per_update)
  assert config == expected
  assert (
    config.use_staging
    and config.feed_reward_action
    and config.bootstrap_on_truncation
    and config.scale_observations is None
  )


def dqn_expected(**kwargs):
  base = dict(
    num_actions=2,
    learning_rate=2.5e-4,
    replay_capacity=50_000,
    batch_size=64,
    learning_starts=1000,
    update_every=1,
    target_sync_every=500,
    epsilon_steps=10_000,
    epsilon_to=0.05,
    discount=0.99,
    n_step=1,
    dueling=True,
    double_q=True,
    prioritized=False,
    seed=0,
  )
  return DQNConfig(**{**base, **kwargs})


DQN_SETTINGS = {
  # flagfile: (env, num_envs, total env steps, steps per call, atari,
  #            config)
  None: ("CartPole-v1", 4, 60_000, 250, False, dqn_expected()),
  "dqn_cartpole.cfg": (
    "CartPole-v1",
    4,
    60_000,
    250,
    False,
    dqn_expected(n_step=3),
  ),
  "dqn_pong.cfg": (
    "atari:pong",
    8,
    10_000_000,
    100,
    True,
    dqn_expected(
      num_actions=6,
      network=tuple(NATURE_DQN_SPEC),
      learning_rate=1e-4,
      frame_stack_replay=True,
      replay_capacity=500_000,
      batch_size=32,
      learning_starts=20_000,
      n_step=3,
      target_sync_every=1000,
      epsilon_steps=250_000,
      epsilon_to=0.01,
    ),
  ),
}


@pytest.mark.parametrize("flagfile", list(DQN_SETTINGS))
def test_dqn_presets_make_the_configs_of_before(flagfile):
  argv = [] if flagfile is None else [f"--flagfile={FLAGFILES / flagfile}"]
  values = configs.dqn_values(flag_values=parsed(configs.DQN_CLASSES, *argv))
  env, num_envs, total, per_call, atari, expected = DQN_SETTINGS[flagfile]
  settings = configs.dqn_settings(values)
  assert (
    settings.env,
    settings.num_envs,
    settings.total_env_steps,
    settings.steps_per_call,
    settings.seed,
  ) == (env, num_envs, total, per_call, 0)
  assert configs.dqn_config(values, expected.num_actions, atari) == expected


def test_apex_flagfiles():
  """apex_cartpole.cfg writes out the embedded preset exactly; the Pong
  flagfile makes a Nature-DQN config of its own values."""
  embedded = configs.apex_values(flag_values=parsed(configs.APEX_CLASSES))
  written = configs.apex_values(
    flag_values=parsed(
      configs.APEX_CLASSES, f"--flagfile={FLAGFILES / 'apex_cartpole.cfg'}"
    )
  )
  assert written == embedded
  assert configs.apex_config(written, 2, False) == ApexConfig(
    num_actions=2, **configs.APEX_CARTPOLE
  )
  pong = configs.apex_values(
    flag_values=parsed(
      configs.APEX_CLASSES, f"--flagfile={FLAGFILES / 'apex_pong.cfg'}"
    )
  )
  settings = configs.apex_settings(pong)
  assert (settings.env, settings.num_actors, settings.num_replay_shards) == (
    "atari:pong",
    2,
    2,
  )
  config = configs.apex_config(pong, 6, True)
  assert config.network == tuple(NATURE_DQN_SPEC)
  assert (config.buffer_size, config.train_batch_size) == (50_000, 32)
  assert config.training_intensity == 4.0 and config.epsilon_per_env
  dmlab = configs.apex_values(
    flag_values=parsed(
      configs.APEX_CLASSES, f"--flagfile={FLAGFILES / 'apex_dmlab.cfg'}"
    )
  )
  settings = configs.apex_settings(dmlab)
  assert (settings.env, settings.observation_key) == (
    "dmlab:seekavoid_arena_01",
    None,
  )
  dmlab_config = configs.apex_config(dmlab, 9, True)
  assert dmlab_config.network == tuple(NATURE_DQN_SPEC)
  assert dmlab_config.train_batch_size == 32 and dmlab_config.epsilon_per_env
