"""`apex_frames.steady_rates`: the Ape-X experiment's env steps/s and
updates/s from its progress lines' times and counts."""

import doctest
import re

import pytest

from benchmarks import apex_frames


def line(wall, steps, sps=0, updates=0):
  """A progress line of experiments/apex.py (experiments/progress.py)."""
  return (
    f"[apex] env steps {steps:>9d}  SPS {sps:7.0f}  updates {updates:6d}  "
    f"loss 0.1000  last100     9.5  shards [10, 12]  wall {wall:.1f}"
  )


def test_docstring_example():
  assert doctest.testmod(apex_frames).failed == 0


def test_rate_over_the_last_two_thirds_ignores_the_lines_own_sps():
  """Lines every 2 s with whole 200-step rollouts: their own SPS reads 400
  or 300, the steps over the clock 350/s; other log lines are skipped."""
  text = "\n".join(
    [
      line(0.0, 0, 0),
      "[apex] something else  wall 1.0",
      line(2.0, 600, 300),
      line(4.0, 1400, 400, 10),
      line(6.0, 2000, 300, 40),
      line(8.0, 2800, 400, 50),
      line(10.0, 3400, 300, 70),
    ]
  )
  # From the line at index 6 // 3 = 2 (4 s, 1400, 10) to the last.
  rates = apex_frames.steady_rates(text)
  assert rates["env_steps_per_s"] == pytest.approx(2000 / 6)
  assert rates["updates_per_s"] == pytest.approx(60 / 6)


def test_too_few_lines_is_an_error():
  with pytest.raises(RuntimeError, match="too few progress lines"):
    apex_frames.steady_rates(line(0.0, 0) + "\n" + line(2.0, 9))


@pytest.mark.slow
def test_cpu_parts_time_each_pass_at_its_own_batch():
  """CartPole's MLP costs about one graph call per pass, so a frame costs
  far more at the acting batch (4 envs) than at the rollout's target batch
  (4 x 50): were both timed at one batch, they would come out alike."""
  setup = apex_frames.Setup("CartPole-v1", 2, 2, 4)
  parts = apex_frames.cpu_parts(setup, frames=400)
  assert set(parts) == {"env", "q_pass_acting", "q_pass_target"}
  assert all(v > 0 for v in parts.values())
  assert parts["q_pass_acting"] > 5 * parts["q_pass_target"]


def flagfile_envs(name):
  text = (apex_frames.configs.FLAGFILES / name).read_text()
  return int(re.search(r"^--num_envs_per_actor=(\d+)$", text, re.M)[1])


def test_setups_step_the_presets_envs_and_name_only_the_others():
  """Each env's setups step its preset's envs per actor (read here from the
  flagfiles' text), unnamed; Pong also steps the other of 8 and 32, named
  in the setup (`/e<n>`) and in its ratio keys (`_envs_<n>`)."""
  pong, cartpole = "atari:pong", "CartPole-v1"
  assert apex_frames.preset_envs(pong) == flagfile_envs("apex_pong.cfg")
  assert apex_frames.preset_envs(cartpole) == flagfile_envs("apex_cartpole.cfg")
  setups = apex_frames.frame_setups([pong, cartpole], quick=False)
  preset = [s for s in setups if s.num_envs == apex_frames.preset_envs(s.env)]
  others = [s for s in setups if s not in preset]
  assert len(preset) == 8 and all(s.envs_suffix("_x") == "" for s in preset)
  (other,) = others
  assert other.env == pong and other.num_envs in (8, 32)
  assert other.num_envs != apex_frames.preset_envs(pong)
  assert other.name == f"pong/a2/s2/e{other.num_envs}"
  assert other.envs_suffix("_envs_") == f"_envs_{other.num_envs}"
