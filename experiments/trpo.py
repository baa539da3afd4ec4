"""TRPO experiment (Schulman et al. 2015, OpenAI baselines' settings; the
rollout, GAE and flags of experiments/ppo.py, CleanRL's names):

    python -m experiments.trpo                      # CartPole-v1 (embedded)
    python -m experiments.trpo \
        --flagfile=experiments/flagfiles/trpo_hopper.cfg

Each iteration is TWO graph calls: `rollout` (num_envs x num_steps env
steps in a tf.while_loop, in-graph observation normalization where the
preset asks) and `update` (GAE; the policy's natural-gradient step,
conjugate gradient on Fisher-vector products scaled to --max_kl, and its
backtracking line search; then --value_epochs x --num_minibatches Adam
steps of the value function, all in one call). PPO's clipped-surrogate
flags (--clip_coef, --ent_coef, --vf_coef, --max_grad_norm, --target_kl,
--update_epochs, --learning_rate) are unused here.

Logs charts/episodic_return, charts/episodic_length, charts/SPS,
charts/episodic_return_last100, charts/line_search_fraction (the step
fraction accepted, 0: rejected) and losses/{policy_loss, value_loss,
entropy, quadratic_kl, explained_variance} under `--logdir` (default
`runs/{env}__trpo__{seed}__{time}`), keeps checkpoints there (a rerun
with the same `--logdir` resumes), exports the complete agent as a
SavedModel and ends with a deterministic evaluation of the EXPORTED agent
in a fresh process, as experiments/ppo.py (experiments/on_policy.py).

Flags are generated from `PPOSettings` and `TRPOConfig`.
"""

from experiments import config_flags, configs, on_policy
from ingraph_rl.agents.ppo.trpo_builder import TRPOBuilder
from ingraph_rl.agents.ppo.trpo_config import TRPOConfig

# One flag per field of PPOSettings and TRPOConfig.
FLAG_HOLDERS = config_flags.define_flags(*configs.TRPO_CLASSES)

TRPO = on_policy.Experiment(
  name="trpo",
  classes=configs.TRPO_CLASSES,
  values=configs.trpo_values,
  config=lambda values, space: configs.ppo_config(values, space, TRPOConfig),
  builder=TRPOBuilder,
  losses=(
    "policy_loss",
    "value_loss",
    "entropy",
    "quadratic_kl",
    "explained_variance",
  ),
  charts=("line_search_fraction",),
  progress=(
    ("policy_loss", "policy_loss", ".4f"),
    ("value_loss", "value_loss", ".4f"),
    ("kl", "quadratic_kl", ".5f"),
    ("step fraction", "line_search_fraction", ".3f"),
  ),
)


def main(argv):
  del argv
  on_policy.main(TRPO)


if __name__ == "__main__":
  config_flags.run(main)
