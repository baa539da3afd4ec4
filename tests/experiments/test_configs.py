"""experiments/configs.py: the intra-op thread count each process takes
(and its docstring examples)."""

import doctest
import os
import re
import subprocess
import sys

import pytest

from experiments import configs
from ingraph_rl.testing.fresh_process import ROOT
from tests.experiments.test_config_flags import parsed


def test_docstring_examples():
  failures, tried = doctest.testmod(configs)
  assert tried > 0 and failures == 0


@pytest.mark.parametrize(
  "requested, role, expected",
  [
    (None, "actor", 1),
    (None, "replay", 1),
    (None, None, 1),  # One process: actor threads, env threads, learner.
    (None, "learner", 0),  # TF's default: one thread per core.
    (None, "ps", 0),
    (0, "actor", 0),  # Asked for: TF's default.
    (3, "learner", 3),
  ],
)
def test_intra_op_threads(requested, role, expected):
  assert configs.intra_op_threads(requested, role) == expected


def test_the_flag_reads_0_as_tf_default_not_as_unset():
  flag_values = parsed(configs.APEX_CLASSES, "--intra_op_threads=0")
  settings = configs.apex_settings(configs.apex_values(flag_values=flag_values))
  assert settings.intra_op_threads == 0
  assert configs.intra_op_threads(settings.intra_op_threads) == 0


def test_a_negative_count_is_refused():
  with pytest.raises(ValueError, match="--intra_op_threads must be >= 0"):
    configs.intra_op_threads(-1)


SCRIPT = """
import tensorflow as tf
from experiments import configs
print(configs.set_intra_op_threads(None, role="actor"),
      tf.config.threading.get_intra_op_parallelism_threads())
print(configs.set_intra_op_threads(None, role="actor"))  # Same: no error.
tf.constant(1.0) + 1.0  # TF runs: too late to change.
try:
  configs.set_intra_op_threads(2)
except RuntimeError as e:
  print("refused:", e)
"""


@pytest.mark.slow
def test_set_in_a_fresh_process_and_refused_once_tf_runs():
  out = subprocess.run(
    [sys.executable, "-c", SCRIPT],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
    check=True,
  ).stdout.splitlines()
  assert out[:2] == ["1 1", "1"]
  assert out[2] == (
    "refused: --intra_op_threads=2 needs to be set before TensorFlow "
    "runs anything in this process"
  )


PRESETS = {
  "impala": configs.IMPALA_CARTPOLE,
  "dqn": configs.DQN_CARTPOLE,
  "apex": configs.APEX_CARTPOLE,
  "ppo": configs.PPO_CARTPOLE,
  "trpo": configs.TRPO_CARTPOLE,
  "sac": configs.SAC_PENDULUM,
}


@pytest.mark.parametrize(
  "flagfile", sorted(p.name for p in configs.FLAGFILES.glob("*.cfg"))
)
def test_a_flagfile_states_every_preset_value_it_keeps(flagfile):
  """A flagfile (Pong, DM Lab) overrides the embedded CartPole preset;
  a preset value it does not name would reach its runs unseen (apex_pong.cfg
  ran with the CartPole preset's epsilon_alpha while its comment gave the
  paper's). Each preset field must appear in the flagfile's own text."""
  agent = flagfile.split("_")[0]
  text = (configs.FLAGFILES / flagfile).read_text()
  named = set(re.findall(r"^--(?:no)?(\w+)", text, re.M))
  assert set(PRESETS[agent]) - named == set()


# --onednn: experiments/__init__.py reads it before TF loads.


def test_onednn_is_read_from_flagfiles_and_the_last_mention_wins(tmp_path):
  import experiments

  flagfile = tmp_path / "f.cfg"
  flagfile.write_text("# a comment\n--onednn\n--seed=1\n")
  assert experiments.onednn_requested([f"--flagfile={flagfile}"])
  assert not experiments.onednn_requested(
    [f"--flagfile={flagfile}", "--noonednn"]
  )
  assert experiments.onednn_requested(["--onednn=true"])
  assert not experiments.onednn_requested(["--onednn=false"])
  assert not experiments.onednn_requested(["--seed=1"])
  # Not a flag: pytest's `-k onednn`, or launch_local's task flags.
  assert not experiments.onednn_requested(["-k", "onednn"])
  assert not experiments.onednn_requested(["--", "--onednn"])


def test_onednn_asked_for_but_off_in_the_loaded_tf_is_a_usage_error(
  monkeypatch,
):
  from experiments.config_flags import UsageError

  monkeypatch.setattr(configs, "onednn_enabled", lambda: False)
  with pytest.raises(UsageError, match=r"^--onednn=True: TensorFlow loaded"):
    configs.check_onednn(True)
  configs.check_onednn(False)  # Not asked for: TF's own choice stands.
  monkeypatch.setattr(configs, "onednn_enabled", lambda: True)
  configs.check_onednn(True)


ONEDNN_SCRIPT = """
import sys
if sys.argv[1] == "--experiments":
  sys.argv = ["experiments.ppo"] + sys.argv[2:]
  import experiments  # Before TF, as `python -m experiments.ppo` runs.
from tensorflow.python.util import _pywrap_util_port
print(_pywrap_util_port.IsMklEnabled())
"""


def tf_onednn(*args):
  """Whether TF runs its oneDNN kernels in a fresh process whose command
  line is `args`, with experiments/__init__.py imported first unless
  args[0] is "--bare"."""
  env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
  out = subprocess.run(
    [sys.executable, "-c", ONEDNN_SCRIPT, *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
    check=True,
    env=env,
  ).stdout.split()
  return {"True": True, "False": False}[out[-1]]


@pytest.mark.slow  # Four fresh processes import TF: ~15 s.
def test_the_flag_reaches_tensorflow_in_a_fresh_process():
  default = tf_onednn("--bare")  # TF's own choice on this CPU.
  pong = "--flagfile=experiments/flagfiles/ppo_pong.cfg"
  cheetah = "--flagfile=experiments/flagfiles/ppo_halfcheetah.cfg"
  assert tf_onednn("--experiments", pong) is True
  assert tf_onednn("--experiments", "--seed=1", "--onednn") is True
  assert tf_onednn("--experiments", cheetah) is default
  assert tf_onednn("--experiments", pong, "--noonednn") is default


def test_the_pong_preset_runs_its_update_on_onednn_and_every_core():
  pong = configs.flagfile_values(
    configs.PPO_CLASSES, configs.PPO_CARTPOLE, "ppo_pong.cfg"
  )
  settings = configs.ppo_settings(pong)
  assert settings.onednn and settings.intra_op_threads == 0
  assert configs.intra_op_threads(settings.intra_op_threads) == 0
  cheetah = configs.ppo_settings(
    configs.flagfile_values(
      configs.PPO_CLASSES, configs.PPO_CARTPOLE, "ppo_halfcheetah.cfg"
    )
  )
  assert not cheetah.onednn and cheetah.intra_op_threads is None
