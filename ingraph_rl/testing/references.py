"""Independent references for tests: plain NumPy versions of the papers'
formulas (the DQN loss, n-step transitions, a Q-network's forward pass, a
2-D convolution, bfloat16 rounding), an env wrapper that records what an
agent saw and a helper that feeds those steps to an agent's `observe`."""

import math

import numpy as np

from ingraph_rl.environments import VectorEnv


class RecordingEnv(VectorEnv):
  """Records what the agent saw since the last reset: its observations and
  every step (the torch build passes step the env too)."""

  def __init__(self, env):
    self.env = env
    self.num_envs = env.num_envs
    self.observation_space = env.observation_space
    self.action_space = env.action_space
    self.reset_obs, self.steps = None, []

  def reset(self, seed=None):
    obs = self.env.reset(seed)
    self.reset_obs, self.steps = obs.copy(), []
    return obs

  def step(self, actions):
    result = self.env.step(actions)
    self.steps.append(
      (
        np.array(actions),
        result._replace(
          obs=result.obs.copy(), final_obs=result.final_obs.copy()
        ),
      )
    )
    return result

  def close(self):
    self.env.close()


def observe_recorded(executor, reset_obs, steps, truncated=True):
  """Feeds recorded vector steps (`RecordingEnv.steps`: (actions,
  StepResult) pairs, from the observations `reset_obs` on) to the agent
  `executor`'s `observe` API, one call a step, as its in-graph loop would
  store them. `truncated=False` for an `observe` without that argument
  (1-step replay). Returns the observations after the last step."""
  obs = reset_obs
  for actions, step in steps:
    executor.execute(
      "observe",
      obs,
      actions.astype(np.int64),
      step.rewards,
      step.final_obs,
      step.terminated,
      *((step.truncated,) if truncated else ()),
    )
    obs = step.obs
  return obs


def recompute_n_step(env, n, discount):
  """The n-step transitions of the recorded steps, straight from the
  definition, in the order the memory should hold them: by the step at
  which each becomes complete, then env, then start step."""
  obs = env.reset_obs
  states, actions, rewards, final, term, trunc = [], [], [], [], [], []
  for a, step in env.steps:
    states.append(obs)
    actions.append(a)
    rewards.append(step.rewards)
    final.append(step.final_obs)
    term.append(step.terminated)
    trunc.append(step.truncated)
    obs = step.obs
  num_t = len(states)
  rows = []
  for i in range(env.num_envs):
    for t in range(num_t):
      m = next(
        (
          k + 1
          for k in range(n)
          if t + k < num_t and (term[t + k][i] or trunc[t + k][i])
        ),
        n,
      )
      last = t + m - 1
      if last >= num_t:
        continue
      rows.append(
        (
          last,
          i,
          t,
          dict(
            states=states[t][i],
            actions=actions[t][i],
            rewards=sum(
              discount**k * float(rewards[t + k][i]) for k in range(m)
            ),
            next_states=final[last][i],
            terminals=bool(term[last][i]),
            discounts=discount**m,
          ),
        )
      )
  rows.sort(key=lambda r: r[:3])
  return (
    {k: np.array([r[3][k] for r in rows]) for k in rows[0][3]},
    np.array(term).sum(),
    np.array(trunc & ~np.array(term)).sum(),
  )


def np_bfloat16(x):
  """float32 values rounded to bfloat16 (nearest, ties to even): the top
  16 bits of the float32 pattern, as float32.

  >>> np_bfloat16([1 + 2**-7, 1 + 2**-8, 1 + 3 * 2**-8]).tolist()
  [1.0078125, 1.0, 1.015625]
  """
  bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
  return bits.astype(np.uint32).view(np.float32)


def numpy_dqn_loss(
  q,
  a,
  r,
  t,
  nq_target,
  nq_online,
  w,
  discount,
  n_step,
  double_q,
  huber_delta,
  discounts=None,
):
  delta = huber_delta
  best = np.argmax(nq_online if double_q else nq_target, axis=-1)
  bootstrap = discount**n_step if discounts is None else discounts
  target = r + (1 - t) * bootstrap * nq_target[np.arange(len(a)), best]
  td = target - q[np.arange(len(a)), a]
  if delta is None:
    per = 0.5 * td**2
  else:
    per = np.where(
      np.abs(td) <= delta, 0.5 * td**2, delta * (np.abs(td) - 0.5 * delta)
    )
  return np.mean(w * per), td


def numpy_dense_stack(x, weights, prefix):
  """x through the Dense layers `{prefix}dense_{i}/kernel|bias` of a
  {path: array} dict, ReLU between them (not after the last)."""
  i = 0
  while f"{prefix}dense_{i}/kernel" in weights:
    if i:
      x = np.maximum(x, 0.0)
    x = (
      x @ weights[f"{prefix}dense_{i}/kernel"]
      + weights[f"{prefix}dense_{i}/bias"]
    )
    i += 1
  return x


def numpy_q_values(states, weights, dueling=True):
  """Q(s, .) of a `QNetwork` (ReLU MLP torso, (dueling) head) from its
  variables by relative path: Q = V + A - mean(A) with dueling."""
  h = np.maximum(numpy_dense_stack(states, weights, "torso/"), 0.0)
  if not dueling:
    return numpy_dense_stack(h, weights, "head/")
  v = numpy_dense_stack(h, weights, "head/value/")
  a = numpy_dense_stack(h, weights, "head/advantage/")
  return v + a - a.mean(-1, keepdims=True)


def numpy_conv2d(x, kernel, bias=None, strides=1, padding="valid"):
  """NHWC convolution (TF's padding rules), in float64: loops over output
  pixels, an einsum over each patch. `x`: [..., H, W, C] (leading dims
  folded and restored); `kernel`: [kh, kw, C, filters]."""
  sh, sw = (strides, strides) if isinstance(strides, int) else strides
  kh, kw, _, filters = kernel.shape
  lead = x.shape[:-3]
  x = x.reshape((-1,) + x.shape[-3:]).astype(np.float64)
  n, h, w, c = x.shape
  if padding == "same":
    out_h, out_w = math.ceil(h / sh), math.ceil(w / sw)
    pad_h = max((out_h - 1) * sh + kh - h, 0)
    pad_w = max((out_w - 1) * sw + kw - w, 0)
    # TF 'SAME': the odd pixel goes to the bottom / right.
    x = np.pad(
      x,
      (
        (0, 0),
        (pad_h // 2, pad_h - pad_h // 2),
        (pad_w // 2, pad_w - pad_w // 2),
        (0, 0),
      ),
    )
  else:
    out_h, out_w = (h - kh) // sh + 1, (w - kw) // sw + 1
  out = np.zeros((n, out_h, out_w, filters))
  for i in range(out_h):
    for j in range(out_w):
      patch = x[:, i * sh : i * sh + kh, j * sw : j * sw + kw, :]
      assert patch.shape == (n, kh, kw, c)
      out[:, i, j, :] = np.einsum("nhwc,hwcf->nf", patch, kernel)
  if bias is not None:
    out = out + bias
  return out.reshape(lead + out.shape[1:])
