"""Usage errors are one line: each experiment, given a bad flag value,
prints `error: --flag=value: what to change` to stderr and exits 2 before
it builds anything (experiments/config_flags.py: check_flags, run).

Each experiment's cases run in one subprocess that imports the experiment
once (TF's import is the slow part) and forks a child per case, which runs
`config_flags.run(main)` on that case's argv as `python -m
experiments.<name>` would. A child that gets past the checks would start
training: the parent kills it after `CHILD_TIMEOUT_S` and the case fails.
"""

import dataclasses
import json
import subprocess
import sys
import typing

import pytest
from absl import flags

from experiments import config_flags
from ingraph_rl.errors import BuildError
from ingraph_rl.testing.fresh_process import ROOT
from ingraph_rl.utils.config_fields import field

CHILD_TIMEOUT_S = 60

# Runs each case (argv) of experiments.<name> in a forked child; prints
# [[exit code, stderr], ...] as JSON.
DRIVER = r"""
import importlib, json, os, signal, sys, tempfile, time
name, cases = sys.argv[1], json.loads(sys.argv[2])
module = importlib.import_module(f"experiments.{name}")
from experiments import config_flags
results = []
for argv in cases:
  err = tempfile.TemporaryFile()
  pid = os.fork()
  if pid == 0:
    os.dup2(err.fileno(), 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    code = 0
    try:
      config_flags.run(module.main, argv=[name, *argv])
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else 1
    except BaseException:
      import traceback
      traceback.print_exc()
      code = 1
    sys.stderr.flush()
    os._exit(code)
  deadline = time.monotonic() + float(sys.argv[3])
  while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
      break
    if time.monotonic() > deadline:
      os.kill(pid, signal.SIGKILL)
      os.waitpid(pid, 0)
      status = None
      break
    time.sleep(0.05)
  err.seek(0)
  text = err.read().decode(errors="replace")
  code = None if status is None else os.waitstatus_to_exitcode(status)
  results.append([code, text])
print(json.dumps(results))
"""


def run_cases(name, cases, env=None):
  out = subprocess.run(
    [
      sys.executable,
      "-c",
      DRIVER,
      name,
      json.dumps([argv for argv, _ in cases]),
      str(CHILD_TIMEOUT_S),
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def check_usage_errors(name, cases, env=None):
  """Each case (argv, flag): exit 2, <= 5 lines of stderr, one of them
  `error: --<flag>=...`."""
  failures = []
  for (argv, flag), (code, stderr) in zip(cases, run_cases(name, cases, env)):
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith(f"error: --{flag}=")]
    if code != 2 or len(lines) > 5 or len(errors) != 1:
      failures.append(f"{name} {argv}: exit {code}, stderr:\n{stderr[-1500:]}")
  assert not failures, "\n\n".join(failures)


def bad_logdirs(tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("not a directory")
  return [
    ([f"--logdir={a_file}"], "logdir"),
    ([f"--logdir={a_file}/run"], "logdir"),
  ]


@pytest.mark.slow
def test_impala_usage_errors(tmp_path, fake_dmlab):
  """With the fake DM Lab (which refuses unknown levels as the real one
  does): DM Lab says whether a level exists, in one line."""
  cases = [
    (["--batch_size=0"], "batch_size"),
    (["--unroll_length=0"], "unroll_length"),
    (["--num_actors=0"], "num_actors"),
    (["--num_envs_per_actor=-2"], "num_envs_per_actor"),
    (["--total_environment_frames=0"], "total_environment_frames"),
    (["--env=NoSuchEnv-v0"], "env"),
    (["--env=Cartpole-v1"], "env"),
    (["--env=ALE/Pongg-v5"], "env"),
    (["--env=dmlab:no_such_level"], "env"),
    (["--env=CartPole-v1", "--num_action_repeats=4"], "num_action_repeats"),
    *bad_logdirs(tmp_path),
  ]
  check_usage_errors("impala", cases, fake_dmlab.env)


def unreadable_checkpoints(tmp_path):
  """A --logdir whose only checkpoint an earlier run found unreadable and
  moved aside (`ckpt-800.corrupt`): the run must not start over there."""
  logdir = tmp_path / "corrupt_run"
  aside = logdir / "checkpoints" / "ckpt-800.corrupt"
  aside.mkdir(parents=True)
  (aside / "ckpt-800.index").write_bytes(b"not a checkpoint")
  return [([f"--logdir={logdir}"], "logdir")]


@pytest.mark.slow
def test_dqn_usage_errors(tmp_path):
  cases = [
    (["--batch_size=0"], "batch_size"),
    (["--batch_size=-1"], "batch_size"),
    (["--num_envs=0"], "num_envs"),
    (["--steps_per_call=0"], "steps_per_call"),
    (["--learning_rate=0"], "learning_rate"),
    (["--env=NoSuchEnv-v0"], "env"),
    *bad_logdirs(tmp_path),
    *unreadable_checkpoints(tmp_path),
  ]
  check_usage_errors("dqn", cases)


@pytest.mark.slow
def test_apex_usage_errors(tmp_path, fake_dmlab):
  cases = [
    (["--train_batch_size=0"], "train_batch_size"),
    (["--train_batch_size=-5"], "train_batch_size"),
    (["--num_replay_shards=0"], "num_replay_shards"),
    (["--num_actors=0"], "num_actors"),
    (["--env=NoSuchEnv-v0"], "env"),
    (["--env=dmlab:no_such_level", "--observation_key=INSTR"], "env"),
    *bad_logdirs(tmp_path),
  ]
  check_usage_errors("apex", cases, fake_dmlab.env)


@pytest.mark.slow
def test_the_command_line_itself(tmp_path):
  """`python -m experiments.dqn` as a user runs it: one line and exit 2;
  with --verbosity=1 the traceback too."""
  argv = [sys.executable, "-m", "experiments.dqn", "--num_envs=0"]
  out = subprocess.run(
    argv, cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 2, out.stderr[-2000:]
  # Before it: what TF's import prints (4 lines of its C++ logging).
  lines = out.stderr.strip().splitlines()
  assert len(lines) <= 5 and "Traceback" not in out.stderr, out.stderr
  assert lines[-1] == "error: --num_envs=0: must be >= 1"
  out = subprocess.run(
    [*argv, "--verbosity=1"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode != 0
  assert "Traceback" in out.stderr and "UsageError" in out.stderr


@dataclasses.dataclass(frozen=True)
class Settings:
  env: str = field("CartPole-v1", "Env.")
  logdir: typing.Optional[str] = field(None, "Run directory.")
  num_envs: int = field(4, "Envs.", minimum=1)
  budget: typing.Optional[float] = field(None, "Seconds.", minimum=0.0)


@dataclasses.dataclass(frozen=True)
class Config:
  batch_size: int = field(32, "Batch.")
  capacity: int = field(100, "Capacity.")

  def __post_init__(self):
    if not 1 <= self.batch_size <= self.capacity:
      raise BuildError("Config: need 1 <= batch_size <= capacity")


def check(argv, tmp_path):
  """config_flags.check_flags of Settings and Config, given `argv`."""
  fv = flags.FlagValues()
  config_flags.define_flags(Settings, Config, flag_values=fv)
  fv(["test", *argv])
  values = config_flags.resolve((Settings, Config), flag_values=fv)
  config_flags.check_flags(
    (Settings, Config),
    values,
    configs=[lambda: config_flags.make(Config, values)],
    flag_values=fv,
  )


def test_check_flags_passes_good_values(tmp_path):
  check([], tmp_path)
  check(
    [f"--logdir={tmp_path}/new/run", "--budget=2", "--num_envs=1"], tmp_path
  )
  check([f"--logdir={tmp_path}", "--env=ALE/Pong-v5"], tmp_path)


@pytest.mark.parametrize(
  "argv,line",
  [
    (["--num_envs=0"], "--num_envs=0: must be >= 1"),
    (["--budget=-1"], "--budget=-1.0: must be >= 0.0"),
    (["--env=Cartpole-v1"], "did you mean CartPole-v1?"),
    (["--env=atari:pongg"], "did you mean pong?"),
    # The config's message names both; the passed one is to blame.
    (["--capacity=8"], "--capacity=8: Config: need 1 <= batch_size"),
    (["--batch_size=0"], "--batch_size=0: Config: need"),
  ],
)
def test_check_flags_names_the_flag(argv, line, tmp_path):
  with pytest.raises(config_flags.UsageError) as e:
    check(argv, tmp_path)
  assert line in str(e.value) and "\n" not in str(e.value)
  assert e.value.flag == argv[0][2:].split("=")[0]


def test_a_logdir_must_be_a_directory_or_creatable(tmp_path):
  (tmp_path / "f").write_text("")
  for path, why in (
    (tmp_path / "f", "is a file"),
    (tmp_path / "f" / "run", "is a file, not a directory"),
  ):
    with pytest.raises(config_flags.UsageError, match=why):
      config_flags.check_logdir(str(path))
  config_flags.check_logdir(str(tmp_path / "a" / "b"))
  assert not (tmp_path / "a").exists()  # Checked, not made.
