"""Plays an exported complete agent (export.export_agent, e.g. PPO's or
SAC's) with plain TensorFlow + gymnasium, deterministically (`explore=
False`: the argmax, a Gaussian policy's mean clipped to the action bounds,
SAC's squashed mean).

    python experiments/play_agent.py --saved_model=runs/.../saved_agent \
        --env=CartPole-v1 --episodes=20

Imports nothing from ingraph_rl: the SavedModel stands alone (its
`action` signature normalizes observations itself where the agent did).
Atari ids use play_policy.py's ale-py env. Prints one line per episode and
ends with "mean_return <value>".
"""

import argparse
import os
import sys

import numpy as np
import tensorflow as tf


def make_gymnasium_env(env_id, seed):
  import gymnasium as gym

  env = gym.make(env_id)
  seeds = iter(range(seed, seed + 1_000_000))
  box = isinstance(env.action_space, gym.spaces.Box)

  def reset():
    return np.asarray(env.reset(seed=next(seeds))[0])[None]

  def step(action):
    if box:
      a = np.clip(action[0], env.action_space.low, env.action_space.high)
    else:
      a = int(action[0])
    obs, reward, term, trunc, _ = env.step(a)
    return np.asarray(obs)[None], float(reward), bool(term or trunc)

  return reset, step


def make_env(env_id, seed):
  if env_id.startswith(("ALE/", "atari:")):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from play_policy import make_atari_env

    return make_atari_env(env_id, seed)
  return make_gymnasium_env(env_id, seed)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--saved_model", required=True)
  parser.add_argument("--env", default="CartPole-v1")
  parser.add_argument("--episodes", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  agent = tf.saved_model.load(args.saved_model)
  act = agent.signatures["action"]
  inputs = act.structured_input_signature[1]
  # PPO's agent names its observations so, SAC's (and DQN's) `states`.
  name = "observations" if "observations" in inputs else "states"
  dtype = inputs[name].dtype
  reset, step = make_env(args.env, args.seed)
  returns = []
  for episode in range(args.episodes):
    obs, done, total = reset(), False, 0.0
    while not done:
      out = act(**{name: tf.constant(obs, dtype)}, explore=tf.constant(False))
      obs, reward, done = step(out["actions"].numpy())
      total += reward
    returns.append(total)
    print(f"episode {episode} return {total}", flush=True)
  print(f"mean_return {np.mean(returns)}")


if __name__ == "__main__":
  main()
