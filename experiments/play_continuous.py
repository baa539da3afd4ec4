"""Plays an exported complete SAC agent with plain TensorFlow + gymnasium.

    python experiments/play_continuous.py --saved_model=runs/.../saved_agent \
        --env=Pendulum-v1 --episodes=10

Imports nothing from ingraph_rl: it shows that the SavedModel stands alone.
Acts with the `action` signature, `explore=False` (tanh of the policy's
mean, deterministic), one gymnasium env, episode i seeded `seed + i`.
Prints one line per episode and ends with "mean_return <value>".
"""

import argparse

import gymnasium as gym
import numpy as np
import tensorflow as tf


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--saved_model", required=True)
  parser.add_argument("--env", default="Pendulum-v1")
  parser.add_argument("--episodes", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  act = tf.saved_model.load(args.saved_model).signatures["action"]
  env = gym.make(args.env)
  returns = []
  for episode in range(args.episodes):
    obs, _ = env.reset(seed=args.seed + episode)
    done, total = False, 0.0
    while not done:
      out = act(
        states=tf.constant(np.asarray(obs, np.float32)[None]),
        explore=tf.constant(False),
      )
      action = out["actions"].numpy()[0]
      obs, reward, terminated, truncated, _ = env.step(action)
      total += float(reward)
      done = terminated or truncated
    returns.append(total)
    print(f"episode {episode} return {total}", flush=True)
  print(f"mean_return {np.mean(returns)}")


if __name__ == "__main__":
  main()
