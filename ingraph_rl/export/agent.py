"""Complete-agent SavedModels: acting, observing, updating and the agent's
state (weights, optimizer slots, replay contents, RNG and schedule state) in
ONE SavedModel that plain TensorFlow loads, runs and saves again.

    result = export_agent(dqn_executor, path)        # every pure-TF API
    agent = tf.saved_model.load(path)                 # no ingraph_rl needed
    out = agent.signatures["action"](states=obs, explore=tf.constant(True))
    agent.signatures["observe"](states=..., actions=..., rewards=...,
                                next_states=..., terminals=...)
    losses = agent.signatures["update"]()
    tf.saved_model.save(agent, new_path, signatures=agent.signatures)

Signatures: one per root API (names: `SIGNATURE_NAMES`, else the API's
own). Inputs are named after the API's arguments; a nested argument (a
Dict space) becomes one input per leaf, its path joined with "_" (e.g.
`rollouts_initial_state_c`). Outputs are the API's result dict flattened
the same way (a single tensor is named by `SINGLE_OUTPUT_NAMES`, e.g.
`train_step`, else "output"). Batch and time dims stay open
(-1), as in the executor's input signatures.

Inputs are checked in the exported graph, so the checks hold for a user
with only TensorFlow: every input's rank and fixed dims first (an
InvalidArgumentError whose message says `[ingraph_rl check] component ...,
API method <signature>, argument <input>: signature <name>: input shape:
expected [None, 4] (float32), received [2, 3] [end]`; nothing inside runs
before), then the API's own argument and value checks; `get_initial_state`
refuses a negative `batch_size`. A wrong dtype never reaches the graph:
TensorFlow's own call refuses it (naming the input's position, expected
and received dtype).

What is exported, and why:
  - DQN (`DQNBuilder(config).make_agent(...).build()`): `action`
    (get_actions: preprocessing, Q-network,
    epsilon-greedy with an `explore` input; the schedule's step and the
    exploration RNG are saved state), `observe` (insert into the replay or
    prioritized replay; n-step windows included), `update` (sample, loss,
    optimizer step, priority update; returns the loss dict),
    `sync_target`, `get_weights`, `get_train_step`.
  - Actor-learner agents (`export_actor_learner`, e.g. IMPALA): the
    actor's `action` (one step:
    observation [B, ...], `first`, `prev_reward`, `prev_action`, LSTM
    state) and `get_initial_state`,
    the learner's `update` on a given batch of rollouts (its
    `update_from_batch` API), `get_weights`, `get_train_step`,
    `sync_weights` (learner weights -> actor, in one call) and
    `queue_size`.
  - NOT exported: APIs that step an environment (`reset_env`, `train`,
    `unroll`): they run the env through `tf.numpy_function`, whose Python
    callable is not saved, so such a SavedModel fails in any other process.
    Exporting everything (`apis=None`) skips them and records why
    (`ExportResult.skipped`, the `get_metadata` signature); naming one in
    `apis` raises `ExportError` naming the API. IMPALA's queue-fed
    `update` / `prime` are skipped too: only the actor's (env-stepping)
    `unroll` fills that queue, so in a loaded agent they would block.
  - State: every variable of the executors (weights, optimizer slots and
    step, replay buffers, sum/min trees, n-step windows, schedule steps) and
    resources (tf.random.Generator states, an actor-learner's rollout
    queue and staging area). Queues and staging areas are re-created EMPTY
    on load.

Custom ops: prioritized replay uses the C++ segment-tree ops when they are
built (`segment_tree.DEFAULT_IMPL == "custom_op"`). Such a SavedModel needs
`ingraph_rl.ops.load_segment_tree_ops()` (or `ingraph_rl.export.load`)
before loading; plain `tf.saved_model.load` fails with "Op type not
registered". For a model that loads without ingraph_rl, build the agent
with INGRAPH_RL_DISABLE_CUSTOM_OPS=1 (or `segment_tree.DEFAULT_IMPL = "tf"`
before `build`), or use uniform replay. `require_plain_tf=True` makes the
export fail instead of recording `custom_ops` in the metadata.

Metadata: the `get_metadata` signature (plain TF: `format_version` int32,
`ingraph_rl_version`, `exported` / `skipped` string vectors and the full
`metadata_json`) and the asset `assets/ingraph_rl_export.json`, which
`load(path)` reads BEFORE loading the graph, to refuse an incompatible
format version with a clear message (and to load custom ops first).

Re-saving a loaded agent needs `signatures=agent.signatures`: without it
`tf.saved_model.save` keeps the state but drops the signatures.
"""

import dataclasses
import json
import os
import re
import shutil
import tempfile

import tensorflow as tf
import tree
from absl import logging

import ingraph_rl
from ingraph_rl.errors import ExportError
from ingraph_rl.executors.checks import check_message
from ingraph_rl.executors.tf_spaces import tensor_spec

FORMAT_VERSION = 1
# Versions this code reads: a newer writer may use signatures we don't know.
READABLE_FORMAT_VERSIONS = (1,)
METADATA_FILE = "ingraph_rl_export.json"

# Root API -> signature name, where the names differ from the API's.
SIGNATURE_NAMES = {"get_actions": "action"}
# The output name of APIs that return one tensor (others: "output").
SINGLE_OUTPUT_NAMES = {
  "get_train_step": "train_step",
  "observe": "size",
  "sync_target": "synced",
  "queue_size": "size",
  "close_queue": "size",
}

# The ops behind tf.numpy_function / tf.py_function: the Python callable is
# not part of the SavedModel.
PY_FUNC_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
# ingraph_rl/ops/segment_tree_ops.cc: registered only after
# ingraph_rl.ops.load_segment_tree_ops().
CUSTOM_OPS = frozenset(
  {
    "SegmentTreeUpdate",
    "SegmentTreeFindPrefixsumIdx",
    "ResourceSegmentTreeFindPrefixsumIdx",
  }
)


@dataclasses.dataclass
class ExportResult:
  """What `export_agent` wrote.

  path: the SavedModel directory.
  exported: signature name -> the root API behind it ("learner.update..."
    for a multi-executor export).
  skipped: root API -> why it is not in the SavedModel.
  custom_ops: op types the SavedModel needs registered before loading.
  metadata: everything above as stored (also `get_metadata`).
  """

  path: str
  exported: dict
  skipped: dict
  custom_ops: list
  metadata: dict


# --- graph inspection --------------------------------------------------------


def graph_op_types(fn):
  """{op type: [node names]} of a tf.function / concrete function, nested
  functions (while and cond bodies, called functions) included."""
  concrete = (
    fn.get_concrete_function() if hasattr(fn, "get_concrete_function") else fn
  )
  graph_def = concrete.graph.as_graph_def()
  found = {}
  for node in graph_def.node:
    found.setdefault(node.op, []).append(node.name)
  for function in graph_def.library.function:
    for node in function.node_def:
      found.setdefault(node.op, []).append(
        f"{function.signature.name}/{node.name}"
      )
  return found


def env_stepping_ops(fn):
  """Names of the numpy_function / py_function nodes in `fn`'s graph."""
  ops = graph_op_types(fn)
  return sorted(n for t in PY_FUNC_OPS for n in ops.get(t, ()))


def _custom_ops(fn):
  return sorted(set(graph_op_types(fn)) & CUSTOM_OPS)


def _env_stepping_reason(api, nodes):
  shown = ", ".join(nodes[:3]) + (", ..." if len(nodes) > 3 else "")
  return (
    f"API '{api}' steps an environment through tf.numpy_function "
    f"({len(nodes)} node(s): {shown}); its Python callable is not "
    f"saved, so a SavedModel with it fails in any other process. "
    f"Leave it out (apis=None exports every other API) and step the "
    f"environment in the process that loads the agent"
  )


# --- signature functions -----------------------------------------------------


def _leaf_name(parts):
  name = "_".join(str(p) for p in parts)
  return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _flat_specs(arg_specs):
  """[(input name, TensorSpec)] for {argument: TensorSpec nest}, leaves in
  `tree.flatten` order per argument."""
  out = []
  for arg, spec in arg_specs.items():
    for path, leaf in tree.flatten_with_path(spec):
      out.append((_leaf_name((arg,) + tuple(path)), leaf))
  names = [n for n, _ in out]
  if len(set(names)) != len(names):
    raise ExportError(f"input names collide after flattening: {names}")
  return out


def flat_outputs(out, single_name="output"):
  """An API result as a flat {name: tensor} dict (signature outputs)."""
  if not tree.is_nested(out):
    return {single_name: out}
  flat = {}
  for path, leaf in tree.flatten_with_path(out):
    name = "_".join(str(p) for p in path)
    if name in flat:
      raise ExportError(f"output name '{name}' occurs twice after flattening")
    flat[name] = leaf
  return flat


def signature_function(
  fn,
  arg_specs,
  name,
  single_output="output",
  jit_compile=None,
  component="export",
):
  """A tf.function with one named, flat input per leaf of `arg_specs`
  ({argument: TensorSpec nest}, in `fn`'s argument order) that calls `fn`
  with the nests rebuilt and returns its result flattened (a lone tensor
  as `single_output`). Before `fn` runs, every input's rank and known
  dims are checked in the graph (`component`: whose signature, for the
  message)."""
  flat = _flat_specs(arg_specs)
  counts = [len(tree.flatten(s)) for s in arg_specs.values()]
  specs = list(arg_specs.values())

  def body(*leaves):
    # The inputs' shapes are checked first, in the graph, so that a plain
    # TF user gets our message, not a raw error from inside (dtypes are
    # checked by TF's own call, before the graph runs).
    if not jit_compile:  # XLA compiles asserts (and strings) away.
      checks = [
        _shape_check(component, name, n, s, x)
        for (n, s), x in zip(flat, leaves)
      ]
      leaves = _guarded(checks, leaves)
    args, start = [], 0
    for spec, n in zip(specs, counts):
      args.append(tree.unflatten_as(spec, list(leaves[start : start + n])))
      start += n
    return flat_outputs(fn(*args), single_output)

  body.__name__ = name
  return tf.function(
    body,
    autograph=False,
    jit_compile=jit_compile,
    input_signature=[tf.TensorSpec(s.shape, s.dtype, name=n) for n, s in flat],
  )


def _check_text(component, signature, argument, reason, received):
  """The message of a failed signature input check (`checks.check_message`
  with "received ..." from the graph): a string tensor."""
  before, after = check_message(component, signature, argument, "\0").split(
    "\0"
  )
  return tf.strings.join(
    [before, f"signature `{signature}`: {reason}, received ", received, after]
  )


def _dims_text(shape):
  return tf.strings.join(
    [
      "[",
      tf.strings.reduce_join(tf.strings.as_string(shape), separator=", "),
      "]",
    ]
  )


_SHAPE_CHECKS = {}


def _runtime_shape_check(x, want):
  """(ok, tf.shape(x)): whether `x` has rank len(want) and the dims of
  `want` that are not None, computed where nothing can be folded to the
  signature's declared shape (grappler assumes it; a loaded signature
  takes inputs of any shape): in a function that is never inlined, traced
  for any shape."""
  key = (x.dtype, tuple(want))
  if key not in _SHAPE_CHECKS:
    rank = len(want)
    known = [i for i, d in enumerate(want) if d is not None]

    def check(t):
      shape = tf.shape(t)
      ok = tf.equal(tf.size(shape), rank)
      if known:
        padded = tf.concat([shape, tf.zeros([rank], tf.int32)], 0)[:rank]
        got = tf.gather(padded, known)
        ok &= tf.reduce_all(tf.equal(got, [want[i] for i in known]))
      return ok, shape

    _SHAPE_CHECKS[key] = tf.function(
      check,
      autograph=False,
      input_signature=[tf.TensorSpec(None, x.dtype)],
      experimental_attributes={"_noinline": True},
    )
  return _SHAPE_CHECKS[key](x)


_GUARD = None


def _guarded(checks, leaves):
  """`leaves`, passed through a function that is never inlined and that
  first runs the asserts `checks` ((ok, message) pairs): nothing that
  reads its outputs can run unless every check passed. (Control
  dependencies on identities are not enough: once grappler inlines the
  signature's inner function, ops of it ran beside a failing check.)"""
  global _GUARD
  if _GUARD is None:

    def guard(oks, messages, *xs):
      first_false = tf.argmin(tf.cast(oks, tf.int32))
      ok = tf.debugging.Assert(
        tf.reduce_all(oks), [tf.gather(messages, first_false)]
      )
      with tf.control_dependencies([ok]):
        return [tf.identity(x) for x in xs]

    _GUARD = tf.function(
      guard, autograph=False, experimental_attributes={"_noinline": True}
    )
  if not checks:
    return list(leaves)
  oks = tf.stack([ok for ok, _ in checks])
  messages = tf.stack([m for _, m in checks])
  return _GUARD(oks, messages, *leaves)


def _shape_check(component, signature, argument, spec, x):
  """(ok, message): whether `x` has `spec`'s rank and its known dims."""
  want = spec.shape.as_list()
  ok, shape = _runtime_shape_check(x, want)
  expected = "[" + ", ".join("None" if d is None else str(d) for d in want)
  reason = f"input shape: expected {expected}] ({spec.dtype.name})"
  return ok, _check_text(
    component, signature, argument, reason, _dims_text(shape)
  )


def _body(executor, api_name):
  """The executor's own tf.function of a root API: the signature calls the
  graph the agent ran in-process (re-tracing its Python body instead could
  pick up other settings, e.g. the segment-tree implementation). What the
  nested call costs, benchmarks/export.py measures."""
  return executor.function(api_name)


def api_signature(executor, api_name, name=None):
  """`signature_function` of a built TFExecutor's root API."""
  arg_specs = {
    a: tensor_spec(executor.input_spaces[a])
    for a in executor.apis[api_name].arg_spaces
  }
  return signature_function(
    _body(executor, api_name),
    arg_specs,
    name or api_name,
    SINGLE_OUTPUT_NAMES.get(api_name, "output"),
    jit_compile=executor.jit_compile or None,
    component=executor.root.path,
  )


def policy_action_function(act, observation_space, state_space):
  """The `action` signature of an exported policy: one step of `act` (a
  policy's `act` root API function: see `runners.builder`, e.g. IMPALA's)
  with named inputs

    observation [B, ...] (a Dict space: `observation_<key>` per leaf,
      e.g. observation_RGB_INTERLEAVED uint8 and observation_INSTR string),
    first bool [B]: the first step of an episode (the state is zeroed
      before it),
    prev_reward float32 [B], prev_action int64 [B]: the reward that came
      with the observation and the action that led to it (0 at an
      episode's first step after a reset),
    state_<key> per leaf of `state_space` (IMPALA's: state_c, state_h
      float32 [B, S], S = 0 without an LSTM)

  -> {"action", "greedy_action" int64 [B], "logits" [B, A], "value" [B],
  "state_<key>"...}.
  """

  def step(x):
    return x[:, None]  # [B] -> [B, T = 1].

  def action(observation, first, prev_reward, prev_action, state):
    out = act(
      tf.nest.map_structure(step, observation),
      state,
      step(first),
      step(prev_reward),
      step(prev_action),
    )
    result = {
      "action": out["action"][:, 0],
      "greedy_action": out["greedy_action"][:, 0],
      "logits": out["logits"][:, 0],
      "value": out["values"][:, 0],
    }
    result.update(flat_outputs({"state": out["state"]}))
    return result

  return signature_function(
    action,
    {
      "observation": tensor_spec(observation_space.with_batch_rank()),
      "first": tf.TensorSpec([None], tf.bool),
      "prev_reward": tf.TensorSpec([None], tf.float32),
      "prev_action": tf.TensorSpec([None], tf.int64),
      "state": tensor_spec(state_space),
    },
    "action",
  )


def initial_state_function(state_space):
  """The `get_initial_state(batch_size int32 [])` signature: zeros of the
  policy's state, one output per leaf (`state_<key>`)."""
  leaves = _flat_specs({"state": tensor_spec(state_space)})

  @tf.function(
    autograph=False,
    input_signature=[tf.TensorSpec([], tf.int32, name="batch_size")],
  )
  def get_initial_state(batch_size):
    (batch_size,) = _guarded(
      [
        (
          batch_size >= 0,
          _check_text(
            "export",
            "get_initial_state",
            "batch_size",
            "expected >= 0",
            tf.strings.as_string(batch_size),
          ),
        )
      ],
      [batch_size],
    )
    return {
      name: tf.zeros([batch_size] + spec.shape[1:].as_list(), spec.dtype)
      for name, spec in leaves
    }

  return get_initial_state


def _state_shapes(state_space):
  """{state input name: per-row shape} (export metadata)."""
  return {
    name: spec.shape[1:].as_list()
    for name, spec in _flat_specs({"state": tensor_spec(state_space)})
  }


def _describe(concrete):
  inputs = concrete.structured_input_signature[0]
  outputs = concrete.structured_outputs
  return {
    "inputs": {s.name: [s.dtype.name, s.shape.as_list()] for s in inputs},
    "outputs": {
      k: [v.dtype.name, v.shape.as_list()] for k, v in sorted(outputs.items())
    },
  }


# --- the module and the writer -----------------------------------------------


class _AgentModule(tf.Module):
  """What the SavedModel holds: the executors' variables and resources
  (`state`), the metadata asset, and (as signatures) the API functions."""

  def __init__(self, name, state, metadata_path):
    super().__init__(name=name)
    self.state = state  # {name: executor.module}: tracked.
    self.metadata_file = tf.saved_model.Asset(metadata_path)


def _check_tf_executor(executor):
  from ingraph_rl.executors.tensorflow import TFExecutor

  if not isinstance(executor, TFExecutor):
    raise ExportError(
      f"export needs a built TFExecutor, got "
      f"{type(executor).__name__}: SavedModels hold TF "
      f"graphs (build the agent with backend='tf')"
    )


def _metadata_function(metadata):
  doc = json.dumps(metadata, sort_keys=True)
  exported = sorted(metadata["exported"])
  skipped = sorted(metadata["skipped"])

  @tf.function(input_signature=[], autograph=False)
  def get_metadata():
    return {
      "format_version": tf.constant(metadata["format_version"], tf.int32),
      "ingraph_rl_version": tf.constant(metadata["ingraph_rl_version"]),
      "exported": tf.constant(exported, tf.string, shape=[len(exported)]),
      "skipped": tf.constant(skipped, tf.string, shape=[len(skipped)]),
      "metadata_json": tf.constant(doc),
    }

  return get_metadata


def write_saved_model(
  path,
  name,
  state,
  functions,
  skipped,
  *,
  require_plain_tf=False,
  extra_metadata=None,
):
  """Writes the SavedModel: `functions` {signature: (api label,
  tf.function)} over `state` {name: tf.Module}; returns an ExportResult."""
  custom = {}
  for label, fn in functions.values():
    ops = _custom_ops(fn)
    if ops:
      custom[label] = ops
  custom_ops = sorted({o for ops in custom.values() for o in ops})
  if custom_ops:
    msg = (
      f"APIs {sorted(custom)} use ingraph_rl's custom segment-tree ops "
      f"{custom_ops}: the SavedModel needs "
      f"ingraph_rl.ops.load_segment_tree_ops() (or "
      f"ingraph_rl.export.load) before loading. For plain TF, build "
      f"with INGRAPH_RL_DISABLE_CUSTOM_OPS=1 or "
      f"segment_tree.DEFAULT_IMPL = 'tf'"
    )
    if require_plain_tf:
      raise ExportError(msg + " (require_plain_tf=True)", api=sorted(custom)[0])
    logging.warning("export: %s", msg)
  concretes = {
    sig: fn.get_concrete_function() for sig, (_, fn) in functions.items()
  }
  metadata = {
    "format_version": FORMAT_VERSION,
    "ingraph_rl_version": ingraph_rl.__version__,
    "tensorflow_version": tf.__version__,
    "agent": name,
    "exported": {sig: label for sig, (label, _) in functions.items()},
    "skipped": dict(skipped),
    "custom_ops": custom_ops,
    "signatures": {sig: _describe(c) for sig, c in concretes.items()},
  }
  metadata.update(extra_metadata or {})
  for api, reason in skipped.items():
    logging.info("export: skipped '%s': %s", api, reason)
  tmp = tempfile.mkdtemp(prefix="ingraph_rl_export_")
  try:
    meta_path = os.path.join(tmp, METADATA_FILE)
    with open(meta_path, "w") as f:
      json.dump(metadata, f, indent=2, sort_keys=True)
    module = _AgentModule(name, state, meta_path)
    signatures = dict(concretes)
    signatures["get_metadata"] = _metadata_function(
      metadata
    ).get_concrete_function()
    tf.saved_model.save(module, path, signatures=signatures)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return ExportResult(
    str(path), dict(metadata["exported"]), dict(skipped), custom_ops, metadata
  )


# --- the public entry points -------------------------------------------------


def export_agent(
  executor, path, apis=None, *, signature_names=None, require_plain_tf=False
):
  """Writes every pure-TF root API of a built agent executor as a signature
  of ONE SavedModel at `path`, with all its variables and resources.

  Args:
    executor: a built `TFExecutor` (e.g. `DQNBuilder(config).make_agent(
      observation_space).build()`).
    path: the SavedModel directory to write.
    apis: root API names to export; None: every built API, skipping (and
      recording) the ones that step an environment. A named API that steps
      an environment, or that is not built, raises `ExportError`.
    signature_names: {API: signature name}, over `SIGNATURE_NAMES`
      (get_actions -> action).
    require_plain_tf: raise `ExportError` if a signature needs ingraph_rl's
      custom ops (the SavedModel would not load without ingraph_rl).

  Returns:
    An `ExportResult` (exported signatures, skipped APIs with reasons).
  """
  _check_tf_executor(executor)
  names = dict(SIGNATURE_NAMES, **(signature_names or {}))
  built = list(executor.apis)
  if apis is None:
    wanted, explicit = built, False
  else:
    wanted, explicit = list(apis), True
    unknown = [a for a in wanted if a not in built]
    if unknown:
      raise ExportError(
        f"'{executor.root.path}' has no built API(s) {unknown}; built: {built}",
        api=unknown[0],
      )
  functions, skipped = {}, {}
  for api in wanted:
    nodes = env_stepping_ops(executor.function(api))
    if nodes:
      reason = _env_stepping_reason(api, nodes)
      if explicit:
        raise ExportError(reason, api=api)
      skipped[api] = reason
      continue
    sig = names.get(api, api)
    if sig in functions or sig == "get_metadata":
      raise ExportError(
        f"signature name '{sig}' (API '{api}') is taken", api=api
      )
    functions[sig] = (api, api_signature(executor, api, sig))
  return write_saved_model(
    path,
    executor.root.path,
    {executor.root.path: executor.module},
    functions,
    skipped,
    require_plain_tf=require_plain_tf,
  )


def export_actor_learner(
  actor_executor,
  learner_executor,
  path,
  *,
  name="agent",
  require_plain_tf=False,
):
  """Writes an actor and a learner of an actor-learner agent (see
  `runners.builder`; e.g. IMPALA's) as ONE SavedModel at `path`.

  `actor_executor`: the built actor root (`builder.make_actor(...)
  .build()`); `learner_executor`: the learner root built with
  `builder.make_learner(..., update_from_batch=True)`. Both keep their own
  variables (as in training: the actor acts with the weights it was last
  given): call `sync_weights` after updates to act with the new ones.
  `name`: the agent's name in the metadata (`builder.name`).

  Signatures (batch dims open; for IMPALA S is the LSTM size, 0 without an
  LSTM):
    action(observation [B, ...] (Dict observations: one input per leaf,
           `observation_<key>`), first bool [B], prev_reward float32 [B],
           prev_action int64 [B], state_c [B, S], state_h [B, S]) ->
           {"action", "greedy_action" int64 [B], "logits" [B, A], "value"
           [B], "state_c", "state_h"}: see `policy_action_function`.
    get_initial_state(batch_size int32 []) -> {"state_c", "state_h"}.
    update(rollouts_<field> [B, T + 1, ...]) -> the learner's loss dict;
      fields as the builder's `record_space` (IMPALA: observations (per
      leaf for Dict ones), actions, rewards, dones, logits, truncated,
      bootstrap_value, initial_state_c / _h with an LSTM).
    get_weights() -> the learner network's variables by path.
    get_train_step() -> {"train_step": int64}.
    sync_weights() -> {"train_step"}: copies the learner's weights into
      the actor's policy.
    queue_size() -> {"size": int32}: the rollout queue (empty on load).
  """
  _check_tf_executor(actor_executor)
  _check_tf_executor(learner_executor)
  if "update_from_batch" not in learner_executor.apis:
    raise ExportError(
      "the learner has no 'update_from_batch' API: build it "
      "with builder.make_learner(..., update_from_batch="
      "True)",
      api="update_from_batch",
    )
  state_space = actor_executor.input_spaces["state"]
  obs_space = actor_executor.input_spaces["observations"].strip_ranks()
  functions, skipped = {}, {}
  action = policy_action_function(
    _body(actor_executor, "act"), obs_space, state_space
  )
  get_initial_state = initial_state_function(state_space)

  functions["action"] = ("actor.act", action)
  functions["get_initial_state"] = (
    "actor (zeros of the policy state)",
    get_initial_state,
  )
  functions["update"] = (
    "learner.update_from_batch",
    api_signature(learner_executor, "update_from_batch", "update"),
  )
  for api in ("get_weights", "get_train_step", "queue_size"):
    functions[api] = (f"learner.{api}", api_signature(learner_executor, api))

  if "set_weights" in actor_executor.apis:
    set_weights = _body(actor_executor, "set_weights")
    get_weights = _body(learner_executor, "get_weights")
    train_step = _body(learner_executor, "get_train_step")

    @tf.function(autograph=False, input_signature=[])
    def sync_weights():
      done = set_weights(get_weights())
      with tf.control_dependencies(
        [t for t in tree.flatten(done) if t is not None]
      ):
        return {"train_step": tf.identity(train_step())}

    functions["sync_weights"] = (
      "learner.get_weights+actor.set_weights",
      sync_weights,
    )
  else:
    skipped["actor.set_weights"] = (
      "the actor was built without set_weights: no sync_weights"
    )

  queue_fed = (
    "the learner's queue is filled only by the actor's unroll, "
    "which steps an environment and is not exported: in a "
    "loaded agent it would block; use 'update' (a batch given "
    "as input)"
  )
  for api in learner_executor.apis:
    if api in ("update", "prime"):
      skipped[f"learner.{api}"] = queue_fed
    elif api == "close_queue":
      skipped["learner.close_queue"] = (
        "the threaded driver's shutdown path; nothing blocks on the "
        "queue of a loaded agent"
      )
  for api in actor_executor.apis:
    if api in ("act", "set_weights"):
      continue
    nodes = env_stepping_ops(actor_executor.function(api))
    skipped[f"actor.{api}"] = (
      _env_stepping_reason(api, nodes)
      if nodes
      else "not part of an exported actor-learner agent"
    )
  for label, fn in functions.values():
    nodes = env_stepping_ops(fn)
    if nodes:  # Never expected: the guard for future edits.
      raise ExportError(_env_stepping_reason(label, nodes), api=label)
  return write_saved_model(
    path,
    name,
    {"actor": actor_executor.module, "learner": learner_executor.module},
    functions,
    skipped,
    require_plain_tf=require_plain_tf,
    extra_metadata={"state": _state_shapes(state_space)},
  )


# --- loading -----------------------------------------------------------------


def read_metadata(path):
  """The export metadata of the SavedModel at `path` (without loading it)."""
  meta_path = os.path.join(str(path), "assets", METADATA_FILE)
  try:
    with open(meta_path) as f:
      return json.load(f)
  except FileNotFoundError:
    raise ExportError(
      f"'{path}' has no {METADATA_FILE} in assets/: not an agent "
      f"SavedModel written by ingraph_rl.export.export_agent (load other "
      f"SavedModels with tf.saved_model.load)"
    ) from None
  except json.JSONDecodeError as e:
    raise ExportError(f"'{meta_path}' is not valid JSON: {e}") from None


def check_compatible(metadata, path="the SavedModel"):
  """Raises `ExportError` unless this ingraph_rl reads `metadata`'s
  format version."""
  version = metadata.get("format_version")
  if version not in READABLE_FORMAT_VERSIONS:
    writer = metadata.get("ingraph_rl_version", "an unknown version")
    raise ExportError(
      f"'{path}' is an agent SavedModel of export format version "
      f"{version!r}, written by ingraph_rl {writer}; this ingraph_rl "
      f"({ingraph_rl.__version__}) reads format version(s) "
      f"{list(READABLE_FORMAT_VERSIONS)}. Load it with ingraph_rl "
      f"{writer}, or export the agent again with this version"
    )


def load(path):
  """Loads an agent SavedModel after checking its format version (and
  registering ingraph_rl's custom ops when it needs them). Returns what
  `tf.saved_model.load` returns: call `.signatures[name](**inputs)`."""
  metadata = read_metadata(path)
  check_compatible(metadata, path)
  if metadata.get("custom_ops"):
    from ingraph_rl import ops

    if ops.load_segment_tree_ops() is None:
      raise ExportError(
        f"'{path}' needs ingraph_rl's custom ops {metadata['custom_ops']}, "
        f"but the op library is not available (built? "
        f"{ops.DISABLE_ENV} set?); rebuild with `pip install -e .`, or "
        f"re-export with the pure-TF segment tree"
      )
  return tf.saved_model.load(str(path))
