r"""SAC on HalfCheetah-v5: our in-graph training loop against a CleanRL-style
PyTorch SAC, and against the limit the update alone sets.

Both sides run CleanRL's `sac_continuous_action.py` settings: 1 env,
256x256 actor and Qs, batch 256, one update per env step (critic step;
every 2nd step two actor and temperature steps), Polyak targets every
step, past `learning_starts` (both fill their memories first, untimed).

Cases, interleaved within every repetition (rotating which goes first):
  ours        the agent's `train(steps)`: act, update, env step and store
              (the env step beside the update), all `steps` env steps in
              ONE graph call;
  torch       a faithful CleanRL-style SAC written here (`CleanRLSAC`):
              gymnasium SyncVectorEnv, NumPy replay, a Python loop with
              one forward for the action and three optimizer steps per
              env step;
  update      the update alone: `steps` calls of our `update` API folded
              into one tf.function loop (no per-call overhead), beside
              `steps` raw env steps with random actions. Its limit is
              1 / (update time + env step time) per env step: the two
              one after the other (ours overlaps them, so may pass 1).

Ratios: halfcheetah_env_steps_per_s_over_cleanrl_style_torch (ours / torch)
and halfcheetah_in_graph_over_update_limit (ours / the limit).

    python -m benchmarks.sac_throughput            # the measurement
    python -m benchmarks.sac_throughput --quick    # smoke run, < 60 s idle

Writes benchmarks/results/sac_throughput.json (and .png without --quick).
"""

import os
import time

import numpy as np
from absl import app, flags

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF loads.

_QUICK = flags.DEFINE_bool("quick", False, "Smoke run (< 60 s idle).")
_REPS = flags.DEFINE_integer("reps", 0, "Repetitions (0: 1 quick, else 5).")
_STEPS = flags.DEFINE_integer("steps", 0, "Env steps per rep (0: auto).")

ENV_ID = "HalfCheetah-v5"
HIDDEN, BATCH, GAMMA, TAU = 256, 256, 0.99, 0.005
POLICY_LR, Q_LR, POLICY_FREQUENCY = 3e-4, 1e-3, 2


class CleanRLSAC:
  """CleanRL's sac_continuous_action.py, its loop as a method: same
  networks, optimizers, replay layout and update order."""

  def __init__(self, learning_starts, buffer_size, seed=0):
    import gymnasium as gym
    import torch
    from torch import nn

    torch.manual_seed(seed)
    self.torch, self.F = torch, nn.functional
    self.envs = gym.vector.SyncVectorEnv(
      [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(ENV_ID))]
    )
    self.envs.single_action_space.seed(seed)
    obs_dim = self.envs.single_observation_space.shape[0]
    act_space = self.envs.single_action_space
    act_dim = act_space.shape[0]

    def q_net():
      return nn.Sequential(
        nn.Linear(obs_dim + act_dim, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, 1),
      )

    self.qf1, self.qf2 = q_net(), q_net()
    self.qf1_target, self.qf2_target = q_net(), q_net()
    self.qf1_target.load_state_dict(self.qf1.state_dict())
    self.qf2_target.load_state_dict(self.qf2.state_dict())
    self.trunk = nn.Sequential(
      nn.Linear(obs_dim, HIDDEN),
      nn.ReLU(),
      nn.Linear(HIDDEN, HIDDEN),
      nn.ReLU(),
    )
    self.fc_mean, self.fc_logstd = (
      nn.Linear(HIDDEN, act_dim),
      nn.Linear(HIDDEN, act_dim),
    )
    actor_params = (
      list(self.trunk.parameters())
      + list(self.fc_mean.parameters())
      + list(self.fc_logstd.parameters())
    )
    self.scale = torch.tensor((act_space.high - act_space.low) / 2.0)
    self.bias = torch.tensor((act_space.high + act_space.low) / 2.0)
    self.q_optimizer = torch.optim.Adam(
      list(self.qf1.parameters()) + list(self.qf2.parameters()), lr=Q_LR
    )
    self.actor_optimizer = torch.optim.Adam(actor_params, lr=POLICY_LR)
    self.target_entropy = -float(act_dim)
    self.log_alpha = torch.zeros(1, requires_grad=True)
    self.alpha = 1.0
    self.a_optimizer = torch.optim.Adam([self.log_alpha], lr=Q_LR)
    self.learning_starts = learning_starts
    self.size, self.pos, self.capacity = 0, 0, buffer_size
    self.rb = {
      "obs": np.zeros((buffer_size, obs_dim), np.float32),
      "next_obs": np.zeros((buffer_size, obs_dim), np.float32),
      "actions": np.zeros((buffer_size, act_dim), np.float32),
      "rewards": np.zeros(buffer_size, np.float32),
      "dones": np.zeros(buffer_size, np.float32),
    }
    self.obs, _ = self.envs.reset(seed=seed)
    self.global_step = 0

  def get_action(self, x):
    torch = self.torch
    h = self.trunk(x)
    mean = self.fc_mean(h)
    log_std = torch.tanh(self.fc_logstd(h))
    log_std = -5 + 0.5 * (2 - -5) * (log_std + 1)
    normal = torch.distributions.Normal(mean, log_std.exp())
    x_t = normal.rsample()
    y_t = torch.tanh(x_t)
    log_prob = normal.log_prob(x_t)
    log_prob -= torch.log(self.scale * (1 - y_t.pow(2)) + 1e-6)
    return y_t * self.scale + self.bias, log_prob.sum(1, keepdim=True)

  def sample(self):
    torch = self.torch
    idx = np.random.randint(0, self.size, size=BATCH)
    return {k: torch.from_numpy(v[idx]) for k, v in self.rb.items()}

  def run(self, steps):
    torch = self.torch
    for _ in range(steps):
      if self.global_step < self.learning_starts:
        actions = np.array([self.envs.single_action_space.sample()])
      else:
        actions, _ = self.get_action(torch.Tensor(self.obs))
        actions = actions.detach().numpy()
      next_obs, rewards, terms, truncs, infos = self.envs.step(actions)
      real_next = next_obs.copy()
      if truncs[0] and "final_obs" in infos:
        real_next[0] = infos["final_obs"][0]
      i = self.pos
      self.rb["obs"][i], self.rb["next_obs"][i] = self.obs[0], real_next[0]
      self.rb["actions"][i], self.rb["rewards"][i] = actions[0], rewards[0]
      self.rb["dones"][i] = terms[0]
      self.pos, self.size = (
        (i + 1) % self.capacity,
        min(self.size + 1, self.capacity),
      )
      self.obs = next_obs
      if self.global_step > self.learning_starts:
        self.update()
      self.global_step += 1

  def update(self):
    torch, F = self.torch, self.F
    d = self.sample()
    with torch.no_grad():
      next_a, next_logp = self.get_action(d["next_obs"])
      x = torch.cat([d["next_obs"], next_a], 1)
      min_q = torch.min(self.qf1_target(x), self.qf2_target(x))
      target = d["rewards"] + (1 - d["dones"]) * GAMMA * (
        min_q - self.alpha * next_logp
      ).view(-1)
    x = torch.cat([d["obs"], d["actions"]], 1)
    qf_loss = F.mse_loss(self.qf1(x).view(-1), target) + F.mse_loss(
      self.qf2(x).view(-1), target
    )
    self.q_optimizer.zero_grad()
    qf_loss.backward()
    self.q_optimizer.step()
    if self.global_step % POLICY_FREQUENCY == 0:
      for _ in range(POLICY_FREQUENCY):
        pi, logp = self.get_action(d["obs"])
        x = torch.cat([d["obs"], pi], 1)
        actor_loss = (
          self.alpha * logp - torch.min(self.qf1(x), self.qf2(x))
        ).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        with torch.no_grad():
          _, logp = self.get_action(d["obs"])
        alpha_loss = (
          -self.log_alpha.exp() * (logp + self.target_entropy)
        ).mean()
        self.a_optimizer.zero_grad()
        alpha_loss.backward()
        self.a_optimizer.step()
        self.alpha = self.log_alpha.exp().item()
    with torch.no_grad():
      for net, tgt in (
        (self.qf1, self.qf1_target),
        (self.qf2, self.qf2_target),
      ):
        for p, tp in zip(net.parameters(), tgt.parameters()):
          tp.data.copy_(TAU * p.data + (1 - TAU) * tp.data)


class Ours:
  """Our SAC agent with the same settings, its in-graph loop."""

  def __init__(self, learning_starts, buffer_size, seed=0):
    import tensorflow as tf

    from ingraph_rl.agents.sac import SACBuilder, SACConfig
    from ingraph_rl.environments import make_vector_env

    self.env = make_vector_env(ENV_ID, 1, seed)
    config = SACConfig.for_env(
      self.env,
      hidden_units=HIDDEN,
      batch_size=BATCH,
      buffer_size=buffer_size,
      learning_starts=learning_starts,
      gamma=GAMMA,
      tau=TAU,
      policy_lr=POLICY_LR,
      q_lr=Q_LR,
      policy_frequency=POLICY_FREQUENCY,
      seed=seed,
    )
    start = time.perf_counter()
    self.executor = SACBuilder(config).make_agent(env=self.env).build()
    self.build_s = time.perf_counter() - start
    self.executor.execute("reset_env", seed)
    update = self.executor.function("update")

    @tf.function(autograph=False)
    def updates(n):
      def body(i):
        with tf.control_dependencies(tf.nest.flatten(update())):
          return i + 1

      return tf.while_loop(lambda i: i < n, body, [tf.constant(0)])

    self.updates = updates

  def run(self, steps):
    while steps > 0:
      n = min(steps, 1000)
      self.executor.execute("train", n)
      steps -= n

  def run_updates(self, steps):
    self.updates(tf_constant(steps))


def tf_constant(x):
  import tensorflow as tf

  return tf.constant(x)


def raw_env_steps(env, steps, rng):
  low, high = env.action_space.low, env.action_space.high
  for _ in range(steps):
    env.step(
      rng.uniform(low, high, size=(1,) + env.action_space.shape).astype(
        np.float32
      )
    )


def main(argv):
  del argv
  import torch

  quick = _QUICK.value
  reps = _REPS.value or (1 if quick else 5)
  steps = _STEPS.value or (100 if quick else 1000)
  learning_starts = 300 if quick else 5000
  buffer_size = 100_000
  threads = common.configure_threads(torch_threads=1, tf_intra_op=1)
  load_start = os.getloadavg()
  ours = Ours(learning_starts, buffer_size)
  peer = CleanRLSAC(learning_starts, buffer_size)
  # Fill both memories past learning_starts, untimed.
  ours.run(learning_starts + 1)
  peer.run(learning_starts + 1)
  ours.run_updates(2)  # Traces the update loop.
  rng = np.random.default_rng(0)
  from ingraph_rl.environments import make_vector_env

  raw_env = make_vector_env(ENV_ID, 1, 1)
  raw_env.reset(seed=1)
  records = common.interleave(
    {
      "ours": lambda: ours.run(steps),
      "torch": lambda: peer.run(steps),
      "update": lambda: ours.run_updates(steps),
      "env": lambda: raw_env_steps(raw_env, steps, rng),
    },
    reps,
    warmup=1,
  )
  per_step = {k: [r["wall_s"] / steps for r in v] for k, v in records.items()}
  sps = {k: [1.0 / t for t in v] for k, v in per_step.items()}
  limit = [1.0 / (u + e) for u, e in zip(per_step["update"], per_step["env"])]
  rows = [
    common.Row(
      "halfcheetah", "env_steps_per_s", "ours", common.Stat.of(sps["ours"])
    ),
    common.Row(
      "halfcheetah",
      "env_steps_per_s",
      "cleanrl_style_torch",
      common.Stat.of(sps["torch"]),
    ),
    common.Row(
      "halfcheetah", "update_limit_steps_per_s", "1/s", common.Stat.of(limit)
    ),
    common.Row(
      "halfcheetah",
      "update_alone_ms",
      "ms",
      common.Stat.of(per_step["update"]).scaled(1e3),
    ),
    common.Row(
      "halfcheetah",
      "env_step_alone_ms",
      "ms",
      common.Stat.of(per_step["env"]).scaled(1e3),
    ),
  ]
  ratios = {
    "halfcheetah_env_steps_per_s_over_cleanrl_style_torch": common.paired_ratio(
      sps["ours"], sps["torch"]
    ),
    "halfcheetah_in_graph_over_update_limit": common.paired_ratio(
      sps["ours"], limit
    ),
  }
  config = {
    "env": ENV_ID,
    "cleanrl_settings": dict(
      hidden=HIDDEN,
      batch_size=BATCH,
      gamma=GAMMA,
      tau=TAU,
      policy_lr=POLICY_LR,
      q_lr=Q_LR,
      policy_frequency=POLICY_FREQUENCY,
      learning_starts=learning_starts,
      buffer_size=buffer_size,
    ),
    "env_steps_per_rep": steps,
    "update_limit": "1 / (update alone + env step alone) per env step; the "
    "update alone is `steps` calls of our `update` API in one tf.function "
    "loop (no per-call overhead), the env step raw gymnasium steps",
    "threads": threads,
    "our_build_s": round(ours.build_s, 2),
    "load_average_start": load_start,
    "load_average_end": os.getloadavg(),
    "torch_version": torch.__version__,
  }
  path = common.write_results("sac_throughput", quick, config, rows, ratios)
  if not quick:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    values = [np.median(sps["ours"]), np.median(sps["torch"]), np.median(limit)]
    ax.bar(["in-graph loop", "CleanRL-style torch", "update limit"], values)
    ax.set_ylabel("env steps/s")
    ax.set_title("SAC on HalfCheetah-v5 (batch 256, 256x256)")
    common.save_plot(fig, "sac_throughput")
  ratio = ratios["halfcheetah_env_steps_per_s_over_cleanrl_style_torch"]
  common.print_table(
    "sac_throughput",
    rows,
    ratios,
    f"sac_throughput: in-graph {np.median(sps['ours']):.0f} env steps/s, "
    f"{ratio:.2f}x the CleanRL-style torch SAC, "
    f"{ratios['halfcheetah_in_graph_over_update_limit']:.2f} of the "
    "update limit",
    quick,
    path,
  )


if __name__ == "__main__":
  app.run(main)
