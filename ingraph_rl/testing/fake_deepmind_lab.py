"""A fake `deepmind_lab` module: DM Lab's Python API without the game.

Same names and signatures as the real module (docs/users/python_api.md of
github.com/deepmind/lab): `Lab(level, observations, config={},
renderer='software', level_cache=None)` with `reset(episode=-1, seed=None)`,
`step(action, num_steps=1) -> float`, `observations()`, `is_running()`,
`action_spec()`, `observation_spec()`, `num_steps()`, `fps()`, `events()`,
`close()`, and `set_runfiles_path(path)`. It checks its inputs as strictly
as the real one should be used (int32 [7] actions within the spec, Python
int seeds, string configs, no stepping or observing once an episode ended),
so an adapter that passes here calls DM Lab correctly.

It also fails where the real one fails, and costs what it costs:

- Real DM Lab (OSMesa software rendering) segfaults in `Lab.reset` in any
  process that has imported tensorflow. The fake prints a fatal message to
  stderr and calls `os.abort()` (exit -6, SIGABRT) at `Lab(...)` and at
  `reset()` when "tensorflow" is in `sys.modules`.
- The hold-out `_test` levels refuse to load (`Lab(...)`) without the
  config `allowHoldOutLevels="true"`, and the two levels that read the
  Brady, Konkle & Oliva (2008) images (`DATASET_LEVELS`) fail at `reset`
  without `datasetPath`, with the real level scripts' messages (DM Lab's
  game_scripts/decorators/test_only.lua and
  game_scripts/datasets/brady_konkle_oliva2008.lua; "dummy" is their
  placeholder dataset). Both raise RuntimeError as the real module does.
- `observation_spec()` lists the deprecated `RGB_INTERLACED` and
  `RGBD_INTERLACED` too, and, like the real engine, prints
  "Using deprecated observation format: '<name>'" to stderr for each
  whenever their spec is read (listing the specs, or observing them).
- Levels print to stdout: maze levels (`MAZE_LEVEL_PREFIXES`) an ASCII map
  at every episode start, language levels `Instruction: <text>`.
- A maze level's first `reset` compiles its map: it sleeps
  `maze_load_seconds()` (env var FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS,
  default 0; the real levels take 20-120 s on 2 cores).
- A crash on demand, as real levels sometimes crash (a segfault): env var
  FAKE_DEEPMIND_LAB_ABORT="<level>@<frame>,..." (a level's short name)
  aborts the process at that frame of its first episode (0: at its first
  reset), after printing a fatal line to stderr.
- Every rendered frame spends `frame_cpu_seconds()` of this thread's CPU
  at 96 x 72 pixels, scaled by the pixel count (and every `step` call
  `STEP_CPU_SECONDS` more, 0 now). Calibrated to the real module in the
  benchmark's layout (benchmarks/impala_throughput.py, 2 actors x 2 envs,
  one env worker per env, 2 cores): real seekavoid_arena_01 with
  LP_NUM_THREADS=0 steps raw at 5,028 frames/s, ~0.40 ms of the 2 cores
  per frame; the fake spent 0.46 ms per frame there at 0.4 ms of spin
  (raw 4,354), so its spin is 0.34 ms. (One real env alone steps at
  3,450 frames/s, 0.29 ms a frame: the real engine's frames cost more
  CPU when several workers share the cores, which a fixed spin does not
  model; see benchmarks/README.md.) Env var
  FAKE_DEEPMIND_LAB_FRAME_CPU_SECONDS overrides the per-frame cost.

The "game": frames are pseudo-random from the episode seed and the actions;
each frame's reward depends on the action (forward +1, backward -1, strafe
right/left +-0.25, look right/left +-0.125 per 20 pixels, fire +0.5), so the
sum over `num_steps` frames is exact in float. An episode ends after the
level's number of frames (`LEVELS`; all DMLab-30 levels, train and test
names, have short ones), which the level options `episodeLengthFrames` and
`episodeLengthJitter` (+ seed % (jitter + 1)) override -- like real levels,
unrecognized config keys go to the level. Language levels ("language" in
the name) give an `INSTR` text; the others an empty one. Every Lab records
its `steps` [(action copy, num_steps)] and `reset_seeds`.

A subprocess imports it under the real name through a shim directory on
PYTHONPATH (`ingraph_rl.testing.deepmind_lab_shim`).

>>> lab = Lab("seekavoid_arena_01", ["RGB_INTERLEAVED"],
...           {"width": "16", "height": "12"})          # doctest: +SKIP
"""

import os
import sys
import time

import numpy as np

ACTION_SPEC = (
  {"name": "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME", "min": -512, "max": 512},
  {"name": "LOOK_DOWN_UP_PIXELS_PER_FRAME", "min": -512, "max": 512},
  {"name": "STRAFE_LEFT_RIGHT", "min": -1, "max": 1},
  {"name": "MOVE_BACK_FORWARD", "min": -1, "max": 1},
  {"name": "FIRE", "min": 0, "max": 1},
  {"name": "JUMP", "min": 0, "max": 1},
  {"name": "CROUCH", "min": 0, "max": 1},
)

# CPU per rendered frame at REFERENCE_PIXELS (96 x 72), scaled by pixels,
# and per `step` call (see the module docstring for the calibration).
FRAME_CPU_SECONDS = 0.34e-3
STEP_CPU_SECONDS = 0.0
REFERENCE_PIXELS = 96 * 72

# Every observation the real engine lists (its kObservationNames), then the
# level's own (INSTR here); the INTERLACED names are deprecated aliases.
ENGINE_OBSERVATIONS = (
  "RGB_INTERLEAVED",
  "RGBD_INTERLEAVED",
  "RGB",
  "RGBD",
  "BGR_INTERLEAVED",
  "BGRD_INTERLEAVED",
  "MAP_FRAME_NUMBER",
  "RGB_INTERLACED",
  "RGBD_INTERLACED",
)
DEPRECATED_OBSERVATIONS = ("RGB_INTERLACED", "RGBD_INTERLACED")

# What the real level scripts raise (Lua file:line, then the assert text).
HOLD_OUT_MESSAGE = (
  "game_scripts/decorators/test_only.lua:33: This level must only be used "
  "during evaluation. For training, use the *_train.lua version of the "
  "level. If you really want to use this level, add the setting "
  '"allowHoldOutLevels" = "true" explicitly'
)
DATASET_MESSAGE = (
  "game_scripts/datasets/brady_konkle_oliva2008.lua:37: \n Follow "
  "instructions to download datasets here: \n "
  '"data/brady_konkle_oliva2008/README.md"\n and update DATASET_PATH to '
  "point the data folder."
)
# The DMLab-30 levels whose factories read brady_konkle_oliva2008
# (game_scripts/factories/psychlab/{arbitrary_visuomotor_mapping,
# continuous_recognition}_factory.lua); sequential_comparison and
# visual_search draw their own stimuli.
DATASET_LEVELS = (
  "contributed/dmlab30/psychlab_arbitrary_visuomotor_mapping",
  "contributed/dmlab30/psychlab_continuous_recognition",
)
# Levels that generate (and print) a maze and compile its map at load.
MAZE_LEVEL_PREFIXES = ("explore_", "rooms_", "lasertag_", "skymaze_")


def _env_float(name, default):
  value = os.environ.get(name)
  return default if value in (None, "") else float(value)


def frame_cpu_seconds():
  """CPU per 96 x 72 frame (FAKE_DEEPMIND_LAB_FRAME_CPU_SECONDS)."""
  return _env_float("FAKE_DEEPMIND_LAB_FRAME_CPU_SECONDS", FRAME_CPU_SECONDS)


def maze_load_seconds():
  """A maze level's map compile time at its first reset
  (FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS, default 0)."""
  return _env_float("FAKE_DEEPMIND_LAB_MAZE_LOAD_SECONDS", 0.0)


def _abort_frame(level):
  """The frame FAKE_DEEPMIND_LAB_ABORT crashes `level` at, or None."""
  for item in os.environ.get("FAKE_DEEPMIND_LAB_ABORT", "").split(","):
    name, _, frame = item.strip().partition("@")
    if name and level.rsplit("/", 1)[-1] == name:
      return int(frame or 0)
  return None


def _crash(level, frame):
  sys.stdout.flush()
  sys.stderr.write(
    f"fake deepmind_lab: FATAL: level {level} crashed at frame {frame} "
    "(FAKE_DEEPMIND_LAB_ABORT)\n"
  )
  sys.stderr.flush()
  os.abort()


def is_maze_level(level):
  return level.rsplit("/", 1)[-1].startswith(MAZE_LEVEL_PREFIXES)


def is_hold_out_level(level):
  return level.endswith("_test") and level.startswith("contributed/dmlab30/")


_DMLAB30 = (
  "rooms_collect_good_objects_train",
  "rooms_collect_good_objects_test",
  "rooms_exploit_deferred_effects_train",
  "rooms_exploit_deferred_effects_test",
  "rooms_select_nonmatching_object",
  "rooms_watermaze",
  "rooms_keys_doors_puzzle",
  "language_select_described_object",
  "language_select_located_object",
  "language_execute_random_task",
  "language_answer_quantitative_question",
  "lasertag_one_opponent_small",
  "lasertag_three_opponents_small",
  "lasertag_one_opponent_large",
  "lasertag_three_opponents_large",
  "natlab_fixed_large_map",
  "natlab_varying_map_regrowth",
  "natlab_varying_map_randomized",
  "skymaze_irreversible_path_hard",
  "skymaze_irreversible_path_varied",
  "psychlab_arbitrary_visuomotor_mapping",
  "psychlab_continuous_recognition",
  "psychlab_sequential_comparison",
  "psychlab_visual_search",
  "explore_object_locations_small",
  "explore_object_locations_large",
  "explore_obstructed_goals_small",
  "explore_obstructed_goals_large",
  "explore_goal_locations_small",
  "explore_goal_locations_large",
  "explore_object_rewards_few",
  "explore_object_rewards_many",
)

# Level script -> episode length in frames. DMLab-30 levels get short,
# different lengths (24..52 frames), so envs of a level set end apart.
LEVELS = {
  "seekavoid_arena_01": 60,
  "tests/empty_room_test": 40,
  **{
    f"contributed/dmlab30/{name}": 24 + 4 * (i % 8)
    for i, name in enumerate(_DMLAB30)
  },
}
LEVELS["contributed/dmlab30/rooms_collect_good_objects_train"] = 48
LEVELS["contributed/dmlab30/rooms_collect_good_objects_test"] = 48
LEVELS["contributed/dmlab30/language_select_described_object"] = 36

INSTRUCTIONS = (
  "Pick the red hat.",
  "Find the blue ball.",
  "Go to the large green key.",
)

runfiles_path = None


def set_runfiles_path(path):
  global runfiles_path
  runfiles_path = path


def frame_reward(action):
  """The fake's reward of one frame under `action` (int [7])."""
  look, _, strafe, move, fire, _, _ = (int(a) for a in action)
  return move + 0.25 * strafe + 0.125 * look / 20 + 0.5 * fire


def _abort_if_tensorflow(where):
  """What the real module does next to TF is a segfault: die as hard."""
  if "tensorflow" in sys.modules:
    sys.stderr.write(
      f"fake deepmind_lab: FATAL: {where} in a process that has imported "
      "tensorflow. Real DeepMind Lab (OSMesa) segfaults in Lab.reset in "
      "any process with tensorflow loaded; run DM Lab in TF-free worker "
      "processes (ingraph_rl.environments.make_vector_env('dmlab:...')). "
      "Aborting.\n"
    )
    sys.stderr.flush()
    os.abort()


def _print_level_output(text):
  """What a level prints (Lua's print): straight to this process's stdout."""
  sys.stdout.write(text + "\n")
  sys.stdout.flush()


def _warn_if_deprecated(name):
  if name in DEPRECATED_OBSERVATIONS:
    sys.stderr.write(f"Using deprecated observation format: '{name}'\n")
    sys.stderr.flush()


def _spend_cpu_until(start, seconds):
  """Spins this thread until it has used `seconds` of CPU since `start`
  (a `time.thread_time()` reading): real work, like rendering."""
  end = start + seconds
  while time.thread_time() < end:
    pass


class Lab:
  """One fake DM Lab environment."""

  def __init__(
    self,
    level,
    observations,
    config=None,
    renderer="software",
    level_cache=None,
  ):
    _abort_if_tensorflow("Lab(...)")
    if not isinstance(level, str) or level not in LEVELS:
      raise ValueError(f"Failed to open level {level!r}")
    config = {} if config is None else config
    if not isinstance(config, dict) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
      raise TypeError(f"config must be a dict of str to str, got {config!r}")
    if renderer not in ("software", "hardware"):
      raise ValueError(f"Unknown renderer {renderer!r}")
    if is_hold_out_level(level) and config.get("allowHoldOutLevels") != "true":
      # The level's Lua init (at Lab(...)) asserts it.
      raise RuntimeError(f'Failed to init environment - "{HOLD_OUT_MESSAGE}"')
    self.level, self.config, self.renderer = level, dict(config), renderer
    self.level_cache = level_cache
    self.width = int(config.get("width", "320"))
    self.height = int(config.get("height", "240"))
    self.frame_cpu_seconds = frame_cpu_seconds() * (
      self.width * self.height / REFERENCE_PIXELS
    )
    names = ENGINE_OBSERVATIONS + ("INSTR",)
    if not isinstance(observations, list) or not all(
      isinstance(o, str) for o in observations
    ):
      raise TypeError(
        f"observations must be a list of str, got {observations!r}"
      )
    for o in observations:
      if o not in names:
        raise ValueError(f"Unknown observation '{o}'.")
    self.observation_names = list(observations)
    self._map_compiled = False
    self._abort_at = _abort_frame(level)
    self._length = int(config.get("episodeLengthFrames", LEVELS[level]))
    self._jitter = int(config.get("episodeLengthJitter", "0"))
    self.steps = []
    self.reset_seeds = []
    self._running = False
    self._closed = False
    self._frames = 0

  def _check_open(self):
    if self._closed:
      raise RuntimeError("Environment already closed")

  def reset(self, episode=-1, seed=None):
    _abort_if_tensorflow("Lab.reset")
    self._check_open()
    if not isinstance(episode, int) or isinstance(episode, bool):
      raise TypeError(f"episode must be an int, got {episode!r}")
    if seed is not None:
      # The real module parses a C int: numpy ints and bools do not pass.
      if type(seed) is not int or not 0 <= seed < 2**31:
        raise TypeError(
          f"seed must be a Python int in [0, 2^31), got "
          f"{type(seed).__name__} {seed!r}"
        )
    else:
      seed = int(np.random.default_rng().integers(0, 2**31 - 1))
    if self.level in DATASET_LEVELS and not self.config.get("datasetPath"):
      # The psychlab env's _init (at every episode start) loads the dataset.
      raise RuntimeError(f'Failed to start environment - "{DATASET_MESSAGE}"')
    if self._abort_at == 0:
      _crash(self.level, 0)
    if is_maze_level(self.level):
      _print_level_output(self._ascii_map(seed))
      if not self._map_compiled:
        time.sleep(maze_load_seconds())  # The map compiles (wall time).
        self._map_compiled = True
    start = time.thread_time()
    self.reset_seeds.append(seed)
    self._rng = np.random.default_rng(seed)
    self._frame = self._rng.integers(
      0, 256, (self.height, self.width, 3), dtype=np.uint8
    )
    self._instruction = (
      INSTRUCTIONS[seed % len(INSTRUCTIONS)] if "language" in self.level else ""
    )
    if self._instruction:
      _print_level_output(f"Instruction: {self._instruction}")
    self._episode_length = self._length + seed % (self._jitter + 1)
    self._frames = 0
    self._running = True
    _spend_cpu_until(start, self.frame_cpu_seconds)  # The first frame.

  def step(self, action, num_steps=1):
    self._check_open()
    if not self._running:
      raise RuntimeError("Environment in wrong status to advance")
    if (
      not isinstance(action, np.ndarray)
      or action.dtype != np.intc
      or action.shape != (len(ACTION_SPEC),)
    ):
      raise ValueError(
        f"action must be an np.intc array of shape [7], got "
        f"{type(action).__name__} "
        f"{getattr(action, 'dtype', None)} "
        f"{getattr(action, 'shape', None)}"
      )
    for value, spec in zip(action, ACTION_SPEC):
      if not spec["min"] <= value <= spec["max"]:
        raise ValueError(
          f"{spec['name']}={value} outside [{spec['min']}, {spec['max']}]"
        )
    if type(num_steps) is not int or num_steps < 1:
      raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
    self.steps.append((action.copy(), num_steps))
    _spend_cpu_until(time.thread_time(), STEP_CPU_SECONDS)
    shift = np.uint8(sum((i + 1) * int(a) for i, a in enumerate(action)) % 256)
    reward = 0.0
    for _ in range(num_steps):
      start = time.thread_time()
      noise = self._rng.integers(0, 8, self._frame.shape, dtype=np.uint8)
      self._frame = self._frame + noise + shift  # uint8, wraps around.
      reward += frame_reward(action)
      self._frames += 1
      if self._frames == self._abort_at:
        _crash(self.level, self._frames)
      _spend_cpu_until(start, self.frame_cpu_seconds)
      if self._frames >= self._episode_length:
        self._running = False
        break
    return reward

  def observations(self):
    self._check_open()
    if not self._running:
      raise RuntimeError("Environment in wrong status to call observations()")
    out = {}
    for name in self.observation_names:
      _warn_if_deprecated(name)  # The engine reads the spec of each.
      if name == "INSTR":
        out[name] = self._instruction
      elif name == "MAP_FRAME_NUMBER":
        out[name] = np.array([0.0])
      else:
        out[name] = self._image(name)
    return out

  def _image(self, name):
    frame = self._frame[..., ::-1] if name.startswith("BGR") else self._frame
    if "D" in name.split("_")[0]:  # RGBD, BGRD: a depth channel.
      depth = np.zeros(frame.shape[:2] + (1,), np.uint8)
      frame = np.concatenate([frame, depth], axis=-1)
    if "_" not in name:  # Planar: [channels, H, W].
      return np.ascontiguousarray(frame.transpose(2, 0, 1))
    return np.ascontiguousarray(frame)

  def _ascii_map(self, seed):
    rng = np.random.default_rng(seed)
    rows = ["*" * 9] + [
      "*" + "".join(rng.choice([" ", " ", "*"], 7)) + "*" for _ in range(5)
    ]
    rows.append("*" * 9)
    rows[1] = "*P" + rows[1][2:]
    rows[5] = rows[5][:7] + "G*"
    return "Generated maze with entity layer:\n" + "\n".join(rows)

  def is_running(self):
    return self._running and not self._closed

  def num_steps(self):
    return self._frames

  def fps(self):
    return int(self.config.get("fps", "60"))

  def events(self):
    return []

  def action_spec(self):
    return [dict(s) for s in ACTION_SPEC]

  def observation_spec(self):
    """Every observation's spec, as the real module lists them (which
    prints the deprecation warning of the INTERLACED ones)."""
    h, w = self.height, self.width
    specs = []
    for name in ENGINE_OBSERVATIONS:
      _warn_if_deprecated(name)
      if name == "MAP_FRAME_NUMBER":
        shape, dtype = (1,), np.float64
      else:
        channels = 4 if "D" in name.split("_")[0] else 3
        shape = (h, w, channels) if "_" in name else (channels, h, w)
        dtype = np.uint8
      specs.append({"name": name, "dtype": dtype, "shape": shape})
    specs.append({"name": "INSTR", "dtype": str, "shape": ()})
    return specs

  def close(self):
    self._check_open()
    self._closed = True
    self._running = False
