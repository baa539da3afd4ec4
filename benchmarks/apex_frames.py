"""Ape-X env frame rates (no flags here: `apex_throughput` runs them).

  raw          the ceiling: one thread per actor steps its own vector env
               with random actions in Python (no policy, no replay).
  actors_only  `ReplayDriver`'s actor and shard threads without a learner:
               every rollout is one graph call (epsilon-greedy Q, n-step
               transitions, initial priorities, the enqueue on a shard), the
               shards insert.
  end_to_end   the same plus the learner thread training (no
               `training_intensity` throttle: actors run as fast as they
               can beside it).
  cluster / single_process
               experiments/apex.py for `seconds` (its CartPole preset, or
               a preset's flags such as `PONG_CLUSTER_ARGS`), as a
               loopback cluster (launch_local: 2 replay shards, 2 actors,
               `num_ps` ps tasks) and as one process (threads), each in a
               subprocess; its rates are those of its progress lines
               from the first third of the run to the last
               (`steady_rates`).

Rates are env steps (agent steps; an ALE step is 4 frames) per second,
counted over a window after `warmup_s`.
"""

import dataclasses
import functools
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

from experiments import configs
from ingraph_rl.agents.apex import ApexBuilder, ApexConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.environments import is_atari_id, make_vector_env
from ingraph_rl.runners.replay_driver import ReplayDriver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A progress line of experiments/apex.py (experiments/progress.py): its
# counts and the seconds since training started.
PROGRESS_LINE = re.compile(
  r"^\[apex\] env steps +(\d+) +SPS +\d+ +updates +(\d+) .*? wall ([\d.]+)$",
  re.M,
)


def steady_rates(log_text):
  """{"env_steps_per_s", "updates_per_s"} from the first third of the
  progress lines to the last: the change of each count over the lines'
  times. (A line's own SPS counts whole rollouts per interval:
  Pong's 200-step rollouts every 2 s read in steps of 100 steps/s.)

  >>> steady_rates("\\n".join(
  ...   f"[apex] env steps {n}  SPS 0  updates {n // 8}  loss 0.1  wall {s}"
  ...   for s, n in ((0, 0), (2, 400), (4, 800), (6, 1400), (8, 1600))))
  {'env_steps_per_s': 200.0, 'updates_per_s': 25.0}
  """
  points = []
  for m in PROGRESS_LINE.finditer(log_text):
    steps, updates, t = m.groups()
    points.append((float(t), int(steps), int(updates)))
  if len(points) < 3:
    raise RuntimeError(f"too few progress lines ({len(points)})")
  (t0, s0, u0), (t1, s1, u1) = points[len(points) // 3], points[-1]
  return {
    "env_steps_per_s": (s1 - s0) / (t1 - t0),
    "updates_per_s": (u1 - u0) / (t1 - t0),
  }


@functools.lru_cache(maxsize=None)
def preset_envs(env):
  """Envs per actor of `env`'s preset: flagfiles/apex_pong.cfg's for an
  Atari game, apex_cartpole.cfg's (the embedded default's) otherwise."""
  flagfile = "apex_pong.cfg" if is_atari_id(env) else "apex_cartpole.cfg"
  values = configs.flagfile_values(
    configs.APEX_CLASSES, configs.APEX_CARTPOLE, flagfile
  )
  return values["num_envs_per_actor"]


@dataclasses.dataclass(frozen=True)
class Setup:
  env: str
  num_actors: int
  num_shards: int
  num_envs: int  # Per actor.
  actor_weights_dtype: str = "float32"  # ApexConfig.actor_weights_dtype.

  @property
  def name(self):
    env = self.env.replace("atari:", "")
    envs = self.envs_suffix("/e")
    return f"{env}/a{self.num_actors}/s{self.num_shards}{envs}"

  def envs_suffix(self, prefix):
    """ "" with the preset's envs per actor, else `prefix` + their number."""
    if self.num_envs == preset_envs(self.env):
      return ""
    return f"{prefix}{self.num_envs}"


# Pong's envs per actor beside the preset's (`preset_envs`), 2
# actors x the first of these that differs from it: the Q-network costs
# less per frame in larger batches. Keys ..._envs_<n>.
OTHER_PONG_ENVS = (32, 8)


def frame_setups(envs, quick):
  out = []
  for env in envs:
    num_envs = preset_envs(env)
    actors = [(2, 2)] if quick else [(1, 2), (2, 2), (4, 2), (2, 1)]
    out += [Setup(env, a, s, num_envs) for a, s in actors]
    if "pong" in env.lower() and not quick:
      other = next(n for n in OTHER_PONG_ENVS if n != num_envs)
      out.append(Setup(env, 2, 2, other))
  return out


def config_for(setup, num_actions):
  """The shipped flagfile's settings (flagfiles/apex_pong.cfg, the CartPole
  preset), with small shards (their size does not change the rates) and
  no throttle."""
  if is_atari_id(setup.env):
    return ApexConfig(
      num_actions=num_actions,
      actor_weights_dtype=setup.actor_weights_dtype,
      network=tuple(NATURE_DQN_SPEC),
      n_step=3,
      train_batch_size=64,
      learning_starts=500,
      buffer_size=5_000,
      rollout_fragment_length=25,
      learning_rate=1e-4,
      actor_weight_sync_steps=400,
    )
  return ApexConfig(
    num_actions=num_actions,
    actor_weights_dtype=setup.actor_weights_dtype,
    train_batch_size=128,
    learning_starts=1000,
    buffer_size=50_000,
    rollout_fragment_length=50,
    actor_weight_sync_steps=400,
  )


def make_env_factory(setup):
  def make_env(i):
    return make_vector_env(setup.env, setup.num_envs, seed=1000 * i)

  return make_env


def make_driver(setup):
  from experiments.configs import scaled_frames

  make_env = make_env_factory(setup)
  probe = make_env(0)
  num_actions = probe.action_space.num_categories
  probe.close()
  builder = ApexBuilder(
    config_for(setup, num_actions),
    preprocessor=scaled_frames if is_atari_id(setup.env) else None,
  )
  return ReplayDriver(
    builder,
    make_env,
    setup.num_actors,
    setup.num_shards,
    prefix=f"bench_{uuid.uuid4().hex}",
  )


def cpu_parts(setup, frames=1600):
  """CPU microseconds of the least an actor does per env step, each part
  alone in this thread: "env", stepping the setup's vector env with random
  actions (per env step); "q_pass_acting" and "q_pass_target", a pass of
  its Q-network per frame at the acting batch (num_envs) and at the
  rollout's target batch (num_envs x rollout_fragment_length). An actor
  runs both passes on every frame, and more besides (exploration, n-step
  windows, priorities, copies, the enqueue), so `cores / sum(parts)` env
  steps/s bounds its actors from above."""
  from benchmarks import common
  from experiments.configs import scaled_frames

  env = make_env_factory(setup)(0)
  try:
    obs = env.reset()
    step = common.random_stepper(env, 0)
    calls = max(2, frames // setup.num_envs)
    step(2)  # Warm-up.
    out = {"env": common.cpu_per(lambda: step(calls), calls * setup.num_envs)}
    config = config_for(setup, env.action_space.num_categories)
    builder = ApexBuilder(
      config,
      preprocessor=scaled_frames if is_atari_id(setup.env) else None,
    )
    # An actor's own passes (its weights' dtype); its env is not stepped.
    names = builder.queue_names(f"parts_{uuid.uuid4().hex}", 1)
    actor = builder.make_actor(env, names, 0, 1).build()
    fragment = setup.num_envs * config.rollout_fragment_length
    for part, batch in (
      ("q_pass_acting", setup.num_envs),
      ("q_pass_target", fragment),
    ):
      states = np.resize(obs, (batch,) + obs.shape[1:])
      actor.execute("get_actions", states, False)  # Warm-up.
      calls = max(2, frames // batch)

      def run(states=states, calls=calls):
        for _ in range(calls):
          actor.execute("get_actions", states, False)

      out[part] = common.cpu_per(run, calls * batch)
    return {part: cpu * 1e6 for part, (cpu, _) in out.items()}
  finally:
    env.close()


def raw_rate(setup, seconds, warmup_s):
  """Env steps/s of `num_actors` threads stepping random actions."""
  envs = [make_env_factory(setup)(i) for i in range(setup.num_actors)]
  steps = [0] * len(envs)
  stop = threading.Event()

  def loop(i, env):
    rng = np.random.default_rng(i)
    n = env.action_space.num_categories
    env.reset()
    while not stop.is_set():
      env.step(rng.integers(0, n, env.num_envs))
      steps[i] += env.num_envs

  threads = [
    threading.Thread(target=loop, args=(i, env), daemon=True)
    for i, env in enumerate(envs)
  ]
  for t in threads:
    t.start()
  try:
    return _window(lambda: sum(steps), seconds, warmup_s)
  finally:
    stop.set()
    for t in threads:
      t.join()
    for env in envs:
      env.close()


def _window(count, seconds, warmup_s):
  time.sleep(warmup_s)
  c0, t0 = count(), time.monotonic()
  time.sleep(seconds)
  return (count() - c0) / (time.monotonic() - t0)


def actors_only_rate(driver, seconds, warmup_s):
  """Env steps/s of the driver's actors and shards, no learner."""
  driver.start()
  try:
    return {
      "env_steps_per_s": _window(
        lambda: driver.totals.env_steps, seconds, warmup_s
      )
    }
  finally:
    driver.stop()


def end_to_end_rate(driver, seconds, warmup_s):
  """Env steps/s and updates/s with the learner training beside the
  actors (the window starts after `warmup_s` AND the first update)."""
  marks = []

  def on_update(out, env_steps):
    marks.append((time.monotonic(), env_steps, int(out["train_step"])))

  start = time.monotonic()
  try:
    driver.run(1 << 62, on_update=on_update, max_seconds=warmup_s + seconds)
  finally:
    driver.stop()
  begin = start + warmup_s
  window = [m for m in marks if m[0] >= begin] or marks[-2:]
  (t0, s0, u0), (t1, s1, u1) = window[0], window[-1]
  dt = max(t1 - t0, 1e-9)
  return {"env_steps_per_s": (s1 - s0) / dt, "updates_per_s": (u1 - u0) / dt}


# apex_pong.cfg with shards of 20k transitions (the flagfile's 50k take
# 5.6 GB) and learning from 2k per shard, so training starts in seconds.
PONG_CLUSTER_ARGS = (
  "--flagfile=experiments/flagfiles/apex_pong.cfg",
  "--buffer_size=20000",
  "--learning_starts=2000",
)


def experiment_rate(cluster, seconds, log_every_s=2.0, num_ps=1, args=()):
  """experiments/apex.py for `seconds` of training (its CartPole preset;
  `args`: flags before the run's own, e.g. `PONG_CLUSTER_ARGS`), as a
  loopback cluster (`num_ps` ps, 2 shards, 2 actors) or one process; its
  `steady_rates`."""
  with tempfile.TemporaryDirectory() as logdir:
    task_args = [
      *args,
      f"--max_train_seconds={seconds}",
      "--eval_episodes=0",
      f"--log_every_seconds={log_every_s}",
      "--total_env_steps=100000000",
      f"--logdir={logdir}",
    ]
    if cluster:
      argv = [
        os.path.join(ROOT, "experiments", "launch_local.py"),
        "--agent=apex",
        f"--num_ps={num_ps}",
        "--num_actors=2",
        "--num_replay_shards=2",
        f"--logdir={logdir}",
        "--",
        *task_args,
      ]
    else:
      argv = ["-m", "experiments.apex", *task_args]
    single_log = os.path.join(logdir, "single.log")
    with open(single_log, "w") as err:
      subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        check=True,
        timeout=seconds + 240,
        stdout=subprocess.DEVNULL,
        stderr=err,
      )
    log = (
      os.path.join(logdir, "logs", "learner-0.log") if cluster else single_log
    )
    with open(log) as f:
      return steady_rates(f.read())
