"""DeepMind Lab through its `deepmind_lab` Python module, behind `VectorEnv`.

Real DM Lab (OSMesa software rendering) segfaults in `Lab.reset` in any
process that has imported tensorflow, so `DMLabVectorEnv` runs only in
processes without it: `make_vector_env("dmlab:<level>", n)` puts it in
worker processes that never import tensorflow or torch (`WorkerVectorEnv`,
one process per env by default), and `DMLabVectorEnv` itself refuses to be
made where tensorflow is loaded.

>>> env = make_vector_env("dmlab:contributed/dmlab30/rooms_watermaze",
...                       num_envs=4, seed=0)           # doctest: +SKIP
>>> env.reset().shape                                   # doctest: +SKIP
(4, 72, 96, 3)

`deepmind_lab` is not on PyPI: it is built from github.com/deepmind/lab
with Bazel. It is imported when a `DMLabVectorEnv` is made (never when
ingraph_rl is imported); without it that raises `EnvironmentNotAvailableError`
(an `ImportError`) that says how to install it.
"""

import importlib
import sys

import numpy as np

from ingraph_rl.environments.vector_env import (
  EpisodeStatistics,
  StepResult,
  VectorEnv,
)
from ingraph_rl.errors import EnvironmentNotAvailableError
from ingraph_rl.spaces import Dict, IntBox, TextBox

DMLAB_PREFIX = "dmlab:"

# The 7 entries of a DM Lab action vector, in `Lab.action_spec()` order.
ACTION_NAMES = (
  "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME",
  "LOOK_DOWN_UP_PIXELS_PER_FRAME",
  "STRAFE_LEFT_RIGHT",
  "MOVE_BACK_FORWARD",
  "FIRE",
  "JUMP",
  "CROUCH",
)

# Discrete action i -> 7-int action vector (look left/right, look down/up,
# strafe left/right, move back/forward, fire, jump, crouch).
# IMPALA's 9-action set (scalable_agent's DEFAULT_ACTION_SET): the default.
IMPALA_ACTION_SET = (
  (0, 0, 0, 1, 0, 0, 0),  # Forward.
  (0, 0, 0, -1, 0, 0, 0),  # Backward.
  (0, 0, -1, 0, 0, 0, 0),  # Strafe left.
  (0, 0, 1, 0, 0, 0, 0),  # Strafe right.
  (-20, 0, 0, 0, 0, 0, 0),  # Look left.
  (20, 0, 0, 0, 0, 0, 0),  # Look right.
  (-20, 0, 0, 1, 0, 0, 0),  # Forward + look left.
  (20, 0, 0, 1, 0, 0, 0),  # Forward + look right.
  (0, 0, 0, 0, 1, 0, 0),  # Fire.
)
DEFAULT_ACTION_SET = IMPALA_ACTION_SET

# The same 8 moves after a no-op instead of FIRE (for levels where firing
# does nothing).
NOOP_ACTION_SET = ((0, 0, 0, 0, 0, 0, 0),) + IMPALA_ACTION_SET[:-1]

DEFAULT_WIDTH, DEFAULT_HEIGHT = 96, 72

INSTALL_HINT = (
  "DeepMind Lab's Python module `deepmind_lab` is not importable. It is "
  "not on PyPI; build it from https://github.com/deepmind/lab with Bazel "
  "(see docs/users/build.md there), e.g.\n"
  "  git clone https://github.com/deepmind/lab && cd lab\n"
  "  bazel build -c opt --python_version=PY3 "
  "//python/pip_package:build_pip_package\n"
  "  ./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg\n"
  "  pip install /tmp/dmlab_pkg/deepmind_lab-*.whl\n"
  "or put a built `deepmind_lab` (bazel-bin/... with its runfiles) on "
  "PYTHONPATH. Tests use a fake module through `lab_module=`."
)

TF_LOADED_MESSAGE = (
  "DMLabVectorEnv cannot run in this process: it has imported tensorflow, "
  "and real DeepMind Lab (OSMesa software rendering) segfaults in "
  "Lab.reset in any process with tensorflow loaded. Use "
  "ingraph_rl.environments.make_vector_env('dmlab:<level>', num_envs, ...), "
  "which steps DM Lab in worker processes that never import tensorflow "
  "(WorkerVectorEnv; envs_per_worker=k groups k envs per process)."
)


def is_dmlab_id(env_id):
  """True for "dmlab:<level>" ids."""
  return env_id.startswith(DMLAB_PREFIX)


def dmlab_level_name(env_id):
  """DM Lab level (script path under game_scripts/levels) of an env id.

  >>> dmlab_level_name("dmlab:seekavoid_arena_01")
  'seekavoid_arena_01'
  >>> dmlab_level_name("dmlab:contributed/dmlab30/explore_goal_locations_small")
  'contributed/dmlab30/explore_goal_locations_small'
  """
  name = env_id[len(DMLAB_PREFIX) :] if is_dmlab_id(env_id) else env_id
  if (
    not name
    or name != name.strip()
    or name.startswith("/")
    or name.endswith("/")
  ):
    raise ValueError(
      f"bad DM Lab level name {name!r} in {env_id!r}; expected "
      "e.g. 'dmlab:seekavoid_arena_01' or "
      "'dmlab:contributed/dmlab30/rooms_watermaze'"
    )
  return name


def import_deepmind_lab():
  """The `deepmind_lab` module, or `EnvironmentNotAvailableError`."""
  try:
    return importlib.import_module("deepmind_lab")
  except ImportError as e:
    raise EnvironmentNotAvailableError(
      f"{INSTALL_HINT}\n(import failed with: {e})", name="deepmind_lab"
    ) from e


def _config_value(value):
  # DM Lab takes strings only; its Lua levels spell booleans 'true'/'false'.
  if isinstance(value, (bool, np.bool_)):
    return "true" if value else "false"
  return str(value)


class DMLabVectorEnv(VectorEnv):
  """`num_envs` DeepMind Lab environments, stepped in turn in THIS process.

  This process must not have imported tensorflow (see `TF_LOADED_MESSAGE`):
  `make_vector_env("dmlab:...")` runs it in worker processes.

  Observations: the `RGB_INTERLEAVED` frames, uint8 [H, W, 3] with
  `IntBox(256, (H, W, 3), dtype=uint8)`; H x W is 72 x 96 unless `height` /
  `width` (or `config["height"]` / `config["width"]`) say otherwise. With
  `instructions=True` (language levels, level sets) the observation space
  is `Dict(RGB_INTERLEAVED=IntBox(256, (H, W, 3), uint8), INSTR=TextBox())`
  and observations are dicts {"RGB_INTERLEAVED": uint8 [N, H, W, 3],
  "INSTR": str [N] (object array; "" on levels without instructions)}.

  Actions: `IntBox(len(action_set))`; action i is the 7-int vector
  `action_set[i]` (`DEFAULT_ACTION_SET`, IMPALA's: forward, backward,
  strafe left / right, look left / right by 20 pixels per frame, forward +
  look left / right, fire; `NOOP_ACTION_SET` has a no-op instead of fire),
  repeated for `num_action_repeats` frames by one
  `Lab.step(vector, num_steps=num_action_repeats)`, whose summed reward is
  the step's reward. Steps, episode lengths and `max_episode_steps` count
  these agent steps, not frames.

  Seeding: environment i draws the seed of each of its episodes from a
  random stream seeded with `seed + i` (`Lab.reset(seed=...)`), so a run is
  reproducible and environments differ. `reset(seed)` restarts the streams
  from `seed`; `reset()` continues them (the first one uses `seed`).

  Episode ends (same-step autoreset): when `Lab.is_running()` is False
  after a step, the episode is `terminated` (as in IMPALA: a DM Lab episode
  ends when the level ends it, usually at its time limit) and the
  environment is reset in the same step. DM Lab has no observation of an
  ended episode, so `final_obs` there is the last observation it gave (the
  one the ended step acted on; every leaf, INSTR too); a learner does not
  bootstrap from it. With `max_episode_steps`, an episode still running
  after that many steps is `truncated` (`final_obs` is its real last
  observation) and reset.

  Args:
    level: level name, e.g. "seekavoid_arena_01" or
      "contributed/dmlab30/rooms_collect_good_objects_train" (a "dmlab:"
      prefix is stripped), or a sequence of `num_envs` names: env i runs
      `level[i]` (e.g. a DMLab-30 set; use `instructions=True` there, so
      every env has the same observation space).
    num_envs: number of `Lab` instances.
    seed: base seed (int >= 0), or None for unseeded episodes.
    num_action_repeats: frames per agent step (`num_steps` of `Lab.step`).
    width, height: frame size in pixels (default 96 x 72).
    instructions: also observe `INSTR` (Dict observations, see above).
    config: more `Lab` settings (e.g. {"datasetPath": ..., "logLevel":
      "WARN", "allowHoldOutLevels": True}); values become strings.
    renderer: "software" (OSMesa) or "hardware" (EGL / GLX).
    action_set: sequence of 7-int action vectors, one per discrete action.
    max_episode_steps: optional time limit in agent steps (truncation).
    preload: start each env's first episode now (DM Lab compiles a
      level's map at its first reset: the slow part of loading a level),
      so that construction is the whole load; the first `reset()` (with
      no seed or the constructor's) then returns those episodes' first
      observations. Env workers preload (`make_vector_env`).
    lab_module: an object with DM Lab's module API (`Lab`, ...), or the
      name of a module to import for it; None imports `deepmind_lab`.
    runfiles_path: passed to `deepmind_lab.set_runfiles_path` first when
      given (a Bazel-built module outside its runfiles tree).
    **lab_kwargs: more keyword arguments of `Lab` (e.g. `level_cache`).
  """

  def __init__(
    self,
    level,
    num_envs,
    seed=0,
    num_action_repeats=4,
    width=None,
    height=None,
    instructions=False,
    config=None,
    renderer="software",
    action_set=DEFAULT_ACTION_SET,
    max_episode_steps=None,
    preload=False,
    lab_module=None,
    runfiles_path=None,
    **lab_kwargs,
  ):
    if "tensorflow" in sys.modules:
      raise RuntimeError(TF_LOADED_MESSAGE)
    self.num_envs = int(num_envs)
    if self.num_envs < 1:
      raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if isinstance(level, str):
      self.levels = (dmlab_level_name(level),) * self.num_envs
    else:
      self.levels = tuple(dmlab_level_name(name) for name in level)
      if len(self.levels) != self.num_envs:
        raise ValueError(
          f"got {len(self.levels)} levels for {num_envs} "
          f"envs; give one level or one per env"
        )
    # The level of all envs, or None for a level set.
    self.level = self.levels[0] if len(set(self.levels)) == 1 else None
    if seed is not None and (int(seed) != seed or seed < 0):
      raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")
    self._seed = None if seed is None else int(seed)
    self.num_action_repeats = int(num_action_repeats)
    if self.num_action_repeats < 1:
      raise ValueError(
        f"num_action_repeats must be >= 1, got {num_action_repeats}"
      )
    if max_episode_steps is not None and int(max_episode_steps) < 1:
      raise ValueError(
        f"max_episode_steps must be >= 1 or None, got {max_episode_steps}"
      )
    self.max_episode_steps = (
      None if max_episode_steps is None else int(max_episode_steps)
    )
    if renderer not in ("software", "hardware"):
      raise ValueError(
        f"renderer must be 'software' or 'hardware', got {renderer!r}"
      )
    self.config = self._make_config(config, width, height)
    self.width = int(self.config["width"])
    self.height = int(self.config["height"])
    self._action_table = np.asarray(action_set, np.intc)
    if (
      self._action_table.ndim != 2
      or self._action_table.shape[1] != len(ACTION_NAMES)
      or not len(self._action_table)
    ):
      raise ValueError(
        f"action_set must be a non-empty sequence of "
        f"{len(ACTION_NAMES)}-int vectors, got shape "
        f"{self._action_table.shape}"
      )
    self._action_table.setflags(write=False)
    self.with_instructions = bool(instructions)
    self.observation_names = ["RGB_INTERLEAVED"] + (
      ["INSTR"] if self.with_instructions else []
    )

    if lab_module is None:
      module = import_deepmind_lab()
    elif isinstance(lab_module, str):
      module = importlib.import_module(lab_module)
    else:
      module = lab_module
    if runfiles_path is not None:
      module.set_runfiles_path(runfiles_path)
    self._labs = []
    try:
      for name in self.levels:
        self._labs.append(
          module.Lab(
            name,
            list(self.observation_names),
            config=dict(self.config),
            renderer=renderer,
            **lab_kwargs,
          )
        )
      self._check_specs(self._labs[0])
    except BaseException:
      self.close()
      raise

    self.frame_space = IntBox(256, (self.height, self.width, 3), dtype=np.uint8)
    self.observation_space = (
      Dict(RGB_INTERLEAVED=self.frame_space, INSTR=TextBox())
      if self.with_instructions
      else self.frame_space
    )
    self.action_space = IntBox(len(self._action_table))
    self._rngs = None  # Per-env streams of episode seeds.
    self._obs = None  # Latest (frames, texts); None before reset.
    self._episode_steps = np.zeros(self.num_envs, np.int64)
    self._stats = EpisodeStatistics(self.num_envs)
    self._closed = False
    self._preloaded = None  # The preloaded first observation.
    if preload:
      try:
        self._preloaded = self.reset()
      except BaseException:
        self.close()
        raise

  @staticmethod
  def _make_config(config, width, height):
    config = {str(k): _config_value(v) for k, v in (config or {}).items()}
    for key, value, default in (
      ("width", width, DEFAULT_WIDTH),
      ("height", height, DEFAULT_HEIGHT),
    ):
      if value is None:
        config.setdefault(key, str(default))
      elif key in config and config[key] != str(int(value)):
        raise ValueError(
          f"{key}={value} conflicts with config[{key!r}]={config[key]!r}"
        )
      else:
        config[key] = str(int(value))
      if not config[key].isdigit() or int(config[key]) < 1:
        raise ValueError(
          f"config[{key!r}] must be a positive int, got {config[key]!r}"
        )
    return config

  def _check_specs(self, lab):
    """Fails early on a module whose action spec does not fit our actions.
    (Not `observation_spec()`: listing it makes the real engine print a
    deprecation warning for RGB_INTERLACED and RGBD_INTERLACED; the frame
    shape is checked on the first observation instead.)"""
    spec = lab.action_spec()
    names = tuple(s["name"] for s in spec)
    if names != ACTION_NAMES:
      raise ValueError(
        f"unexpected DM Lab action spec {names}; expected {ACTION_NAMES}"
      )
    low = np.array([s["min"] for s in spec])
    high = np.array([s["max"] for s in spec])
    bad = np.flatnonzero(
      ((self._action_table < low) | (self._action_table > high)).any(axis=1)
    )
    if bad.size:
      raise ValueError(
        f"action_set entries {bad.tolist()} are outside the "
        f"DM Lab action spec (min {low.tolist()}, max "
        f"{high.tolist()})"
      )

  @property
  def labs(self):
    """The `Lab` instances (e.g. for `events()`); do not step them."""
    return tuple(self._labs)

  def _seed_streams(self, seed):
    self._rngs = [
      np.random.default_rng(None if seed is None else seed + i)
      for i in range(self.num_envs)
    ]

  def _start_episode(self, i):
    # DM Lab takes a Python int seed (a C int): draw one in [0, 2^31 - 1).
    episode_seed = int(self._rngs[i].integers(0, 2**31 - 1))
    self._labs[i].reset(seed=episode_seed)
    self._episode_steps[i] = 0

  def _observe(self, i, frames, texts):
    """Writes env i's current observation into row i of frames (and
    texts)."""
    observed = self._labs[i].observations()
    frame = observed["RGB_INTERLEAVED"]
    if frame.shape != frames.shape[1:]:
      raise ValueError(
        f"DM Lab level {self.levels[i]!r} gave RGB_INTERLEAVED frames of "
        f"shape {frame.shape}, expected {frames.shape[1:]} from the config"
      )
    frames[i] = frame
    if texts is not None:
      text = observed["INSTR"]
      texts[i] = text.decode("utf-8") if isinstance(text, bytes) else str(text)

  def _new_buffers(self):
    frames = np.empty((self.num_envs,) + self.frame_space.shape, np.uint8)
    texts = np.empty(self.num_envs, object) if self.with_instructions else None
    return frames, texts

  def _as_obs(self, frames, texts):
    if texts is None:
      return frames
    return {"INSTR": texts, "RGB_INTERLEAVED": frames}

  def reset(self, seed=None):
    self._check_open()
    preloaded, self._preloaded = self._preloaded, None
    if preloaded is not None and seed in (None, self._seed):
      return preloaded  # Those episodes have not been stepped yet.
    if seed is not None or self._rngs is None:
      if seed is not None and (int(seed) != seed or seed < 0):
        raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")
      self._seed_streams(self._seed if seed is None else int(seed))
    frames, texts = self._new_buffers()
    for i in range(self.num_envs):
      self._start_episode(i)
      self._observe(i, frames, texts)
    self._obs = frames, texts
    self._stats.reset()
    return self._as_obs(frames, texts)

  def step(self, actions):
    self._check_open()
    self._preloaded = None
    if self._obs is None:
      raise RuntimeError("DMLabVectorEnv: call reset() before step()")
    actions = np.asarray(actions)
    if actions.shape != (self.num_envs,) or actions.dtype.kind not in "iu":
      raise ValueError(
        f"expected {self.num_envs} integer actions, got "
        f"shape {actions.shape} dtype {actions.dtype}"
      )
    if np.any(actions < 0) or np.any(actions >= len(self._action_table)):
      raise ValueError(
        f"actions must be in [0, {len(self._action_table)}), "
        f"got {actions.tolist()}"
      )
    vectors = self._action_table[actions]  # [N, 7] intc, C-contiguous.
    frames, texts = self._new_buffers()
    last_frames, last_texts = self._obs
    rewards = np.zeros(self.num_envs, np.float64)
    terminated = np.zeros(self.num_envs, np.bool_)
    truncated = np.zeros(self.num_envs, np.bool_)
    finals = {}  # i -> (frame, text).
    self._episode_steps += 1
    for i, lab in enumerate(self._labs):
      rewards[i] = lab.step(vectors[i], num_steps=self.num_action_repeats)
      if lab.is_running():
        self._observe(i, frames, texts)
        if (
          self.max_episode_steps is None
          or self._episode_steps[i] < self.max_episode_steps
        ):
          continue
        truncated[i] = True
        finals[i] = frames[i].copy(), None if texts is None else texts[i]
      else:
        # Lab has no observation once an episode ended: the last one stands
        # in as final_obs (its value is never bootstrapped from).
        terminated[i] = True
        finals[i] = (last_frames[i], None if texts is None else last_texts[i])
      self._start_episode(i)
      self._observe(i, frames, texts)
    final_frames, final_texts = frames, texts
    if finals:
      final_frames = frames.copy()
      final_texts = None if texts is None else texts.copy()
      for i, (frame, text) in finals.items():
        final_frames[i] = frame
        if texts is not None:
          final_texts[i] = text
    self._obs = frames, texts
    returns, lengths = self._stats.update(rewards, terminated | truncated)
    return StepResult(
      self._as_obs(frames, texts),
      rewards.astype(np.float32),
      terminated,
      truncated,
      self._as_obs(final_frames, final_texts),
      returns,
      lengths,
    )

  def _check_open(self):
    if self._closed:
      raise RuntimeError("DMLabVectorEnv is closed")

  def close(self):
    labs, self._labs = self._labs, []
    self._closed = True
    for lab in labs:
      lab.close()
