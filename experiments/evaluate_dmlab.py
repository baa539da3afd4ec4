"""Evaluates an exported IMPALA policy on DMLab-30 levels.

    python experiments/evaluate_dmlab.py --saved_model=runs/<run>/saved_policy \
        --levels=dmlab30 --episodes=10 --output=dmlab30_test.json

`--levels`: "dmlab30" (all 30) or a comma-separated list of DMLab-30
levels (short names or paths, train or test names). Each level is played
as its test variant (a train level's LEVEL_MAPPING entry), as the IMPALA
paper scores it: `--episodes` episodes each, back to back in one env
seeded with `--seed` + the level's index in the DMLab-30 table (so a
level's episodes do not depend on which other levels run). DM Lab steps
in env worker processes (one per level, `--parallel` levels at a time);
the policy runs here, one batched call per step for all of them, with the
SavedModel's `action` signature alone (`first`, the previous reward and
action, the LSTM state, one input per observation leaf; the frame size
and whether it takes an instruction are read from the signature). Levels
that finished their episodes keep stepping until the others have.

Prints the per-level table (mean return, episodes, human-normalized
score) and the mean capped (100) human-normalized score; `--output`
writes them as JSON: `dmlab30.score_report`'s layout ("levels": {level:
{"mean_return", "episodes", "human_normalized_score", "capped_score",
"scoring_level", "level", "seed", "returns": [per episode]}},
"num_levels", "complete", "cap", "mean_capped_hns", "mean_hns") plus
"saved_model", "train_step", "episodes_per_level", "actions" ("greedy"
or "sampled"), "seed" and "num_action_repeats".
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

if not __package__:
  # Run as a script: the checkout this file is in (its env workers import
  # the same one).
  sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  )

from ingraph_rl.environments import WorkerSpec, WorkerVectorEnv, dmlab30
from ingraph_rl.environments.dmlab import IMPALA_ACTION_SET

SAVED_MODEL = flags.DEFINE_string(
  "saved_model", None, "Exported policy (a SavedModel directory)."
)
LEVELS = flags.DEFINE_string(
  "levels",
  "dmlab30",
  '"dmlab30" or comma-separated DMLab-30 levels (played as their test '
  "variants).",
)
EPISODES = flags.DEFINE_integer("episodes", 10, "Episodes per level.")
SAMPLE = flags.DEFINE_bool("sample", False, "Sample actions (default: greedy).")
SEED = flags.DEFINE_integer(
  "seed", 0, "Level i of the DMLab-30 table is seeded with seed + i."
)
PARALLEL = flags.DEFINE_integer(
  "parallel",
  0,
  "Levels stepped at once, each in its own worker process (0: all).",
)
NUM_ACTION_REPEATS = flags.DEFINE_integer(
  "num_action_repeats", 4, "Frames per agent step."
)
OUTPUT = flags.DEFINE_string(
  "output", None, "Where to write the JSON report (none: print only)."
)


def test_levels(spec):
  """The test variants (short names, in order, once each) of `spec`."""
  names = (
    dmlab30.TEST_LEVELS
    if spec.strip() == "dmlab30"
    else [
      dmlab30.scoring_level(s.strip()) for s in spec.split(",") if s.strip()
    ]
  )
  if not names:
    raise ValueError(f"no levels in --levels={spec!r}")
  return list(dict.fromkeys(names))


class Policy:
  """The SavedModel's `action` signature, fed from env observations."""

  def __init__(self, path, sample):
    self.model = tf.saved_model.load(path)
    self.act = self.model.signatures["action"]
    self.initial = self.model.signatures["get_initial_state"]
    self.key = "action" if sample else "greedy_action"
    inputs = self.act.structured_input_signature[1]
    frame = inputs.get("observation_RGB_INTERLEAVED", inputs.get("observation"))
    if frame is None or frame.shape.rank != 4:
      raise ValueError(
        f"{path} takes no DM Lab frames (inputs {sorted(inputs)})"
      )
    self.height, self.width = frame.shape[1], frame.shape[2]
    # Dict observations (frame + instruction) or the frame alone.
    self.dict_obs = "observation_RGB_INTERLEAVED" in inputs
    self.inputs = set(inputs)
    actions = self.act.structured_outputs["logits"].shape[-1]
    if actions != len(IMPALA_ACTION_SET):
      raise ValueError(
        f"{path} has {actions} actions; DM Lab envs here "
        f"have IMPALA's {len(IMPALA_ACTION_SET)}"
      )

  def train_step(self):
    return int(self.model.signatures["get_train_step"]()["train_step"])

  def __call__(self, obs, first, prev_reward, prev_action, state):
    if self.dict_obs:
      feed = {
        f"observation_{k}": tf.constant(v)
        for k, v in obs.items()
        if f"observation_{k}" in self.inputs
      }
    else:
      feed = {"observation": tf.constant(obs)}
    out = self.act(
      first=tf.constant(first),
      prev_reward=tf.constant(prev_reward, tf.float32),
      prev_action=tf.constant(prev_action, tf.int64),
      **feed,
      **state,
    )
    return (
      out[self.key].numpy(),
      {"state_c": out["state_c"], "state_h": out["state_h"]},
    )


def level_seed(level):
  return SEED.value + dmlab30.TEST_LEVELS.index(level)


def play(policy, levels, episodes):
  """{level: [episode returns]} of `episodes` episodes per level, the
  levels stepped together in worker processes."""
  kwargs = {
    "num_action_repeats": NUM_ACTION_REPEATS.value,
    "width": policy.width,
    "height": policy.height,
    "instructions": policy.dict_obs,
  }
  env = WorkerVectorEnv.from_specs(
    [
      WorkerSpec(
        f"dmlab:{dmlab30.level_path(level)}", 1, level_seed(level), kwargs
      )
      for level in levels
    ]
  )
  try:
    n = len(levels)
    obs = env.reset()
    state = policy.initial(batch_size=tf.constant(n))
    first = np.ones(n, bool)
    prev_reward = np.zeros(n, np.float32)
    prev_action = np.zeros(n, np.int64)
    running = np.zeros(n)
    returns = [[] for _ in levels]
    while any(len(r) < episodes for r in returns):
      actions, state = policy(obs, first, prev_reward, prev_action, state)
      step = env.step(actions)
      running += step.rewards
      first = step.terminated | step.truncated
      for i in np.flatnonzero(first):
        if len(returns[i]) < episodes:
          returns[i].append(float(running[i]))
      running[first] = 0.0
      # What came with the next observations: nothing after a reset.
      prev_reward = np.where(first, 0.0, step.rewards).astype(np.float32)
      prev_action = np.where(first, 0, actions).astype(np.int64)
      obs = step.obs
    return dict(zip(levels, returns))
  finally:
    env.close()


def evaluate(path, levels, episodes, sample=False, parallel=0):
  """`score_report` of the levels (and the run's settings)."""
  policy = Policy(path, sample)
  batch = parallel or len(levels)
  returns = {}
  for a in range(0, len(levels), batch):
    returns.update(play(policy, levels[a : a + batch], episodes))
  report = dmlab30.score_report(
    {
      level: {
        "level": dmlab30.level_path(level),
        "seed": level_seed(level),
        "mean_return": float(np.mean(r)),
        "episodes": len(r),
        "returns": r,
      }
      for level, r in returns.items()
    }
  )
  report.update(
    saved_model=os.path.abspath(path),
    train_step=policy.train_step(),
    episodes_per_level=episodes,
    actions="sampled" if sample else "greedy",
    seed=SEED.value,
    num_action_repeats=NUM_ACTION_REPEATS.value,
  )
  return report


def main(argv):
  del argv
  if EPISODES.value < 1:
    raise app.UsageError("--episodes must be >= 1")
  levels = test_levels(LEVELS.value)
  start = time.time()
  report = evaluate(
    SAVED_MODEL.value,
    levels,
    EPISODES.value,
    SAMPLE.value,
    max(0, PARALLEL.value),
  )
  print(
    f"[evaluate_dmlab] {report['actions']} policy "
    f"{SAVED_MODEL.value} (train step {report['train_step']}), "
    f"{EPISODES.value} episodes on each of {len(levels)} test levels "
    f"in {time.time() - start:.0f} s:",
    flush=True,
  )
  print(dmlab30.format_report(report), flush=True)
  if OUTPUT.value:
    os.makedirs(os.path.dirname(os.path.abspath(OUTPUT.value)), exist_ok=True)
    with open(OUTPUT.value, "w") as f:
      json.dump(report, f, indent=1)
    print(f"[evaluate_dmlab] wrote {OUTPUT.value}", flush=True)


if __name__ == "__main__":
  flags.mark_flag_as_required("saved_model")
  app.run(main)
