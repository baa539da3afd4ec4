"""Plays an exported IMPALA policy with plain TensorFlow + gymnasium.

    python experiments/play_policy.py --saved_model=runs/.../saved_policy \
        --env=CartPole-v1 --episodes=20

Imports nothing from ingraph_rl for gymnasium and Atari ids: it shows (and
the tests check) that the SavedModel stands alone. Prints one line per
episode and ends with "mean_return <value>". Atari ids ("ALE/Pong-v5",
"atari:pong") use ale-py's vector env with the preprocessing the actors
used (84x84 gray, 4 stacked frames, channels last). DM Lab ids
("dmlab:<level>") step in ingraph_rl's env worker processes (DM Lab
crashes in a process that imported tensorflow, like this one), with the
actors' defaults (96x72 RGB, 4 action repeats, IMPALA's 9 actions); that
needs only ingraph_rl's env layer, which imports no tensorflow.
"""

import argparse
import os
import sys

import numpy as np
import tensorflow as tf


def make_atari_env(env_id, seed):
  import gymnasium as gym
  from ale_py.vector_env import AtariVectorEnv

  game = env_id.split(":")[-1].split("/")[-1].split("-")[0]
  game = "".join("_" + c.lower() if c.isupper() else c for c in game)
  sticky = 0.25 if env_id.endswith("-v5") else 0.0
  env = AtariVectorEnv(
    game.lstrip("_"),
    1,
    repeat_action_probability=sticky,
    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
  )

  def layout(obs):
    return np.transpose(obs, (0, 2, 3, 1))

  def reset():
    return layout(env.reset(seed=seed)[0])

  def step(action):
    obs, reward, term, trunc, _ = env.step(np.asarray(action))
    return layout(obs), float(reward[0]), bool(term[0] or trunc[0])

  return reset, step


def make_dmlab_env(env_id, seed, dataset_path=None):
  try:
    from ingraph_rl.environments import make_vector_env
  except ImportError:
    # Run as a script (e.g. `python -I`): the checkout this file is in.
    sys.path.insert(
      0, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    from ingraph_rl.environments import make_vector_env
  # In a worker process; the psychlab dataset as the Lab's datasetPath.
  config = {"datasetPath": dataset_path} if dataset_path else {}
  env = make_vector_env(env_id, 1, seed=seed, config=config)
  first = [True]

  def reset():
    # Seeded once; later episodes continue the env's seed stream.
    obs = env.reset(seed=seed if first[0] else None)
    first[0] = False
    return obs

  def step(action):
    result = env.step(np.asarray(action, np.int64).reshape(1))
    return (
      result.obs,
      float(result.rewards[0]),
      bool(result.terminated[0] or result.truncated[0]),
    )

  return reset, step


def make_gymnasium_env(env_id, seed):
  import gymnasium as gym

  env = gym.make(env_id)
  seeds = iter(range(seed, seed + 1_000_000))

  def reset():
    return np.asarray(env.reset(seed=next(seeds))[0])[None]

  def step(action):
    obs, reward, term, trunc, _ = env.step(int(action[0]))
    return np.asarray(obs)[None], float(reward), bool(term or trunc)

  return reset, step


# (predicate on the env id, maker), first match wins.
ENV_MAKERS = (
  (lambda env_id: env_id.startswith("dmlab:"), make_dmlab_env),
  (lambda env_id: env_id.startswith(("ALE/", "atari:")), make_atari_env),
  (lambda env_id: True, make_gymnasium_env),
)


def make_env(env_id, seed, dataset_path=None):
  """(reset() -> obs [1, ...] (a dict of them for Dict observations),
  step(action [1]) -> (obs, reward, done)); `dataset_path`: DM Lab's."""
  for matches, maker in ENV_MAKERS:
    if matches(env_id):
      if maker is make_dmlab_env:
        return maker(env_id, seed, dataset_path)
      return maker(env_id, seed)
  raise ValueError(f"no env maker for {env_id!r}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--saved_model", required=True)
  parser.add_argument("--env", default="CartPole-v1")
  parser.add_argument("--episodes", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--dataset_path",
    default=None,
    help="DM Lab: the psychlab image dataset (the Lab's datasetPath)",
  )
  parser.add_argument(
    "--sample",
    action="store_true",
    help="sample actions instead of the greedy ones",
  )
  args = parser.parse_args()
  policy = tf.saved_model.load(args.saved_model)
  act = policy.signatures["action"]
  initial = policy.signatures["get_initial_state"]
  # Older exports take no previous reward and action: feed what it takes.
  inputs = set(act.structured_input_signature[1])
  key = "action" if args.sample else "greedy_action"
  reset, step = make_env(args.env, args.seed, args.dataset_path)
  returns = []
  for episode in range(args.episodes):
    obs, first, done, total = reset(), True, False, 0.0
    reward, action = 0.0, 0  # What came with the first observation.
    state = initial(batch_size=tf.constant(1))
    while not done:
      feed = dict(first=tf.constant([first]), **state)
      if isinstance(obs, dict):  # Dict observations: one input per leaf.
        feed.update(
          {f"observation_{k}": tf.constant(v) for k, v in obs.items()}
        )
      else:
        feed["observation"] = tf.constant(obs)
      if "prev_reward" in inputs:
        feed["prev_reward"] = tf.constant([reward], tf.float32)
        feed["prev_action"] = tf.constant([action], tf.int64)
      out = act(**feed)
      state = {"state_c": out["state_c"], "state_h": out["state_h"]}
      action = int(out[key].numpy()[0])
      obs, reward, done = step(out[key].numpy())
      total += reward
      first = False
    returns.append(total)
    print(f"episode {episode} return {total}", flush=True)
  print(f"mean_return {np.mean(returns)}")


if __name__ == "__main__":
  main()
