"""A CleanRL-style PyTorch PPO in one file: the peer `ppo_throughput` measures.

It follows CleanRL's `ppo_atari.py` and `ppo_continuous_action.py` step for
step (read from vwxyzjn/cleanrl; our own code): the same gymnasium envs and
wrappers in a `SyncVectorEnv`, the same networks with orthogonal init, Adam
(eps 1e-5) with a linearly annealed learning rate, a Python loop of
`num_steps` acts and env steps into preallocated tensors, GAE(lambda) as a
Python loop over time, then `update_epochs` x `num_minibatches` optimizer
steps on index-shuffled minibatches (advantages normalized per minibatch,
clipped surrogate, clipped value loss, entropy bonus, global-norm 0.5).

Two things differ from the scripts and say why: gymnasium 1.x renamed a few
wrappers (`GrayscaleObservation`, `FrameStackObservation`) and its vector
envs reset on the step *after* an episode ends unless told otherwise, so the
env is built with `AutoresetMode.SAME_STEP`, the gymnasium 0.29 behaviour
CleanRL's loop assumes. No TensorBoard writer (the loop's arithmetic is
unchanged; the benchmark times the training, not the logging).

`PPO(ATARI)` / `PPO(CONTINUOUS)`; `ppo.iteration()` runs one rollout and
one update and returns the CPU and wall seconds of its act, env and update
parts (the GAE counts to the update, as it runs in the update graph on our
side).
"""

import dataclasses
import random
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn, optim
from torch.distributions.categorical import Categorical
from torch.distributions.normal import Normal


@dataclasses.dataclass(frozen=True)
class Args:
  """CleanRL's PPO arguments (the same names and meanings)."""

  env_id: str
  total_timesteps: int
  learning_rate: float
  num_envs: int
  num_steps: int
  num_minibatches: int
  update_epochs: int
  clip_coef: float
  ent_coef: float
  anneal_lr: bool = True
  gamma: float = 0.99
  gae_lambda: float = 0.95
  norm_adv: bool = True
  clip_vloss: bool = True
  vf_coef: float = 0.5
  max_grad_norm: float = 0.5
  target_kl: float = None

  @property
  def batch_size(self):
    return self.num_envs * self.num_steps

  @property
  def minibatch_size(self):
    return self.batch_size // self.num_minibatches

  @property
  def num_iterations(self):
    return self.total_timesteps // self.batch_size


# `ppo_atari.py`'s defaults, on Pong.
ATARI = Args(
  env_id="PongNoFrameskip-v4",
  total_timesteps=10_000_000,
  learning_rate=2.5e-4,
  num_envs=8,
  num_steps=128,
  num_minibatches=4,
  update_epochs=4,
  clip_coef=0.1,
  ent_coef=0.01,
)
# `ppo_continuous_action.py`'s defaults, on HalfCheetah-v5.
CONTINUOUS = Args(
  env_id="HalfCheetah-v5",
  total_timesteps=1_000_000,
  learning_rate=3e-4,
  num_envs=1,
  num_steps=2048,
  num_minibatches=32,
  update_epochs=10,
  clip_coef=0.2,
  ent_coef=0.0,
)


# --- CleanRL's Atari wrappers (cleanrl_utils.atari_wrappers) ---------------


class NoopResetEnv(gym.Wrapper):
  """1..noop_max random no-ops after each reset."""

  def __init__(self, env, noop_max=30):
    super().__init__(env)
    self.noop_max = noop_max
    assert env.unwrapped.get_action_meanings()[0] == "NOOP"

  def reset(self, **kwargs):
    obs, info = self.env.reset(**kwargs)
    noops = self.unwrapped.np_random.integers(1, self.noop_max + 1)
    for _ in range(noops):
      obs, _, terminated, truncated, info = self.env.step(0)
      if terminated or truncated:
        obs, info = self.env.reset(**kwargs)
    return obs, info


class MaxAndSkipEnv(gym.Wrapper):
  """Repeats the action `skip` times; max-pools the last two frames."""

  def __init__(self, env, skip=4):
    super().__init__(env)
    self._skip = skip
    self._buffer = np.zeros((2, *env.observation_space.shape), np.uint8)

  def step(self, action):
    total = 0.0
    terminated = truncated = False
    info = {}
    for i in range(self._skip):
      obs, reward, terminated, truncated, info = self.env.step(action)
      if i == self._skip - 2:
        self._buffer[0] = obs
      if i == self._skip - 1:
        self._buffer[1] = obs
      total += float(reward)
      if terminated or truncated:
        break
    return self._buffer.max(axis=0), total, terminated, truncated, info


class EpisodicLifeEnv(gym.Wrapper):
  """A lost life ends the episode for the learner; the game goes on."""

  def __init__(self, env):
    super().__init__(env)
    self.lives = 0
    self.was_real_done = True

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    self.was_real_done = terminated or truncated
    lives = self.env.unwrapped.ale.lives()
    if 0 < lives < self.lives:
      terminated = True
    self.lives = lives
    return obs, reward, terminated, truncated, info

  def reset(self, **kwargs):
    if self.was_real_done:
      obs, info = self.env.reset(**kwargs)
    else:
      obs, _, _, _, info = self.env.step(0)
    self.lives = self.env.unwrapped.ale.lives()
    return obs, info


class FireResetEnv(gym.Wrapper):
  """Presses FIRE (then action 2) after a reset, for games that wait."""

  def __init__(self, env):
    super().__init__(env)
    assert env.unwrapped.get_action_meanings()[1] == "FIRE"

  def reset(self, **kwargs):
    self.env.reset(**kwargs)
    obs, _, terminated, truncated, _ = self.env.step(1)
    if terminated or truncated:
      self.env.reset(**kwargs)
    obs, _, terminated, truncated, info = self.env.step(2)
    if terminated or truncated:
      obs, info = self.env.reset(**kwargs)
    return obs, info


class ClipRewardEnv(gym.RewardWrapper):
  def reward(self, reward):
    return np.sign(float(reward))


def make_atari_env(env_id):
  import ale_py  # Registers the ALE envs with gymnasium.

  gym.register_envs(ale_py)

  def thunk():
    env = gym.make(env_id)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = NoopResetEnv(env, noop_max=30)
    env = MaxAndSkipEnv(env, skip=4)
    env = EpisodicLifeEnv(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
      env = FireResetEnv(env)
    env = ClipRewardEnv(env)
    env = gym.wrappers.ResizeObservation(env, (84, 84))
    env = gym.wrappers.GrayscaleObservation(env)
    return gym.wrappers.FrameStackObservation(env, 4)

  return thunk


def make_continuous_env(env_id, gamma):
  def thunk():
    env = gym.make(env_id)
    env = gym.wrappers.FlattenObservation(env)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.NormalizeObservation(env)
    env = gym.wrappers.TransformObservation(
      env, lambda obs: np.clip(obs, -10, 10), env.observation_space
    )
    env = gym.wrappers.NormalizeReward(env, gamma=gamma)
    return gym.wrappers.TransformReward(
      env, lambda reward: np.clip(reward, -10, 10)
    )

  return thunk


# --- the networks ------------------------------------------------------------


SQRT2 = float(np.sqrt(2))


def layer_init(layer, std=SQRT2, bias_const=0.0):
  torch.nn.init.orthogonal_(layer.weight, std)
  torch.nn.init.constant_(layer.bias, bias_const)
  return layer


class AtariAgent(nn.Module):
  """The Nature CNN torso, a policy and a value head."""

  def __init__(self, num_actions):
    super().__init__()
    self.network = nn.Sequential(
      layer_init(nn.Conv2d(4, 32, 8, stride=4)),
      nn.ReLU(),
      layer_init(nn.Conv2d(32, 64, 4, stride=2)),
      nn.ReLU(),
      layer_init(nn.Conv2d(64, 64, 3, stride=1)),
      nn.ReLU(),
      nn.Flatten(),
      layer_init(nn.Linear(64 * 7 * 7, 512)),
      nn.ReLU(),
    )
    self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
    self.critic = layer_init(nn.Linear(512, 1), std=1)

  def get_value(self, x):
    return self.critic(self.network(x / 255.0))

  def get_action_and_value(self, x, action=None):
    hidden = self.network(x / 255.0)
    probs = Categorical(logits=self.actor(hidden))
    if action is None:
      action = probs.sample()
    return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


class ContinuousAgent(nn.Module):
  """Separate 64x64 tanh MLPs; a state-independent log std."""

  def __init__(self, obs_dim, act_dim):
    super().__init__()
    self.critic = nn.Sequential(
      layer_init(nn.Linear(obs_dim, 64)),
      nn.Tanh(),
      layer_init(nn.Linear(64, 64)),
      nn.Tanh(),
      layer_init(nn.Linear(64, 1), std=1.0),
    )
    self.actor_mean = nn.Sequential(
      layer_init(nn.Linear(obs_dim, 64)),
      nn.Tanh(),
      layer_init(nn.Linear(64, 64)),
      nn.Tanh(),
      layer_init(nn.Linear(64, act_dim), std=0.01),
    )
    self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

  def get_value(self, x):
    return self.critic(x)

  def get_action_and_value(self, x, action=None):
    mean = self.actor_mean(x)
    std = torch.exp(self.actor_logstd.expand_as(mean))
    probs = Normal(mean, std)
    if action is None:
      action = probs.sample()
    return (
      action,
      probs.log_prob(action).sum(1),
      probs.entropy().sum(1),
      self.critic(x),
    )


# --- the training loop -------------------------------------------------------


class _Clock:
  """CPU and wall seconds spent per named part."""

  def __init__(self, parts):
    self.cpu = dict.fromkeys(parts, 0.0)
    self.wall = dict.fromkeys(parts, 0.0)
    self._part = None

  def start(self, part):
    self._part = part
    self._t = (time.process_time(), time.perf_counter())

  def stop(self):
    cpu, wall = self._t
    self.cpu[self._part] += time.process_time() - cpu
    self.wall[self._part] += time.perf_counter() - wall


class PPO:
  """CleanRL's PPO loop, one `iteration()` (rollout + update) per call."""

  def __init__(self, args, seed=1):
    self.args = args
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    atari = args is ATARI or "NoFrameskip" in args.env_id
    thunks = [
      make_atari_env(args.env_id)
      if atari
      else make_continuous_env(args.env_id, args.gamma)
      for _ in range(args.num_envs)
    ]
    self.envs = gym.vector.SyncVectorEnv(
      thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    space = self.envs.single_action_space
    if atari:
      self.agent = AtariAgent(space.n)
    else:
      obs_dim = int(np.prod(self.envs.single_observation_space.shape))
      self.agent = ContinuousAgent(obs_dim, int(np.prod(space.shape)))
    self.optimizer = optim.Adam(
      self.agent.parameters(), lr=args.learning_rate, eps=1e-5
    )
    shape = (args.num_steps, args.num_envs)
    obs_shape = self.envs.single_observation_space.shape
    self.obs = torch.zeros(shape + obs_shape)
    self.actions = torch.zeros(shape + space.shape)
    self.logprobs = torch.zeros(shape)
    self.rewards = torch.zeros(shape)
    self.dones = torch.zeros(shape)
    self.values = torch.zeros(shape)
    self.global_step = 0
    self.iterations = 0
    self.episode_returns = []
    next_obs, _ = self.envs.reset(seed=seed)
    self.next_obs = torch.Tensor(next_obs)
    self.next_done = torch.zeros(args.num_envs)
    self.losses = {}

  def iteration(self):
    """One rollout and one update; returns {"cpu": {part: s}, "wall":
    {part: s}} for the parts act, env and update."""
    args = self.args
    clock = _Clock(("act", "env", "update"))
    self.iterations += 1
    if args.anneal_lr:
      # CleanRL's schedule; past num_iterations it would go negative, so
      # a long benchmark wraps around rather than train backwards.
      it = (self.iterations - 1) % args.num_iterations
      frac = 1.0 - it / args.num_iterations
      self.optimizer.param_groups[0]["lr"] = frac * args.learning_rate

    for step in range(args.num_steps):
      clock.start("act")
      self.global_step += args.num_envs
      self.obs[step] = self.next_obs
      self.dones[step] = self.next_done
      with torch.no_grad():
        action, logprob, _, value = self.agent.get_action_and_value(
          self.next_obs
        )
        self.values[step] = value.flatten()
      self.actions[step] = action
      self.logprobs[step] = logprob
      clock.stop()

      clock.start("env")
      next_obs, reward, terminations, truncations, infos = self.envs.step(
        action.cpu().numpy()
      )
      next_done = np.logical_or(terminations, truncations)
      self.rewards[step] = torch.tensor(reward).view(-1)
      self.next_obs = torch.Tensor(next_obs)
      self.next_done = torch.Tensor(next_done)
      if "final_info" in infos and "episode" in infos["final_info"]:
        final = infos["final_info"]
        ended = final["_episode"]
        self.episode_returns += [float(r) for r in final["episode"]["r"][ended]]
      clock.stop()

    clock.start("update")
    self._update()
    clock.stop()
    return {"cpu": clock.cpu, "wall": clock.wall}

  def _update(self):
    args = self.args
    with torch.no_grad():
      next_value = self.agent.get_value(self.next_obs).reshape(1, -1)
      advantages = torch.zeros_like(self.rewards)
      lastgaelam = 0
      for t in reversed(range(args.num_steps)):
        if t == args.num_steps - 1:
          nextnonterminal = 1.0 - self.next_done
          nextvalues = next_value
        else:
          nextnonterminal = 1.0 - self.dones[t + 1]
          nextvalues = self.values[t + 1]
        delta = (
          self.rewards[t]
          + args.gamma * nextvalues * nextnonterminal
          - self.values[t]
        )
        advantages[t] = lastgaelam = (
          delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
        )
      returns = advantages + self.values

    obs_shape = self.envs.single_observation_space.shape
    act_shape = self.envs.single_action_space.shape
    b_obs = self.obs.reshape((-1,) + obs_shape)
    b_logprobs = self.logprobs.reshape(-1)
    b_actions = self.actions.reshape((-1,) + act_shape)
    if isinstance(self.agent, AtariAgent):
      b_actions = b_actions.long()
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = self.values.reshape(-1)

    b_inds = np.arange(args.batch_size)
    clipfracs = []
    for _ in range(args.update_epochs):
      np.random.shuffle(b_inds)
      for start in range(0, args.batch_size, args.minibatch_size):
        mb_inds = b_inds[start : start + args.minibatch_size]
        _, newlogprob, entropy, newvalue = self.agent.get_action_and_value(
          b_obs[mb_inds], b_actions[mb_inds]
        )
        logratio = newlogprob - b_logprobs[mb_inds]
        ratio = logratio.exp()
        with torch.no_grad():
          approx_kl = ((ratio - 1) - logratio).mean()
          clipfracs.append(
            ((ratio - 1.0).abs() > args.clip_coef).float().mean().item()
          )
        mb_advantages = b_advantages[mb_inds]
        if args.norm_adv:
          mb_advantages = (mb_advantages - mb_advantages.mean()) / (
            mb_advantages.std() + 1e-8
          )
        pg_loss1 = -mb_advantages * ratio
        pg_loss2 = -mb_advantages * torch.clamp(
          ratio, 1 - args.clip_coef, 1 + args.clip_coef
        )
        pg_loss = torch.max(pg_loss1, pg_loss2).mean()
        newvalue = newvalue.view(-1)
        if args.clip_vloss:
          v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
          v_clipped = b_values[mb_inds] + torch.clamp(
            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
          )
          v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
          v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
        else:
          v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
        entropy_loss = entropy.mean()
        loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.agent.parameters(), args.max_grad_norm)
        self.optimizer.step()
      if args.target_kl is not None and approx_kl > args.target_kl:
        break
    # What CleanRL logs after each update (its `.item()` syncs included).
    self.losses = {
      "policy_loss": pg_loss.item(),
      "value_loss": v_loss.item(),
      "entropy": entropy_loss.item(),
      "approx_kl": approx_kl.item(),
      "clipfrac": float(np.mean(clipfracs)),
    }

  def close(self):
    self.envs.close()
