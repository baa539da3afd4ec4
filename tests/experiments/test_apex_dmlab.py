"""The Ape-X DM Lab flagfile runs unchanged through experiments/apex.py
when a `deepmind_lab` module is importable -- here the fake, under the real
module's name. DM Lab steps in env worker processes (the fake, like real
DM Lab, dies in a process that imported TensorFlow), for the actors and
for the greedy evaluation; the Q-network sees the RGB_INTERLEAVED frame."""

import re

import pytest


@pytest.mark.slow  # ~30 s each: make test-all.
@pytest.mark.parametrize(
  "extra",
  [
    [],  # The flagfile's level: RGB frames.
    # The DMLab-30 set: Dict observations (frame and INSTR), the frame
    # selected.
    ["--env=dmlab:dmlab30", "--observation_key=RGB_INTERLEAVED"],
  ],
  ids=["seekavoid", "dmlab30_frames"],
)
def test_dmlab_flagfile_trains_with_a_deepmind_lab_module(
  tmp_path, fake_dmlab, extra
):
  logdir = tmp_path / "run"
  out = fake_dmlab.run(
    "apex",
    "--flagfile=experiments/flagfiles/apex_dmlab.cfg",
    # Small enough for a test; network, frames and key as shipped.
    "--num_actors=1",
    "--num_envs_per_actor=2",
    "--num_replay_shards=1",
    "--buffer_size=2000",
    "--learning_starts=200",
    "--train_batch_size=16",
    "--training_intensity=0",
    "--total_env_steps=600",
    "--eval_episodes=1",
    f"--logdir={logdir}",
    *extra,
    timeout=600,
  )
  text = out.stdout + out.stderr
  assert out.returncode == 0, text[-4000:]
  steps = re.search(
    r"apex: (\d+) env steps, (\d+) updates at \d+ SPS; greedy eval "
    r"return (\S+)",
    text,
  )
  assert steps, text[-3000:]
  assert int(steps.group(1)) >= 600 and int(steps.group(2)) > 0
  assert steps.group(3) != "nan"  # One greedy episode was played.
  assert (logdir / "saved_agent" / "saved_model.pb").exists()
