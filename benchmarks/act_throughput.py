r"""Acting throughput: DQN `get_actions` on Pong-shaped states against
hand-written plain TF and plain PyTorch actors (RLgraph paper, figure 4b).

The model: uint8 states [B, 84, 84, 4] -> cast float32, / 255 -> Nature-DQN
torso (conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512, relu) -> dueling head
(6 actions) -> argmax, epsilon-greedy (linear decay) when exploring.

Variants, interleaved per (batch size, explore), several repetitions:

- tf_checked: `executor.execute("get_actions", states, explore)` of the TF
  executor (check_inputs on, the default);
- tf_raw: `executor.function("get_actions")(states, explore)`, the raw
  tf.function;
- plain_tf: a hand-written tf.function (tf.nn.conv2d / matmul on tf.Variables
  holding the same weights, input_signature with open batch);
- torch_executor: `execute` of the TorchExecutor (check_inputs on);
- plain_torch: a hand-written PyTorch actor (nn.Sequential in NCHW, dueling,
  float cast / 255, argmax, epsilon-greedy, under torch.no_grad()) with the
  same weights.

Every variant takes the same NumPy uint8 batch and a Python bool and returns
the actions as a NumPy array. Before timing, both plain actors must give the
same greedy actions (and close Q-values) as our executors.

    python -m benchmarks.act_throughput            # the measurement
    python -m benchmarks.act_throughput --quick    # smoke run, < 60 s

Writes benchmarks/results/act_throughput.json (and act_throughput.png
without --quick).
"""

import os
import time

import numpy as np
import tensorflow as tf
import torch
from absl import app, flags
from torch import nn

from benchmarks import common  # Sets OMP_WAIT_POLICY before TF / torch load.
from ingraph_rl.agents.dqn import DQNBuilder, DQNConfig
from ingraph_rl.components.networks import NATURE_DQN_SPEC
from ingraph_rl.components.preprocessing import (
  Cast,
  Divide,
  PreprocessorStack,
)
from ingraph_rl.spaces import IntBox

NAME = "act_throughput"

_QUICK = flags.DEFINE_bool(
  "quick", False, "Smoke run (< 60 s): batch sizes 1 and 32, few reps."
)
_REPS = flags.DEFINE_integer(
  "reps", None, "Timed repetitions per case (default 7; 3 with --quick)."
)
_REP_SECONDS = flags.DEFINE_float(
  "rep_seconds",
  None,
  "Target wall time of one repetition of one variant; the number of calls "
  "per repetition is calibrated from it (default 0.4; 0.08 with --quick).",
)
_BATCH_SIZES = flags.DEFINE_list(
  "batch_sizes", None, "Batch sizes (default 1,8,32,128; 1,32 with --quick)."
)
_TORCH_THREADS = flags.DEFINE_integer(
  "torch_threads",
  None,
  "torch.set_num_threads (default: os.cpu_count(), as many as TF's "
  "default intra-op pool).",
)

NUM_ACTIONS = 6
OBS_SHAPE = (84, 84, 4)
SEED = 0
VARIANTS = ("tf_checked", "tf_raw", "plain_tf", "torch_executor", "plain_torch")
LABELS = {
  "tf_checked": "TF executor (execute, check_inputs)",
  "tf_raw": "TF executor (raw tf.function)",
  "plain_tf": "plain TF tf.function",
  "torch_executor": "Torch executor (execute)",
  "plain_torch": "plain PyTorch",
}
TARGETS = {"tf": 1.1, "torch": 1.25, "torch_min_batch": 32}
ONLINE = "dqn/online/"

_now = time.perf_counter


def make_config():
  # A tiny replay memory: get_actions never touches it, but the agent builds
  # one (84x84x4 records) with every executor.
  return DQNConfig(
    num_actions=NUM_ACTIONS,
    network=tuple(NATURE_DQN_SPEC),
    dueling=True,
    replay_capacity=64,
    batch_size=32,
    learning_starts=32,
    seed=SEED,
  )


def build_executor(backend):
  builder = DQNBuilder(
    make_config(),
    preprocessor=lambda: PreprocessorStack(Cast("float32"), Divide(255.0)),
  )
  return builder.make_agent(IntBox(256, OBS_SHAPE, dtype=np.uint8)).build(
    backend
  )


def online_weights(weights):
  """The online Q-network's weights, keyed by path below `dqn/online/`."""
  return {
    k[len(ONLINE) :]: v for k, v in weights.items() if k.startswith(ONLINE)
  }


# --- the plain TF actor ------------------------------------------------------


class PlainTFActor:
  """The same acting math by hand: tf.Variables and one tf.function."""

  def __init__(self, weights, config):
    self.v = {
      k: tf.Variable(w, name=k.replace("/", "_"))
      for k, w in online_weights(weights).items()
    }
    self.timestep = tf.Variable(0, dtype=tf.int64)
    self.rng = tf.random.Generator.from_seed(config.seed)
    eps_from, eps_to = config.epsilon_from, config.epsilon_to
    eps_steps = float(config.epsilon_steps)
    v = self.v

    def conv(x, name, stride):
      x = tf.nn.conv2d(x, v[f"torso/{name}/kernel"], stride, "VALID")
      return tf.nn.relu(tf.nn.bias_add(x, v[f"torso/{name}/bias"]))

    @tf.function(
      input_signature=(
        tf.TensorSpec((None,) + OBS_SHAPE, tf.uint8),
        tf.TensorSpec((), tf.bool),
      ),
      autograph=False,
    )
    def get_actions(states, explore):
      x = tf.cast(states, tf.float32) / 255.0
      x = conv(x, "conv2d_0", 4)
      x = conv(x, "conv2d_1", 2)
      x = conv(x, "conv2d_2", 1)
      x = tf.reshape(x, [-1, 7 * 7 * 64])
      x = tf.nn.relu(
        tf.matmul(x, v["torso/dense_4/kernel"]) + v["torso/dense_4/bias"]
      )
      value = (
        tf.matmul(x, v["head/value/dense_0/kernel"])
        + v["head/value/dense_0/bias"]
      )
      adv = (
        tf.matmul(x, v["head/advantage/dense_0/kernel"])
        + v["head/advantage/dense_0/bias"]
      )
      q = value + adv - tf.reduce_mean(adv, -1, keepdims=True)
      inc = tf.cast(explore, tf.int64)
      step = self.timestep.assign_add(inc) - inc
      frac = tf.clip_by_value(tf.cast(step, tf.float64) / eps_steps, 0.0, 1.0)
      epsilon = tf.cast(eps_from + (eps_to - eps_from) * frac, tf.float32)
      greedy = tf.argmax(q, -1, output_type=tf.int64)
      shape = tf.shape(greedy)
      u = self.rng.uniform(shape, dtype=tf.float32)
      rand = self.rng.uniform(shape, 0, NUM_ACTIONS, dtype=tf.int64)
      actions = tf.where(tf.logical_and(explore, u < epsilon), rand, greedy)
      return {"actions": actions, "q_values": q, "epsilon": epsilon}

    self.get_actions = get_actions


# --- the plain PyTorch actor -------------------------------------------------


class PlainTorchActor(nn.Module):
  """A hand-written PyTorch DQN actor (NCHW convs, dueling head)."""

  def __init__(self, weights, config):
    super().__init__()
    self.torso = nn.Sequential(
      nn.Conv2d(4, 32, 8, stride=4),
      nn.ReLU(),
      nn.Conv2d(32, 64, 4, stride=2),
      nn.ReLU(),
      nn.Conv2d(64, 64, 3, stride=1),
      nn.ReLU(),
      nn.Flatten(),
      nn.Linear(7 * 7 * 64, 512),
      nn.ReLU(),
    )
    self.value = nn.Linear(512, 1)
    self.advantage = nn.Linear(512, NUM_ACTIONS)
    self.load_tf_weights(online_weights(weights))
    self.eval()
    self.generator = torch.Generator().manual_seed(config.seed)
    self.step = 0
    self.eps = (config.epsilon_from, config.epsilon_to, config.epsilon_steps)

  @torch.no_grad()
  def load_tf_weights(self, w):
    """TF layout -> torch: conv kernels (kh, kw, in, out) -> (out, in, kh,
    kw), dense kernels transposed; the first dense kernel's rows go from
    TF's (h, w, c) flattening to torch's (c, h, w)."""

    def put(param, value):
      param.copy_(torch.from_numpy(np.ascontiguousarray(value)))

    for i, name in ((0, "conv2d_0"), (2, "conv2d_1"), (4, "conv2d_2")):
      put(
        self.torso[i].weight,
        np.transpose(w[f"torso/{name}/kernel"], (3, 2, 0, 1)),
      )
      put(self.torso[i].bias, w[f"torso/{name}/bias"])
    k = w["torso/dense_4/kernel"].reshape(7, 7, 64, 512)
    put(
      self.torso[7].weight,
      np.transpose(k, (2, 0, 1, 3)).reshape(7 * 7 * 64, 512).T,
    )
    put(self.torso[7].bias, w["torso/dense_4/bias"])
    for layer, name in ((self.value, "value"), (self.advantage, "advantage")):
      put(layer.weight, w[f"head/{name}/dense_0/kernel"].T)
      put(layer.bias, w[f"head/{name}/dense_0/bias"])

  @torch.no_grad()
  def get_actions(self, states, explore):
    x = torch.from_numpy(states).permute(0, 3, 1, 2).float() / 255.0
    h = self.torso(x)
    adv = self.advantage(h)
    q = self.value(h) + adv - adv.mean(-1, keepdim=True)
    eps_from, eps_to, eps_steps = self.eps
    frac = min(max(self.step / eps_steps, 0.0), 1.0)
    epsilon = eps_from + (eps_to - eps_from) * frac
    self.step += int(bool(explore))
    greedy = q.argmax(-1)
    if not explore:
      return {"actions": greedy, "q_values": q, "epsilon": epsilon}
    u = torch.rand(greedy.shape, generator=self.generator)
    rand = torch.randint(0, NUM_ACTIONS, greedy.shape, generator=self.generator)
    actions = torch.where(u < epsilon, rand, greedy)
    return {"actions": actions, "q_values": q, "epsilon": epsilon}


# --- checks ------------------------------------------------------------------


def _numpy(x):
  """A backend tensor as NumPy (torch tensors may carry autograd)."""
  return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def check_same_outputs(calls, states):
  """Greedy actions equal and Q-values close across all variants; exploring
  calls return one valid action per state. Returns what was checked."""
  ref_q, ref_a = None, None
  for name, fn in calls.items():
    out = fn(states, False)
    q = _numpy(out["q_values"])
    a = _numpy(out["actions"])
    if ref_q is None:
      ref_q, ref_a = q, a
      continue
    if not np.array_equal(a, ref_a):
      raise AssertionError(
        f"{name}: greedy actions differ from tf_checked: {a} vs {ref_a}"
      )
    if not np.allclose(q, ref_q, rtol=1e-4, atol=1e-5):
      raise AssertionError(
        f"{name}: Q-values differ from tf_checked by up "
        f"to {np.abs(q - ref_q).max():.3g}"
      )
  for name, fn in calls.items():
    a = _numpy(fn(states, True)["actions"])
    if a.shape != (len(states),) or a.min() < 0 or a.max() >= NUM_ACTIONS:
      raise AssertionError(f"{name}: bad exploring actions {a}")
  return (
    f"{len(states)} random states: greedy actions equal, Q-values "
    f"allclose(rtol=1e-4, atol=1e-5) to the TF executor's; exploring "
    f"actions in range"
  )


# --- main --------------------------------------------------------------------


def main(argv):
  del argv
  quick = _QUICK.value
  reps = _REPS.value or (3 if quick else 7)
  rep_s = _REP_SECONDS.value or (0.08 if quick else 0.4)
  batch_sizes = [
    int(b)
    for b in (
      _BATCH_SIZES.value or (["1", "32"] if quick else ["1", "8", "32", "128"])
    )
  ]
  threads = common.configure_threads(
    torch_threads=_TORCH_THREADS.value or os.cpu_count()
  )

  t0 = _now()
  tf_ex = build_executor("tf")
  torch_ex = build_executor("torch")
  build_s = _now() - t0
  weights = tf_ex.get_weights()
  torch_ex.set_weights(weights)
  config = make_config()
  plain_tf = PlainTFActor(weights, config)
  plain_torch = PlainTorchActor(weights, config)
  raw = tf_ex.function("get_actions")

  calls = {
    "tf_checked": lambda s, e: tf_ex.execute("get_actions", s, e),
    "tf_raw": lambda s, e: raw(s, e),
    "plain_tf": plain_tf.get_actions,
    "torch_executor": lambda s, e: torch_ex.execute("get_actions", s, e),
    "plain_torch": plain_torch.get_actions,
  }
  rng = np.random.default_rng(SEED)
  checked = check_same_outputs(
    calls, rng.integers(0, 256, (16,) + OBS_SHAPE, dtype=np.uint8)
  )

  def runner(fn, states, explore, n):
    def run():
      for _ in range(n):
        fn(states, explore)["actions"].numpy()

    return run

  rows, ratios, us_by = [], {}, {}
  per_call = {}
  for batch in batch_sizes:
    states = rng.integers(0, 256, (batch,) + OBS_SHAPE, dtype=np.uint8)
    for explore in (False, True):
      mode = "explore" if explore else "greedy"
      # Calibrate: calls per repetition so one repetition of the plain TF
      # actor takes about rep_s.
      probe = runner(calls["plain_tf"], states, explore, 1)
      probe()
      start = _now()
      probe()
      n = max(2, int(rep_s / max(_now() - start, 1e-6)))
      per_call[f"b{batch}_{mode}"] = n
      records = common.interleave(
        {v: runner(calls[v], states, explore, n) for v in VARIANTS}, reps=reps
      )
      us = {
        v: [1e6 * t / n for t in common.column(records[v], "wall_s")]
        for v in VARIANTS
      }
      us_by[(batch, mode)] = us
      for v in VARIANTS:
        case = f"b{batch}/{mode}/{v}"
        rows.append(
          common.Row(case, "time per call", "us", common.Stat.of(us[v]))
        )
        rows.append(
          common.Row(
            case,
            "throughput",
            "states/s",
            common.Stat.of(batch * 1e6 / u for u in us[v]),
          )
        )
      sfx = "" if not explore else "_explore"
      ratios[f"tf_executor_over_plain_tf{sfx}_b{batch}"] = common.paired_ratio(
        us["tf_checked"], us["plain_tf"]
      )
      ratios[f"tf_executor_raw_over_plain_tf{sfx}_b{batch}"] = (
        common.paired_ratio(us["tf_raw"], us["plain_tf"])
      )
      ratios[f"torch_executor_over_plain_torch{sfx}_b{batch}"] = (
        common.paired_ratio(us["torch_executor"], us["plain_torch"])
      )
      ratios[f"plain_torch_over_plain_tf{sfx}_b{batch}"] = common.paired_ratio(
        us["plain_torch"], us["plain_tf"]
      )

  config_doc = {
    "reps": reps,
    "warmup_reps": 1,
    "batch_sizes": batch_sizes,
    "calls_per_rep": per_call,
    "rep_seconds_target": rep_s,
    "interleaving": "per (batch size, explore) the five variants alternate "
    "within each rep, rotating which goes first; "
    "gc.collect() before each; calls per rep calibrated so "
    "a plain-TF rep takes about rep_seconds_target",
    "ratios": "median over reps of per-rep paired ratios of us per call "
    "(variant / baseline); keys without _explore are greedy "
    "(explore=False); tf_executor_* is execute() with "
    "check_inputs on, tf_executor_raw_* the raw tf.function",
    "threads": threads,
    "thread_note": "torch.set_num_threads set explicitly (default "
    "os.cpu_count()); TF intra/inter-op pools left at TF's "
    "defaults; OMP_WAIT_POLICY=PASSIVE",
    "targets (reported, not asserted)": {
      "tf_executor_over_plain_tf_b*": f"<= {TARGETS['tf']:g} at every "
      f"batch size",
      "torch_executor_over_plain_torch_b*": (
        f"<= {TARGETS['torch']:g} at batch >= {TARGETS['torch_min_batch']}"
      ),
    },
    "model": "uint8 [B, 84, 84, 4] -> Cast(float32), Divide(255) -> "
    "NATURE_DQN_SPEC torso -> DuelingHead(6, no hidden layer) -> "
    "argmax / epsilon-greedy (LinearDecay 1.0 -> 0.05 over 10,000 "
    "steps)",
    "agent": "DQNAgent(DQNConfig(num_actions=6, network=NATURE_DQN_SPEC, "
    "dueling=True, replay_capacity=64, batch_size=32, "
    "learning_starts=32, seed=0), preprocessor=PreprocessorStack("
    "Cast('float32'), Divide(255.0))).build(IntBox(256, (84, 84, "
    "4), uint8), backend='tf'|'torch')",
    "build_s (both executors)": round(build_s, 3),
    "inputs": "every variant gets the same NumPy uint8 batch and a Python "
    "bool explore, and returns its actions as NumPy (.numpy())",
    "variants": {
      "tf_checked": "tf executor.execute('get_actions', states, "
      "explore), check_inputs=True",
      "tf_raw": "executor.function('get_actions')(states, explore)",
      "plain_tf": "hand-written tf.function (input_signature [None, 84, "
      "84, 4] uint8 + bool scalar, autograph=False): "
      "tf.nn.conv2d / bias_add / relu, matmul, dueling "
      "combine, argmax, timestep variable + linear decay, "
      "tf.random.Generator epsilon-greedy; tf.Variables "
      "holding the TF executor's online weights",
      "torch_executor": "TorchExecutor execute('get_actions', states, "
      "explore), check_inputs=True, weights set from "
      "the TF executor's get_weights",
      "plain_torch": "hand-written nn.Sequential (NCHW Conv2d x3, "
      "Linear 3136->512) + value / advantage Linear, "
      "input permuted NHWC->NCHW, .float() / 255, argmax, "
      "epsilon-greedy with a torch.Generator; under "
      "torch.no_grad(); same weights (conv kernels "
      "permuted (3, 2, 0, 1), dense kernels transposed, "
      "first dense kernel's rows reordered HWC->CHW)",
    },
    "checked": checked,
  }
  path = common.write_results(NAME, quick, config_doc, rows, ratios)

  if not quick:
    png = plot(rows, batch_sizes)
    print(f"wrote {png}")

  def worst(prefix, min_batch=0):
    vals = [ratios[f"{prefix}_b{b}"] for b in batch_sizes if b >= min_batch]
    return max(vals) if vals else float("nan")

  tf_worst = worst("tf_executor_over_plain_tf")
  raw_worst = worst("tf_executor_raw_over_plain_tf")
  torch_worst = worst(
    "torch_executor_over_plain_torch", TARGETS["torch_min_batch"]
  )

  def verdict(value, limit):
    return "met" if value <= limit else "MISSED"

  big = max(batch_sizes)
  summary = (
    f"{NAME}{' [quick]' if quick else ''}: greedy, worst over batch "
    f"sizes {batch_sizes}: TF executor {tf_worst:.2f}x plain TF checked / "
    f"{raw_worst:.2f}x raw (target <= {TARGETS['tf']:g}: "
    f"{verdict(tf_worst, TARGETS['tf'])} / "
    f"{verdict(raw_worst, TARGETS['tf'])}); Torch executor "
    f"{torch_worst:.2f}x plain PyTorch at batch >= "
    f"{TARGETS['torch_min_batch']} (target <= {TARGETS['torch']:g}: "
    f"{verdict(torch_worst, TARGETS['torch'])}); b{big} greedy TF executor "
    f"{_median_rate(rows, big, 'tf_checked'):,.0f} states/s"
  )
  common.print_table(NAME, rows, ratios, summary, quick=quick, path=path)


def _median_rate(rows, batch, variant, mode="greedy"):
  case = f"b{batch}/{mode}/{variant}"
  return next(
    r.stat.median for r in rows if r.case == case and r.metric == "throughput"
  )


def plot(rows, batch_sizes):
  """States/s against batch size, log-log, one line per variant (greedy
  solid, exploring dashed)."""
  plt = common.pyplot()
  fig, ax = plt.subplots(figsize=(7.5, 5))
  colors = {
    "tf_checked": "#4C72B0",
    "tf_raw": "#64B5CD",
    "plain_tf": "#8C8C8C",
    "torch_executor": "#DD8452",
    "plain_torch": "#C44E52",
  }
  for v in VARIANTS:
    for mode, style in (("greedy", "-"), ("explore", "--")):
      ys = [_median_rate(rows, b, v, mode) for b in batch_sizes]
      ax.plot(
        batch_sizes,
        ys,
        style,
        marker="o",
        color=colors[v],
        label=f"{LABELS[v]}" + (" (explore)" if mode == "explore" else ""),
      )
  ax.set_xscale("log", base=2)
  ax.set_yscale("log")
  ax.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
  ax.set_xlabel("batch size")
  ax.set_ylabel("states/s (median)")
  ax.set_title(
    "DQN get_actions, Pong states 84x84x4 uint8, Nature DQN + dueling",
    fontsize=10,
  )
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=7)
  return common.save_plot(fig, NAME)


if __name__ == "__main__":
  app.run(main)
