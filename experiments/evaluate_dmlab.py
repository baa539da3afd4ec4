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

The levels load at once (each in its own worker; DM Lab compiles a
maze level's map as it loads), with one progress line: `loading 30 DM Lab
levels: 12/30`, then the time it took. The hold-out `_test` levels get
`allowHoldOutLevels="true"`. Two psychlab levels need `--dataset_path`
(DM Lab's data/brady_konkle_oliva2008/README.md): without it the run stops
before any env starts, or with `--skip_levels_without_dataset` skips them.
A level that fails to load or whose worker dies is reported with its
error, and the others are still scored. The workers' output (DM Lab's
maps and instructions) goes to `--env_log_dir` (default: `env_workers/` next
to `--output`), not to the console; a dead worker's error ends with the
tail of its log.

Prints the per-level table (mean return, episodes, human-normalized
score) and the mean capped (100) human-normalized score; `--output`
writes them as JSON: `dmlab30.score_report`'s layout ("levels": {level:
{"mean_return", "episodes", "human_normalized_score", "capped_score",
"scoring_level", "level", "seed", "returns": [per episode]; a failed or
skipped level: "status" ("failed" / "skipped") and "error"}},
"num_levels", "complete", "cap", "mean_capped_hns", "mean_hns") plus
"failed_levels", "skipped_levels", "load_seconds", "saved_model",
"train_step", "episodes_per_level", "actions" ("greedy" or "sampled"),
"seed" and "num_action_repeats". The exit status is 1 when a level failed
or was skipped, unless `--allow_incomplete`.
"""

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf
from absl import app, flags

if not __package__:
  # Run as a script: the checkout this file is in (its env workers import
  # the same one).
  sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  )

from experiments import config_flags, dmlab_settings  # noqa: E402
from ingraph_rl.environments import (  # noqa: E402
  DMLAB_LOAD_TIMEOUT_S,
  WorkerSpec,
  WorkerVectorEnv,
  dmlab30,
)
from ingraph_rl.environments.dmlab import IMPALA_ACTION_SET  # noqa: E402
from ingraph_rl.environments.load_progress import LoadProgress  # noqa: E402

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
ALLOW_INCOMPLETE = flags.DEFINE_bool(
  "allow_incomplete",
  False,
  "Exit 0 even when a level failed or was skipped (the report says "
  "which, and is complete: false).",
)
LOG_DIR = flags.DEFINE_string(
  "env_log_dir",
  None,
  "Where the env workers' stdout and stderr go (<level>_worker0.log); "
  "default: env_workers/ next to --output (without --output: a "
  "temporary directory, kept only if a worker died).",
)
DMLAB_FLAGS = config_flags.define_flags(dmlab_settings.DMLabSettings)


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


def _error_text(error):
  return f"{type(error).__name__}: {error}"


def load_levels(levels, env_kwargs, log_dir):
  """({level: env}, {level: error text}, seconds): one single-env worker
  per level, all loading at once, with one progress line."""
  progress = LoadProgress(len(levels))
  envs, errors, lock = {}, {}, threading.Lock()

  def load(level):
    try:
      env = WorkerVectorEnv.from_specs(
        [
          WorkerSpec(
            f"dmlab:{dmlab30.level_path(level)}",
            1,
            level_seed(level),
            env_kwargs,
          )
        ],
        log_dir=log_dir,
        log_name=f"{level}_worker",
        start_timeout_s=DMLAB_LOAD_TIMEOUT_S,
      )
    except Exception as e:  # The level's own failure: reported, not fatal.
      with lock:
        errors[level] = _error_text(e)
      progress.fail()
      return
    with lock:
      envs[level] = env
    progress.loaded()

  threads = [threading.Thread(target=load, args=(lv,)) for lv in levels]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  return envs, errors, progress.finish()


def _stack(values):
  """One batch from the per-level observations (dicts of [1, ...] leaves,
  or [1, ...] arrays)."""
  if isinstance(values[0], dict):
    return {k: np.concatenate([v[k] for v in values]) for k in values[0]}
  return np.concatenate(values)


def _blank(obs):
  """A stand-in observation for a level that failed (never scored)."""
  if isinstance(obs, dict):
    return {k: _blank(v) for k, v in obs.items()}
  if obs.dtype == object:
    return np.full(obs.shape, "", object)
  return np.zeros_like(obs)


def play(policy, levels, episodes, log_dir=None, config=None):
  """({level: [episode returns]}, {level: error text}, load seconds) of
  `episodes` episodes per level, the levels stepped together (each in its
  own worker); a level that fails to load or dies is reported with its
  error while the others play on."""
  kwargs = {
    "num_action_repeats": NUM_ACTION_REPEATS.value,
    "width": policy.width,
    "height": policy.height,
    "instructions": policy.dict_obs,
  }
  if config:
    kwargs["config"] = dict(config)
  envs, errors, load_s = load_levels(levels, kwargs, log_dir)
  live = [level for level in levels if level in envs]
  returns = {level: [] for level in live}
  if not live:
    return returns, errors, load_s
  pool = ThreadPoolExecutor(max_workers=len(live))

  def call_all(fn, names):
    """{level: result or exception} of fn(level) for every level, at once
    (the workers step in parallel)."""

    def guarded(level):
      try:
        return fn(level)
      except Exception as e:
        return e

    return dict(zip(names, pool.map(guarded, names)))

  def drop_failed(results):
    for level, result in results.items():
      if isinstance(result, Exception):
        errors[level] = _error_text(result)
        envs.pop(level).close()
        returns.pop(level, None)
        live.remove(level)

  try:
    results = call_all(lambda lv: envs[lv].reset(), live)
    drop_failed(results)
    if not live:
      return returns, errors, load_s
    blank = _blank(next(iter(results[lv] for lv in live)))
    obs = {lv: results[lv] if lv in live else blank for lv in levels}
    n = len(levels)
    index = {level: i for i, level in enumerate(levels)}
    state = policy.initial(batch_size=tf.constant(n))
    first = np.ones(n, bool)
    prev_reward = np.zeros(n, np.float32)
    prev_action = np.zeros(n, np.int64)
    running = np.zeros(n)
    while live and any(len(returns[lv]) < episodes for lv in live):
      actions, state = policy(
        _stack([obs[lv] for lv in levels]),
        first,
        prev_reward,
        prev_action,
        state,
      )
      steps = call_all(
        lambda lv, a=actions: envs[lv].step(a[index[lv] : index[lv] + 1]),
        live,
      )
      drop_failed(steps)
      first[:] = False
      prev_reward[:] = 0.0
      for level in live:
        i, step = index[level], steps[level]
        running[i] += step.rewards[0]
        first[i] = bool(step.terminated[0] or step.truncated[0])
        if first[i]:
          if len(returns[level]) < episodes:
            returns[level].append(float(running[i]))
          running[i] = 0.0
        # What came with the next observations: nothing after a reset.
        prev_reward[i] = 0.0 if first[i] else step.rewards[0]
        obs[level] = step.obs
      prev_action = np.where(first, 0, actions).astype(np.int64)
    return returns, errors, load_s
  finally:
    pool.shutdown()
    for env in envs.values():
      env.close()


def evaluate(
  path,
  levels,
  episodes,
  sample=False,
  parallel=0,
  log_dir=None,
  config=None,
  skipped=(),
):
  """`score_report` of the levels (and the run's settings); failed and
  `skipped` levels are rows with their error."""
  policy = Policy(path, sample)
  batch = parallel or len(levels) or 1
  returns, errors, load_s = {}, {}, 0.0
  for a in range(0, len(levels), batch):
    r, e, t = play(policy, levels[a : a + batch], episodes, log_dir, config)
    returns.update(r)
    errors.update(e)
    load_s += t
  stats = {}
  for level in list(levels) + list(skipped):
    row = {"level": dmlab30.level_path(level), "seed": level_seed(level)}
    if level in skipped:
      row.update(
        status="skipped",
        error=f"needs {dmlab30.DATASET} (--dataset_path)",
        mean_return=None,
        episodes=0,
      )
    elif level in errors:
      row.update(
        status="failed", error=errors[level], mean_return=None, episodes=0
      )
    else:
      r = returns[level]
      row.update(mean_return=float(np.mean(r)), episodes=len(r), returns=r)
    stats[level] = row
  report = dmlab30.score_report(stats)
  report.update(
    failed_levels=sorted(errors),
    skipped_levels=list(skipped),
    load_seconds=round(load_s, 1),
    saved_model=os.path.abspath(path),
    train_step=policy.train_step(),
    episodes_per_level=episodes,
    actions="sampled" if sample else "greedy",
    seed=SEED.value,
    num_action_repeats=NUM_ACTION_REPEATS.value,
  )
  return report


def log_dir_of_flags():
  if LOG_DIR.value:
    return LOG_DIR.value
  if OUTPUT.value:
    return os.path.join(
      os.path.dirname(os.path.abspath(OUTPUT.value)), "env_workers"
    )
  return None


def main(argv):
  del argv
  if EPISODES.value < 1:
    raise app.UsageError("--episodes must be >= 1")
  levels = test_levels(LEVELS.value)
  settings = dmlab_settings.from_flags()
  try:  # Before any env starts.
    levels, skipped = dmlab_settings.plan_levels(levels, settings)
  except dmlab30.DatasetMissingError as e:
    raise app.UsageError(str(e)) from None
  start = time.time()
  report = evaluate(
    SAVED_MODEL.value,
    levels,
    EPISODES.value,
    SAMPLE.value,
    max(0, PARALLEL.value),
    log_dir_of_flags(),
    dmlab_settings.lab_config(settings),
    skipped,
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
  bad = report["failed_levels"] + report["skipped_levels"]
  if bad:
    print(
      f"[evaluate_dmlab] incomplete: {len(report['failed_levels'])} "
      f"level(s) failed, {len(report['skipped_levels'])} skipped "
      f"({bad}); the mean is over {report['num_levels']} levels",
      flush=True,
    )
    if not ALLOW_INCOMPLETE.value:
      return 1
  return 0


if __name__ == "__main__":
  flags.mark_flag_as_required("saved_model")
  app.run(main)
