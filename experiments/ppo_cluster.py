"""PPO as one task of a synchronous distributed-TF cluster (RLlib's PPO):
`--job_name=ps|learner|actor`. experiments/launch_local.py starts a whole
cluster on loopback:

    python experiments/launch_local.py --agent=ppo --num_ps=1 \
        --num_actors=2 --logdir=runs/ppo_cluster -- --num_envs=4

Every actor task steps `--num_envs` envs and samples one fragment of
`--num_steps` steps per published weights version; the learner dequeues
one fragment of every actor (num_actors x num_envs x num_steps env steps),
runs the whole multi-epoch update in one graph call, and publishes
(`ingraph_rl/agents/ppo/cluster.py`). The flags are experiments/ppo.py's
(CleanRL's names, the CartPole preset) plus the cluster's; the learning
rate anneals over total_timesteps / (num_actors x num_envs x num_steps)
updates. The learner writes CleanRL's loss scalars to TensorBoard under
`--logdir`, checkpoints there (a restarted learner resumes), and ends
with the greedy return of its policy over `--eval_episodes` episodes.
"""

import dataclasses
import os
import sys
import time

import numpy as np
import tensorflow as tf

from experiments import config_flags, configs
from ingraph_rl.agents.ppo import PPOConfig
from ingraph_rl.agents.ppo.cluster import PPOClusterBuilder, run_sync_actor
from ingraph_rl.distributed import roles
from ingraph_rl.environments import make_vector_env
from ingraph_rl.runners.environments import make_actor_env
from ingraph_rl.utils.checkpoints import CheckpointSaver


@dataclasses.dataclass(frozen=True)
class PPOClusterSettings(configs.PPOSettings, configs.ClusterSettings):
  """experiments/ppo.py's settings and a cluster task's."""


CLASSES = (PPOClusterSettings, PPOConfig)
FLAG_HOLDERS = config_flags.define_flags(*CLASSES)
FRAMES = "ppo_learner/ppo/frames"
LOSSES = (
  "policy_loss",
  "value_loss",
  "entropy",
  "approx_kl",
  "clipfrac",
  "explained_variance",
)


def make_builder(settings, values, task):
  """The cluster builder and the env's observation space (from a probe)."""
  probe = make_vector_env(settings.env, 1, settings.seed)
  obs_space, action_space = probe.observation_space, probe.action_space
  probe.close()
  num_actors = len(task.cluster.get("actor", []))
  if num_actors < 1:
    raise roles.ClusterError("a PPO cluster needs at least one actor task")
  # The learning rate anneals over the updates the budget holds.
  per_update = dict(values, num_envs=num_actors * settings.num_envs)
  config = configs.ppo_config(per_update, action_space)
  return PPOClusterBuilder(config, num_actors, settings.num_envs), obs_space


def greedy_return(executor, env_id, episodes, seed):
  """Mean return of `episodes` episodes of the learner's policy, acting
  greedily (`get_actions(..., explore=False)`), one env in this process."""
  env = make_vector_env(env_id, 1, seed)
  obs, returns = env.reset(seed), []
  while len(returns) < episodes:
    actions = executor.execute("get_actions", obs, False)["actions"]
    step = env.step(actions.numpy())
    done = step.terminated | step.truncated
    returns += [float(r) for r in step.episode_returns[done]]
    obs = step.obs
  env.close()
  return float(np.mean(returns))


def learner_main(settings, task, builder, obs_space, wall_start):
  roles.sigterm_as_interrupt()  # Kubernetes stops pods with SIGTERM.
  roles.connect(task)
  learner = roles.RemoteLearner(task, builder, obs_space)
  run_dir = configs.run_directory(settings, "ppo_cluster")
  manager = CheckpointSaver(
    tf.train.Checkpoint(learner=learner.executor.module),
    os.path.join(run_dir, "checkpoints"),
  )
  resumed = manager.restore()
  # The agent's count of samples trained on: where a resumed run stands.
  done = int(learner.executor.variables()[FRAMES])
  if resumed:
    print(f"[ppo] resumed from {resumed} at env step {done}", flush=True)
  learner.publish()
  roles.log(
    task,
    f"variables on {learner.placement}; queue on {task.learner_device}; "
    f"{builder.num_actors} actors x {builder.envs_per_actor} envs x "
    f"{builder.config.num_steps} steps per update; logdir {run_dir}",
  )
  writer = tf.summary.create_file_writer(run_dir)
  clock = {"last": time.time(), "log": 0.0, "save": time.time()}

  def on_update(out, steps):
    now = time.time()
    sps = float(out["frames"]) / max(now - clock["last"], 1e-9)
    clock["last"] = now
    with writer.as_default(step=done + steps):
      tf.summary.scalar("charts/SPS", sps)
      tf.summary.scalar("charts/learning_rate", out["learning_rate"])
      for name in LOSSES:
        tf.summary.scalar(f"losses/{name}", out[name])
    if now - clock["log"] > settings.log_every_seconds:
      clock["log"] = now
      print(
        f"[ppo] env steps {done + steps}  updates {int(out['train_step'])}"
        f"  SPS {sps:.0f}  policy {float(out['policy_loss']):.4f}  value "
        f"{float(out['value_loss']):.4f}  kl {float(out['approx_kl']):.5f}",
        flush=True,
      )
    if now - clock["save"] > 60 * settings.checkpoint_every_minutes:
      manager.save(checkpoint_number=done + steps)
      clock["save"] = now

  start = time.time()
  steps, interrupted = learner.train(
    max(0, settings.total_timesteps - done),
    on_update,
    max_seconds=settings.max_train_seconds,
  )
  train_s = time.time() - start
  manager.save(checkpoint_number=done + steps)
  lines = [
    f"[ppo] {done + steps} env steps at {steps / max(train_s, 1e-9):.0f} SPS "
    f"(training {train_s:.1f} s); logs and checkpoints: {run_dir}"
  ]
  if settings.eval_episodes and not interrupted:
    mean = greedy_return(
      learner.executor,
      settings.env,
      settings.eval_episodes,
      settings.seed + 10_000,
    )
    with writer.as_default(step=done + steps):
      tf.summary.scalar("eval/episodic_return", mean)
    lines.append(
      f"[ppo] greedy return of the learner's policy: {mean:.1f} over "
      f"{settings.eval_episodes} episodes"
    )
  writer.flush()
  lines.append(f"[ppo] wall time {time.time() - wall_start:.1f} s")
  print("\n".join(lines), flush=True)
  return 0


def main(argv):
  del argv
  wall_start = time.time()
  values = config_flags.resolve(CLASSES, configs.PPO_CARTPOLE)
  config_flags.check_flags(CLASSES, values)
  settings = config_flags.make(PPOClusterSettings, values)
  task = roles.task_from_flags(
    settings.job_name, settings.task, settings.cluster
  )
  task.check_addresses(settings.allow_remote_hosts)
  if task.job == "replay" or task.num_replay_shards:
    raise roles.ClusterError(
      "PPO has no replay tasks (they are Ape-X's: experiments/apex.py)"
    )
  configs.configure_tensorflow(settings, role=task.job)
  if task.job == "ps":
    roles.run_ps(task)
    return 0
  builder, obs_space = make_builder(settings, values, task)
  if task.job == "actor":
    env = make_actor_env(
      settings.env, settings.num_envs, settings.seed + 1000 * (task.index + 1)
    )
    sys.exit(
      run_sync_actor(
        task, builder, env, seed=settings.seed + 1000 * (task.index + 1)
      )
    )
  return learner_main(settings, task, builder, obs_space, wall_start)


if __name__ == "__main__":
  config_flags.run(main)
