"""PPO experiment (CleanRL's ppo.py / ppo_atari.py / ppo_continuous_action.py
semantics, flags of CleanRL's names):

    python -m experiments.ppo                       # CartPole-v1 (embedded)
    python -m experiments.ppo --flagfile=experiments/flagfiles/ppo_pong.cfg
    python -m experiments.ppo \
        --flagfile=experiments/flagfiles/ppo_halfcheetah.cfg

Each iteration is TWO graph calls: `rollout` (num_envs x num_steps env
steps in a tf.while_loop, with in-graph observation normalization and
reward scaling where the preset asks) and `update` (GAE, then
update_epochs x num_minibatches Adam steps, target_kl early stop, all in
one call). Logs TensorBoard scalars with CleanRL's names under `--logdir`
(default `runs/{env}__ppo__{seed}__{time}`): charts/episodic_return,
charts/episodic_length, charts/SPS, charts/learning_rate,
losses/{policy_loss, value_loss, entropy, approx_kl, clipfrac,
explained_variance}, and charts/episodic_return_last100 (the mean of the
last 100 episodes, as the other experiments). Keeps checkpoints there (a
rerun with the same `--logdir` resumes), exports the complete agent as a
SavedModel (`saved_agent`: action, update, minibatch_step, get/set_weights,
get_train_step; not the env-stepping rollout) and ends with a
deterministic evaluation of the EXPORTED agent in a fresh process
(experiments/play_agent.py). Training stops at --total_timesteps or,
after the iteration that passes it, --max_train_seconds.

Flags are generated from `PPOSettings` (experiments/configs.py) and
`PPOConfig`; only the flags passed override the preset. The loop is
experiments/on_policy.py's (shared with experiments/trpo.py).
"""

from experiments import config_flags, configs, on_policy
from ingraph_rl.agents.ppo import PPOBuilder

# One flag per field of PPOSettings and PPOConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.PPO_CLASSES)

PPO = on_policy.Experiment(
  name="ppo",
  classes=configs.PPO_CLASSES,
  values=configs.ppo_values,
  config=configs.ppo_config,
  builder=PPOBuilder,
  losses=(
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "explained_variance",
  ),
  charts=("learning_rate",),
  progress=(
    ("policy_loss", "policy_loss", ".4f"),
    ("value_loss", "value_loss", ".4f"),
    ("approx_kl", "approx_kl", ".5f"),
    ("clipfrac", "clipfrac", ".3f"),
    ("epochs", "epochs", "d"),
  ),
)


def main(argv):
  del argv
  on_policy.main(PPO)


if __name__ == "__main__":
  config_flags.run(main)
