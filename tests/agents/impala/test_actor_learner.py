"""IMPALA actor and learner together (one process, one queue by its
shared_name): on-policy rollouts give importance weights of exactly 1 (the
learner feeds the network the last rewards and actions the actor did, and
truncations bootstrap) and stale weights do not; the learner's loss equals
a NumPy recomputation (network forward pass with the last reward and action
and IMPALA loss with time-limit bootstraps) of a batch fed by hand; the
staging area trains on the batch staged one update earlier; published
weights reach the actor; bad `act` input is named; Dict observations with
instructions (strings) go through actor, queue, staging and learner."""

import numpy as np
import pytest

from ingraph_rl.agents.impala import IMPALABuilder, IMPALAConfig
from ingraph_rl.environments.gymnasium_env import GymnasiumVectorEnv
from ingraph_rl.errors import SpaceError
from ingraph_rl.spaces import FloatBox
from ingraph_rl.testing.component_test import to_numpy
from ingraph_rl.testing.instruction_env import InstructionVectorEnv
from ingraph_rl.testing.queues import (
  queue_feeder,
  random_rollouts,
  unique_queue_name,
)
from ingraph_rl.testing.references import np_bfloat16

OBS = FloatBox((4,))  # CartPole's observation shape.
LOSS_KEYS = (
  "loss",
  "pg_loss",
  "baseline_loss",
  "entropy_loss",
  "mean_vs",
  "mean_pg_advantage",
  "mean_entropy",
  "mean_rho",
)


def queue_name():
  return unique_queue_name("test_impala")


def numpy_weights(executor):
  return {k: v.numpy() for k, v in executor.execute("get_weights").items()}


def actor_network_weights(actor):
  """The actor's network variables by the paths of the learner's
  `get_weights`."""
  prefix = "actor/environment_stepper/policy/impala_network/"
  return {
    k[len(prefix) :]: v.numpy()
    for k, v in actor.variables().items()
    if k.startswith(prefix)
  }


def scalars(out):
  return {k: float(v) for k, v in to_numpy(out).items()}


# --- Real actors on CartPole --------------------------------------------------


def actor_and_learner(config, num_envs, seed=0, **make_kwargs):
  name = queue_name()
  env = GymnasiumVectorEnv("CartPole-v1", num_envs, seed=seed, **make_kwargs)
  builder = IMPALABuilder(config)
  learner = builder.make_learner(env.observation_space, name).build()
  actor = builder.make_actor(env, name).build()
  actor.execute("reset_env", seed)
  return actor, learner, env


ACTOR_CONFIGS = {
  "mlp": dict(),
  # Short episodes: resets inside the rollouts, so the learner has to
  # zero the LSTM state where the actor did.
  "lstm": dict(lstm_units=6),
  "lstm_no_reward_action": dict(
    lstm_units=6, feed_reward_action=False, bootstrap_on_truncation=False
  ),
}


@pytest.mark.parametrize(
  "kind",
  [
    # The LSTM variant without reward/action inputs: make test-all.
    pytest.param(k, marks=pytest.mark.slow)
    if k == "lstm_no_reward_action"
    else k
    for k in ACTOR_CONFIGS
  ],
)
@pytest.mark.slow
def test_importance_weights_are_one_exactly_when_weights_agree(kind):
  """No staging, one actor unroll = one learner batch:
  synced -> update 1: mean_rho == 1 (target logits == behaviour logits);
  actor NOT synced -> update 2 trains on logits of the old weights;
  synced again -> update 3: mean_rho == 1, and the actor's network
    variables equal the learner's."""
  # A large learning rate: one update moves the policy visibly.
  config = IMPALAConfig(
    num_actions=2,
    unroll_length=7,
    batch_size=4,
    queue_capacity=8,
    use_staging=False,
    learning_rate=0.05,
    **ACTOR_CONFIGS[kind],
  )
  actor, learner, env = actor_and_learner(
    config, 4, seed=3, max_episode_steps=5
  )
  try:
    actor.execute("set_weights", learner.execute("get_weights"))
    stats = to_numpy(actor.execute("unroll"))
    assert int(stats["queue_size"]) == 4
    assert int(stats["episodes"]) > 0  # Episode ends inside.
    first = scalars(learner.execute("update"))
    assert abs(first["mean_rho"] - 1.0) < 1e-5

    actor.execute("unroll")  # Stale weights.
    stale = scalars(learner.execute("update"))
    assert abs(stale["mean_rho"] - 1.0) > 1e-3

    weights = numpy_weights(learner)
    before = actor_network_weights(actor)
    assert set(before) == set(weights)
    assert all(not np.array_equal(before[k], weights[k]) for k in weights)
    actor.execute("set_weights", learner.execute("get_weights"))
    after = actor_network_weights(actor)
    for k in weights:
      np.testing.assert_array_equal(after[k], weights[k], err_msg=k)

    actor.execute("unroll")
    synced = scalars(learner.execute("update"))
    assert abs(synced["mean_rho"] - 1.0) < 1e-5
    assert synced["train_step"] == 3
    assert synced["frames"] == 4 * 7
  finally:
    learner.execute("close_queue")
    env.close()


def randomize_network(learner, seed, scale=0.25):
  """Sets the learner's network to normal weights (`scale`): logits of
  O(1), unlike the near-uniform initial policy head."""
  rng = np.random.default_rng(seed)
  learner.set_weights(
    {
      k: (scale * rng.normal(size=v.shape)).astype(np.float32)
      if "/impala_network/" in k
      else v
      for k, v in learner.get_weights().items()
    }
  )


@pytest.mark.slow
def test_bfloat16_actor_acts_with_rounded_torso_weights():
  """actor_weights_dtype=bfloat16: `set_weights` stores the learner's
  float32 torso weights rounded to bfloat16 (the heads stay float32);
  `act` matches the NumPy network under those rounded weights to
  bfloat16's precision, nearer than under the float32 weights; the
  learner's V-trace corrects the small policy lag (rho near 1); the
  exported policy stays float32."""
  config = IMPALAConfig(
    num_actions=2,
    unroll_length=7,
    batch_size=4,
    queue_capacity=8,
    use_staging=False,
    actor_weights_dtype="bfloat16",
  )
  actor, learner, env = actor_and_learner(config, 4, seed=5)
  try:
    randomize_network(learner, 5)
    weights = numpy_weights(learner)
    actor.execute("set_weights", learner.execute("get_weights"))
    stored = actor_network_weights(actor)
    assert set(stored) == set(weights)
    rounded = {}
    for path, value in weights.items():
      torso = path.startswith("torso/")
      assert stored[path].dtype.name == ("bfloat16" if torso else "float32")
      rounded[path] = np_bfloat16(value) if torso else value
      np.testing.assert_array_equal(
        stored[path].astype(np.float32), rounded[path], err_msg=path
      )

    rng = np.random.default_rng(6)
    obs = rng.normal(size=(64, 1, 4)).astype(np.float32)
    state = {k: np.zeros((64, 0), np.float32) for k in ("c", "h")}
    resets = np.zeros((64, 1), bool)
    rewards = rng.normal(size=(64, 1)).astype(np.float32)
    actions = rng.integers(0, 2, (64, 1))
    out = to_numpy(actor.execute("act", obs, state, resets, rewards, actions))
    args = (obs, state, resets, rewards, actions, 2)
    want_logits, want_values = numpy_network(rounded, *args)
    exact_logits, exact_values = numpy_network(weights, *args)
    for got, want, exact in (
      (out["logits"], want_logits, exact_logits),
      (out["values"], want_values, exact_values),
    ):
      assert got.dtype == np.float32
      np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2)
      assert np.abs(got - want).mean() < np.abs(got - exact).mean()

    actor.execute("unroll")
    rho = scalars(learner.execute("update"))["mean_rho"]
    assert abs(rho - 1.0) < 0.05
  finally:
    learner.execute("close_queue")
    env.close()
  policy = IMPALABuilder(config).make_policy(OBS).build()
  assert {v.dtype.name for v in policy.get_weights().values()} == {"float32"}


def test_batched_inference_server_keeps_the_actors_weights_dtype():
  """The inference server acts for the actors: with bfloat16 actor
  weights its torso is bfloat16 too, its heads float32."""
  config = IMPALAConfig(num_actions=2, actor_weights_dtype="bfloat16")
  builder = IMPALABuilder(config)
  env = GymnasiumVectorEnv("CartPole-v1", 2, seed=0)
  try:
    channel = builder.inference_channel([env], f"bf16_{queue_name()}")
    server = builder.make_inference_server(OBS, channel).build()
    dtypes = {
      path: v.dtype.name
      for path, v in server.get_weights().items()
      if path.endswith(("kernel", "bias"))
    }
    assert dtypes and all(
      d == ("bfloat16" if "/torso/" in p else "float32")
      for p, d in dtypes.items()
    ), dtypes
  finally:
    env.close()


@pytest.mark.slow
def test_act_names_a_bad_argument():
  config = IMPALAConfig(num_actions=2, unroll_length=3)
  env = GymnasiumVectorEnv("CartPole-v1", 2, seed=0)
  actor = IMPALABuilder(config).make_actor(env, queue_name()).build()
  state = {"c": np.zeros((2, 0), np.float32), "h": np.zeros((2, 0), np.float32)}
  resets = np.zeros((2, 1), bool)
  rewards, actions = np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int64)
  good = np.zeros((2, 1, 4), np.float32)
  out = to_numpy(actor.execute("act", good, state, resets, rewards, actions))
  assert out["greedy_action"].shape == (2, 1)
  with pytest.raises(SpaceError) as e:
    actor.execute(
      "act", np.zeros((2, 1, 5), np.float32), state, resets, rewards, actions
    )
  assert "argument 'observations'" in str(e.value)
  assert "API method 'act'" in str(e.value)
  with pytest.raises(SpaceError) as e:
    actor.execute(
      "act", good, state, np.zeros((2, 1), np.float32), rewards, actions
    )
  assert "argument 'resets'" in str(e.value)
  with pytest.raises(SpaceError) as e:
    actor.execute(
      "act", good, state, resets, rewards, actions.astype(np.float32)
    )
  assert "argument 'last_actions'" in str(e.value)
  env.close()


# --- A learner fed by hand ----------------------------------------------------


def feeder(config, name):
  """An executor of a FIFOQueue with the learner's shared_name: rollouts
  enqueued here are what the learner dequeues."""
  return queue_feeder(
    IMPALABuilder(config).record_space(OBS), config.queue_capacity, name
  )


def hand_made(config, seed):
  """`batch_size` random rollouts (see `random_rollouts`)."""
  return random_rollouts(config, seed)


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def numpy_network(
  w,
  observations,
  initial_state,
  resets,
  last_rewards=None,
  last_actions=None,
  num_actions=None,
):
  """The default MLP torso (2 x 64 tanh), beside it (with `last_rewards`)
  the last reward clipped to [-1, 1] and the one-hot last action, the
  optional LSTM (gates i, f, g, o; state zeroed before a step where resets
  is True), policy and value heads; float64, batch-major [B, T, ...]."""
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  h = np.tanh(
    observations @ w["torso/dense_0/kernel"] + w["torso/dense_0/bias"]
  )
  h = np.tanh(h @ w["torso/dense_1/kernel"] + w["torso/dense_1/bias"])
  if last_rewards is not None:
    h = np.concatenate(
      [
        h,
        np.clip(last_rewards, -1.0, 1.0)[..., None],
        np.eye(num_actions)[last_actions],
      ],
      -1,
    )
  if "lstm/kernel" in w:
    c, hh = (np.asarray(initial_state[k], np.float64) for k in ("c", "h"))
    outs = []
    for t in range(h.shape[1]):
      keep = 1.0 - resets[:, t, None]
      c, hh = c * keep, hh * keep
      z = np.concatenate([h[:, t], hh], -1) @ w["lstm/kernel"] + w["lstm/bias"]
      i, f, g, o = np.split(z, 4, -1)
      c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
      hh = sigmoid(o) * np.tanh(c)
      outs.append(hh)
    h = np.stack(outs, 1)
  logits = h @ w["policy_head/kernel"] + w["policy_head/bias"]
  values = (h @ w["value_head/kernel"] + w["value_head/bias"])[..., 0]
  return logits, values


def log_softmax(z):
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def numpy_impala_loss(
  target_logits,
  behaviour_logits,
  actions,
  rewards,
  dones,
  values,
  bootstrap_value,
  discounting,
  baseline_cost,
  entropy_cost,
):
  """Copied from tests/components/losses/test_impala_loss.py (clip
  thresholds 1, lambda 1): V-trace by its recursion from the end, every
  term summed over time and batch; time-major inputs."""
  take = lambda lp: np.take_along_axis(lp, actions[..., None], -1)[..., 0]
  target_lp = take(log_softmax(target_logits))
  rhos = np.exp(target_lp - take(log_softmax(behaviour_logits)))
  discounts = discounting * (1.0 - dones)
  vs = np.zeros_like(values)
  next_v, next_vs = bootstrap_value, bootstrap_value
  for t in reversed(range(len(values))):
    delta = np.minimum(1.0, rhos[t]) * (
      rewards[t] + discounts[t] * next_v - values[t]
    )
    vs[t] = (
      values[t]
      + delta
      + discounts[t] * np.minimum(1.0, rhos[t]) * (next_vs - next_v)
    )
    next_v, next_vs = values[t], vs[t]
  next_vs = np.concatenate([vs[1:], bootstrap_value[None]])
  pg_adv = np.minimum(1.0, rhos) * (rewards + discounts * next_vs - values)
  lp = log_softmax(target_logits)
  entropy = -(np.exp(lp) * lp).sum(-1)
  pg_loss = np.sum(-target_lp * pg_adv)
  baseline_loss = baseline_cost * 0.5 * np.sum((vs - values) ** 2)
  entropy_loss = entropy_cost * np.sum(-entropy)
  return {
    "loss": pg_loss + baseline_loss + entropy_loss,
    "pg_loss": pg_loss,
    "baseline_loss": baseline_loss,
    "entropy_loss": entropy_loss,
    "mean_vs": vs.mean(),
    "mean_pg_advantage": pg_adv.mean(),
    "mean_entropy": entropy.mean(),
    "mean_rho": rhos.mean(),
  }


def expected_results(config, weights, batch):
  """The learner's update results, recomputed: the network over all T + 1
  steps of each rollout (from its initial state, resets = dones, last
  rewards and actions = rewards and actions); its outputs at step t pair
  with action, behaviour logits, reward and done t + 1 (IMPALA's layout);
  the value at T bootstraps; a truncation at t + 1 adds discounting * its
  bootstrap value to the (clipped) reward."""
  state = batch.get("initial_state")
  feed = (
    (batch["rewards"].astype(np.float64), batch["actions"], config.num_actions)
    if config.feed_reward_action
    else ()
  )
  logits, values = numpy_network(
    weights,
    batch["observations"].astype(np.float64),
    state,
    batch["dones"].astype(np.float64),
    *feed,
  )
  tm = lambda x: np.swapaxes(x, 0, 1)
  rewards = batch["rewards"].astype(np.float64)
  if config.reward_clipping == "abs_one":
    rewards = np.clip(rewards, -1.0, 1.0)
  else:
    assert config.reward_clipping == "none"
  if config.bootstrap_on_truncation:
    rewards = rewards + config.discounting * np.where(
      batch["truncated"], batch["bootstrap_value"], 0.0
    )
  out = numpy_impala_loss(
    tm(logits)[:-1],
    tm(batch["logits"].astype(np.float64))[1:],
    tm(batch["actions"])[1:],
    tm(rewards)[1:],
    tm(batch["dones"].astype(np.float64))[1:],
    tm(values)[:-1],
    values[:, -1],
    config.discounting,
    config.baseline_cost,
    config.entropy_cost,
  )
  out["frames"] = config.batch_size * config.unroll_length
  return out


def assert_results(got, expected, what):
  for k in list(LOSS_KEYS) + ["frames"]:
    np.testing.assert_allclose(
      got[k], expected[k], rtol=2e-5, atol=2e-5, err_msg=f"{what}: {k}"
    )


HAND_CONFIG = dict(
  num_actions=3,
  unroll_length=5,
  batch_size=3,
  queue_capacity=12,
  discounting=0.9,
  entropy_cost=0.01,
  baseline_cost=0.4,
  learning_rate=0.01,
)


UPDATE_CONFIGS = {
  "mlp": dict(),
  "lstm": dict(lstm_units=4),
  "lstm_no_reward_action": dict(lstm_units=4, feed_reward_action=False),
  "no_bootstrap": dict(bootstrap_on_truncation=False),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(UPDATE_CONFIGS))
def test_update_matches_numpy_recomputation(kind):
  config = IMPALAConfig(
    use_staging=False,
    reward_clipping="abs_one",
    **UPDATE_CONFIGS[kind],
    **HAND_CONFIG,
  )
  name = queue_name()
  learner = IMPALABuilder(config).make_learner(OBS, name).build()
  feed = feeder(config, name)
  try:
    for step, seed in enumerate((10, 11), start=1):
      batch = hand_made(config, seed)
      assert (np.abs(batch["rewards"]) > 1).any() and batch["dones"].any()
      weights = numpy_weights(learner)
      feed.execute("enqueue_many", batch)
      got = scalars(learner.execute("update"))
      expected = expected_results(config, weights, batch)
      assert_results(got, expected, f"update {step}")
      assert got["train_step"] == step
      # Behaviour logits off the learner's policy: some rhos clip.
      assert expected["mean_rho"] > 1.0
      # The update changed every weight (the next one starts from them).
      new = numpy_weights(learner)
      assert all(not np.array_equal(new[k], weights[k]) for k in weights)
  finally:
    learner.execute("close_queue")


@pytest.mark.slow
def test_staging_trains_on_the_batch_staged_one_update_earlier(background):
  config = IMPALAConfig(use_staging=True, reward_clipping="none", **HAND_CONFIG)
  b = config.batch_size
  name = queue_name()
  learner = IMPALABuilder(config).make_learner(OBS, name).build()
  feed = feeder(config, name)
  size = lambda: int(learner.execute("queue_size"))
  batches = [hand_made(config, seed) for seed in range(4)]
  try:
    for batch in batches[:3]:
      feed.execute("enqueue_many", batch)
    assert size() == 3 * b
    assert int(learner.execute("prime")) == 1  # One batch staged.
    assert size() == 2 * b
    for k in range(2):
      weights = numpy_weights(learner)
      got = scalars(learner.execute("update"))
      # Batch k trains while batch k + 1 is staged from the queue.
      assert size() == (1 - k) * b
      assert_results(
        got, expected_results(config, weights, batches[k]), f"update {k + 1}"
      )
      other = expected_results(config, weights, batches[k + 1])
      assert abs(got["loss"] - other["loss"]) > 1e-2
    # The queue is empty, so update 3 (on batch 2, staged) waits until the
    # next batch can be staged.
    weights = numpy_weights(learner)
    update = background(lambda: scalars(learner.execute("update")))
    assert update.still_blocked()
    feed.execute("enqueue_many", batches[3])
    got = update.finish()
    assert size() == 0
    assert_results(
      got, expected_results(config, weights, batches[2]), "update 3"
    )
    assert got["train_step"] == 3
  finally:
    learner.execute("close_queue")


@pytest.mark.parametrize(
  "config",
  [
    dict(unroll_length=3),  # Observation size 4.
    dict(unroll_length=7, lstm_units=8),  # LSTM size 8.
  ],
  ids=["obs_size", "lstm_size"],
)
@pytest.mark.slow
def test_learner_builds_when_a_feature_size_equals_the_rollout_length(config):
  IMPALABuilder(
    IMPALAConfig(num_actions=2, batch_size=2, **config)
  ).make_learner(OBS, queue_name()).build()


# --- Dict observations with instructions --------------------------------------


# ~7 s: make test-all (make test's margin); test_evaluation's Dict test
# stays in make test.
@pytest.mark.slow
def test_dict_observations_with_instructions_end_to_end():
  """DM Lab-style observations (uint8 frame + instruction string, from
  `InstructionVectorEnv`, with a time limit) through the whole pipeline:
  the actor's act and unroll, the queue and the staging area (string
  components), the learner's unroll (rho == 1 on the batch collected with
  its weights) and gradients that reach the instruction encoder."""
  config = IMPALAConfig(
    num_actions=3,
    torso="small",
    lstm_units=16,
    unroll_length=6,
    batch_size=4,
    queue_capacity=12,
    use_staging=True,
    learning_rate=0.05,
    seed=2,
  )
  env = InstructionVectorEnv(
    4, seed=5, frame_shape=(36, 48, 3), max_episode_steps=4
  )
  name = queue_name()
  builder = IMPALABuilder(config)
  learner = builder.make_learner(env.observation_space, name).build()
  actor = builder.make_actor(env, name).build()
  try:
    weights = numpy_weights(learner)
    assert weights["instruction_encoder/embedding/embeddings"].shape == (
      1000,
      20,
    )
    assert weights["lstm/kernel"].shape[0] == 256 + 1 + 3 + 64 + 16
    actor.execute("set_weights", learner.execute("get_weights"))

    # act on a batch of dict observations: the instruction matters.
    frames = np.zeros((3, 1, 36, 48, 3), np.uint8)
    text = np.array([["go left"], ["go right"], [""]], object)
    zero = np.zeros((3, 16), np.float32)
    out = to_numpy(
      actor.execute(
        "act",
        {"RGB_INTERLEAVED": frames, "INSTR": text},
        {"c": zero, "h": zero},
        np.ones((3, 1), bool),
        np.zeros((3, 1), np.float32),
        np.zeros((3, 1), np.int64),
      )
    )
    assert out["logits"].shape == (3, 1, 3)
    assert np.abs(out["logits"][0] - out["logits"][1]).max() > 1e-4

    actor.execute("reset_env", 5)
    stats = to_numpy(actor.execute("unroll"))
    assert stats["episodes"] == 4 and stats["queue_size"] == 4
    np.testing.assert_array_equal(stats["episodes_per_env"], 1)
    assert int(learner.execute("prime")) == 1  # Staged: strings too.
    actor.execute("unroll")
    first = scalars(learner.execute("update"))  # The staged batch.
    assert abs(first["mean_rho"] - 1.0) < 1e-5
    assert int(learner.execute("queue_size")) == 0  # The next is staged.
    new = numpy_weights(learner)
    for path in (
      "instruction_encoder/embedding/embeddings",
      "instruction_encoder/lstm/kernel",
      "torso/conv2d_0/kernel",
    ):
      assert not np.array_equal(new[path], weights[path]), path
  finally:
    learner.execute("close_queue")


@pytest.mark.slow
def test_bfloat16_update_follows_float32():
  # The same weights and batch through a float32 and a mixed-precision
  # learner: losses and updated weights agree to bfloat16's precision, and
  # the variables (so the optimizer's steps) stay float32.
  runs = {}
  for dtype in ("float32", "bfloat16"):
    config = IMPALAConfig(
      use_staging=False,
      reward_clipping="abs_one",
      lstm_units=4,
      compute_dtype=dtype,
      **HAND_CONFIG,
    )
    name = queue_name()
    learner = IMPALABuilder(config).make_learner(OBS, name).build()
    if runs:
      learner.set_weights(runs["float32"]["before"])
    before = learner.get_weights()
    feeder(config, name).execute("enqueue_many", hand_made(config, 10))
    runs[dtype] = {
      "before": before,
      "results": scalars(learner.execute("update")),
      "after": learner.get_weights(),
    }
    learner.execute("close_queue")
  fp32, bf16 = runs["float32"], runs["bfloat16"]
  for key in ("loss", "pg_loss", "baseline_loss", "entropy_loss"):
    assert bf16["results"][key] == pytest.approx(
      fp32["results"][key], rel=3e-2, abs=3e-3
    ), key
  floats = {p: v for p, v in fp32["after"].items() if v.dtype.kind == "f"}
  assert any("torso" in p for p in floats)
  for path, after in floats.items():
    assert bf16["after"][path].dtype == np.float32
    step_32 = after - fp32["before"][path]
    step_16 = bf16["after"][path] - fp32["before"][path]
    assert np.abs(step_16).max() > 0, path
    # RMSProp's first steps are ~lr in size, so compare them at that scale.
    np.testing.assert_allclose(
      step_16, step_32, atol=0.3 * HAND_CONFIG["learning_rate"], err_msg=path
    )
    if "torso" in path:  # Its products ran in bfloat16: not bit-equal.
      assert not np.array_equal(step_16, step_32), path
