"""Device strategies of the TF executor: where variables and ops run, and
synchronous multi-tower updates.

    DefaultStrategy()                TF's own placement (the first GPU if
                                     there is one, else the CPU).
    DeviceMapStrategy(device_map)    component path (prefix) -> device, for
                                     a component's variables and ops; what
                                     `TFExecutor(device_map=...)` makes.
    MultiTowerStrategy(devices, split_at=...)
                                     an update API's batch split over
                                     several devices, one update applied.

    strategy = MultiTowerStrategy(["/gpu:0", "/gpu:1"], split_at="dqn/memory")
    executor = DQNBuilder(config).make_agent(obs_space).build(
        strategy=strategy)
    executor.execute("update")       # 2 towers of batch_size / 2 each

    # IMPALA's learner: its V-trace loss is a sum over time and batch.
    strategy = MultiTowerStrategy(
        ["/gpu:0", "/gpu:1"], split_at="learner/staging_area",  # or
        loss_reduction="sum",            # "learner/fifo_queue" unstaged
        output_reductions={"mean_*": "mean"})
    learner = IMPALABuilder(config).make_learner(obs_space).build(
        strategy=strategy)

How the towers come about (while each tower API is traced into its
`tf.function`, from the recorded meta graph: agents change nothing):

1. Plan (at build). The optimizer step is the graph function that takes
   gradients (`needs_gradients=True`). The batch is the output of the
   graph functions of component `split_at` that feed a step (e.g.
   `memory.sample`, `staging_area.get`), or the API's arguments with
   `split_at=None`. Tower nodes are the nodes that depend on the batch and
   feed a step: the forward passes and the loss. All other nodes, the
   step included, are shared and run once, in the recorded order.
2. Split. Every batch leaf with a batch rank is split into K equal slices
   along its batch dim (dim 1 of time-major leaves); other leaves go to
   every tower whole. K must divide the batch (a BuildError when the size
   is static, a SpaceError at run time otherwise).
3. Towers. Each tower node runs K times, tower k under
   `tf.device(devices[k])` on slice k. Everything is recorded on the API's
   one gradient tape, as without towers.
4. Merge. A shared node (and the API's result) that takes a tower value
   gets it merged: leaves with a batch rank are concatenated in tower order
   (so per-sample outputs line up with the batch: DQN's TD errors reach
   `update_priorities` as B values, matching its B indices); other leaves
   (scalars) are combined by `loss_reduction`, or by the first matching
   pattern of `output_reductions`.
5. Gradients. The step gets the merged loss. `executors.gradients.
   tf_gradients` hands it to its `TowerLoss` (registered with
   `tf_gradient_overrides`), which differentiates each tower's loss on that
   tower's device and combines the gradients as the losses were combined,
   on each variable's device: exactly the gradient of the merged loss (the
   gradient of a mean of losses is the mean of their gradients). The
   optimizer clips and applies them once, without knowing about towers.

Reductions. "mean" suits losses that average over the batch (DQN's): the
mean of K tower means over B/K samples each is the mean over B. "sum"
suits losses that sum over the batch (IMPALA's V-trace loss sums over time
and batch): the sum of the tower sums is the sum over B. Statistics that
are means under a summed loss (IMPALA's "mean_vs", ...) need
`output_reductions={"mean_*": "mean"}`; "first" takes tower 0's value (for
values every tower computes alike). Patterns (fnmatch) are matched against
a leaf's key path in the value it belongs to, "/"-joined: "loss",
"mean_vs", "td_errors".

Equivalence. K towers give the update of one tower on the whole batch, up
to float rounding, when the tower nodes treat samples independently (no
statistics across the batch, such as batch norm) and hold no state: a
variable assignment or random draw between the batch and the loss runs once
per tower.

Placement. Variables stay where they are made: the strategy's `device_map`
or TF's default (the first GPU, else CPU:0). Towers read them across
devices (on GPUs: a copy per tower and update, as in TF's classic
in-graph replication with variables on one device); gradients are
combined and applied on each variable's device. Shared nodes follow the
device map.

On GPUs give e.g. `local_tower_devices(2)`; without GPUs the towers run on
logical CPU devices (`configure_logical_cpus(2)` before TF starts), which
share the cores: there they show the overhead of towers, not a speed-up.

Which APIs. The root APIs named in `apis`, and the same APIs where another
API inlines them (DQN's in-graph `train` loop inlines `update`: its updates
run as towers too, planned with the root API's spaces, so that API must be
built as well). TF executor only.
"""

import dataclasses
import fnmatch
import typing

import tensorflow as tf
import tree

from ingraph_rl.core.meta_graph import GraphFnNode, InlineApi, OpRecord, RootApi
from ingraph_rl.errors import BuildError
from ingraph_rl.executors import gradients
from ingraph_rl.executors.checks import tf_check, tf_transaction
from ingraph_rl.spaces import BoxSpace, Space

if typing.TYPE_CHECKING:
  from ingraph_rl.executors.tensorflow import TFExecutor

REDUCTIONS = ("mean", "sum", "first")

# Per leaf of a value: (key path, leaf space or None, build-time shape).
_LeafInfo = list[tuple[str, BoxSpace | None, typing.Any]]


class Plan(typing.Protocol):
  """How a strategy runs one API (see `Strategy.plan`)."""

  def replay(self, args: typing.Sequence[typing.Any]) -> typing.Any:
    """Traces the API on `args` (inside its tf.function); returns its
    outputs."""
    ...


class Strategy:
  """Base: `device_map` for variables and ops, and per root API an optional
  plan that replaces the plain replay."""

  device_map: dict[str, str] = {}

  def validate(self, executor: "TFExecutor") -> None:
    """Checks the strategy against a built executor (before tracing)."""

  def plan(self, executor: "TFExecutor", rapi: RootApi) -> Plan | None:
    """A plan with `replay(args)` for root API `rapi`, or None to replay
    its nodes as recorded."""
    del executor, rapi
    return None

  def plan_inline(
    self, executor: "TFExecutor", inline: InlineApi
  ) -> Plan | None:
    """The same for an API inlined into another (`core.inline`)."""
    del executor, inline
    return None

  def __repr__(self) -> str:
    return f"{type(self).__name__}()"


class DefaultStrategy(Strategy):
  """TF places everything (the first GPU if present, else the CPU)."""

  def __init__(self) -> None:
    self.device_map = {}


class DeviceMapStrategy(Strategy):
  """Component path (or path prefix) -> TF device string; the longest
  matching prefix places that component's variables and ops."""

  def __init__(self, device_map: typing.Mapping[str, str]) -> None:
    self.device_map = dict(device_map)

  def __repr__(self) -> str:
    return f"DeviceMapStrategy({self.device_map!r})"


class MultiTowerStrategy(Strategy):
  """Synchronous data-parallel towers for update APIs (see module doc).

  Args:
    devices: one TF device string per tower, e.g. ["/gpu:0", "/gpu:1"] or
      logical CPUs ["/cpu:0", "/cpu:1"].
    split_at: path of the component whose graph-function output is the
      batch (e.g. "dqn/memory", "learner/staging_area"); None: the API's
      arguments are the batch.
    apis: root APIs to build as towers.
    loss_reduction: "mean" (losses averaged over the batch) or "sum"
      (losses summed over it); also merges the other per-tower scalars.
    output_reductions: {fnmatch pattern: "mean" | "sum" | "first"} for
      per-tower leaves without a batch rank, first match wins.
    device_map: as `DeviceMapStrategy`, for variables and shared nodes.
  """

  def __init__(
    self,
    devices: typing.Sequence[str],
    split_at: str | None,
    apis: str | typing.Iterable[str] = ("update",),
    loss_reduction: str = "mean",
    output_reductions: typing.Mapping[str, str] | None = None,
    device_map: typing.Mapping[str, str] | None = None,
  ) -> None:
    if isinstance(devices, str) or not devices:
      raise BuildError(
        "MultiTowerStrategy: devices must be a non-empty list "
        "of device strings, one per tower"
      )
    if isinstance(apis, str):
      apis = (apis,)
    self.devices = [str(d) for d in devices]
    self.split_at = split_at
    self.apis = tuple(apis)
    self.output_reductions = dict(output_reductions or {})
    for what, rule in [("loss_reduction", loss_reduction)] + [
      (f"output_reductions[{k!r}]", v)
      for k, v in self.output_reductions.items()
    ]:
      if rule not in REDUCTIONS or (
        what == "loss_reduction" and rule == "first"
      ):
        allowed = REDUCTIONS if what != "loss_reduction" else ("mean", "sum")
        raise BuildError(
          f"MultiTowerStrategy: {what} must be one of {allowed}, got {rule!r}"
        )
    self.loss_reduction = loss_reduction
    self.device_map = dict(device_map or {})

  @property
  def num_towers(self) -> int:
    return len(self.devices)

  def reduction_for(self, name: str) -> str:
    """The reduction of a per-tower leaf without a batch rank."""
    for pattern, rule in self.output_reductions.items():
      if fnmatch.fnmatchcase(name, pattern):
        return rule
    return self.loss_reduction

  def validate(self, executor: "TFExecutor") -> None:
    missing = [a for a in self.apis if a not in executor.meta_graph.apis]
    if missing:
      raise BuildError(
        f"MultiTowerStrategy: no built root API {missing} of "
        f"'{executor.root.path}'; built APIs: "
        f"{sorted(executor.meta_graph.apis)}"
      )

  def plan(self, executor: "TFExecutor", rapi: RootApi) -> "TowerPlan | None":
    if rapi.name not in self.apis:
      return None
    return TowerPlan(
      self,
      executor,
      rapi.name,
      rapi.nodes,
      [rapi.inputs[a].id for a in rapi.arg_names],
      rapi.outputs,
    )

  def plan_inline(
    self, executor: "TFExecutor", inline: InlineApi
  ) -> "TowerPlan | None":
    """The plan of an inlined tower API (e.g. DQN's `train` loop inlining
    `update`): that of the root API it repeats, node for node."""
    if inline.component is not executor.root or inline.name not in self.apis:
      return None
    rapi = executor.meta_graph.apis.get(inline.name)
    where = f"MultiTowerStrategy: API '{inline.name}' inlined into another API"
    if rapi is None:
      raise BuildError(
        f"{where} needs '{inline.name}' built as a root API "
        f"too (towers plan with its spaces); add it to "
        f"api_names"
      )
    pairs = list(zip(inline.nodes, rapi.nodes))
    if len(inline.nodes) != len(rapi.nodes) or any(
      a.component is not b.component
      or a.fn is not b.fn
      or a.getitem_key != b.getitem_key
      for a, b in pairs
    ):
      raise BuildError(
        f"{where} records other graph functions than root "
        f"API '{inline.name}'; towers cannot plan it"
      )
    space_ids = {a.output.id: b.output.id for a, b in pairs}
    by_label = {r.label: r.id for r in rapi.inputs.values()}
    space_ids.update(
      {r.id: by_label[r.label] for r in inline.inputs if r.label in by_label}
    )
    return TowerPlan(
      self,
      executor,
      inline.name,
      inline.nodes,
      [r.id for r in inline.inputs],
      inline.outputs,
      space_ids,
    )

  def __repr__(self) -> str:
    return (
      f"MultiTowerStrategy({self.devices!r}, split_at="
      f"{self.split_at!r}, apis={self.apis!r}, loss_reduction="
      f"{self.loss_reduction!r})"
    )


class TowerPlan:
  """Which nodes of one API run per tower; `replay` traces them.

  `space_ids`: record id -> the id of the root-API record whose space and
  build-time shape it has (for an inlined API); default: its own.
  """

  def __init__(
    self,
    strategy: MultiTowerStrategy,
    executor: "TFExecutor",
    name: str,
    nodes: list[GraphFnNode],
    input_ids: typing.Iterable[int],
    outputs: typing.Any,
    space_ids: dict[int, int] | None = None,
  ) -> None:
    self.strategy = strategy
    self.executor = executor
    self.name = name
    self.nodes = nodes
    self.input_ids = list(input_ids)
    self.outputs = outputs
    self.space_ids = space_ids or {}
    self.where = f"MultiTowerStrategy, API '{name}'"
    steps = [n for n in nodes if n.fn is not None and n.fn.needs_gradients]
    if not steps:
      raise BuildError(
        f"{self.where}: no optimizer step (no graph function with "
        f"needs_gradients=True): towers split the batch of an update "
        f"API; list only such APIs in `apis`"
      )
    # Records the steps need, transitively.
    feeds = {r.id for n in steps for r in n.inputs()}
    for node in reversed(nodes):
      if node.output.id in feeds:
        feeds.update(r.id for r in node.inputs())
    self.sources = self._find_sources(nodes, feeds)
    if not any(self._batched(rid) for rid in self.sources):
      raise BuildError(
        f"{self.where}: the batch of {self._split_name()} "
        f"has no leaf with a batch rank to split"
      )
    # Tower nodes: depend on the batch and feed a step.
    batch_dependent = set(self.sources)
    self.tower_ids = set()
    for node in nodes:
      if node.output.id in self.sources:
        continue
      if any(r.id in batch_dependent for r in node.inputs()):
        batch_dependent.add(node.output.id)
        if node.output.id in feeds:
          self.tower_ids.add(node.id)
    if not self.tower_ids:
      raise BuildError(
        f"{self.where}: the optimizer step's loss does not "
        f"depend on the batch of {self._split_name()}"
      )
    for step in steps:
      if step.id in self.tower_ids:
        raise BuildError(
          f"{self.where}: optimizer step '{step.component.path}' feeds "
          f"another step with a batch-dependent value; towers support "
          f"steps whose losses depend on the batch only"
        )

  def _split_name(self) -> str:
    split_at = self.strategy.split_at
    return "the API's arguments" if split_at is None else f"'{split_at}'"

  def _find_sources(
    self, nodes: list[GraphFnNode], feeds: set[int]
  ) -> set[int]:
    split_at = self.strategy.split_at
    if split_at is None:
      sources = set(self.input_ids)
      if not sources:
        raise BuildError(
          f"{self.where}: split_at=None splits the API's arguments, but "
          f"it takes none; give split_at=<path of the component whose "
          f"output is the batch>{self._candidates(nodes, feeds)}"
        )
      return sources
    own = [
      n for n in nodes if n.fn is not None and n.component.path == split_at
    ]
    if not own:
      raise BuildError(
        f"{self.where}: split_at '{split_at}' runs no graph function in "
        f"this API{self._candidates(nodes, feeds)}"
      )
    sources = {n.output.id for n in own if n.output.id in feeds}
    if not sources:
      raise BuildError(
        f"{self.where}: no graph function of split_at '{split_at}' feeds "
        f"the optimizer step's loss{self._candidates(nodes, feeds)}"
      )
    return sources

  def space_of(self, record_id: int) -> Space | None:
    """The build-time space of a record (None if unknown)."""
    return self.executor.record_spaces.get(
      self.space_ids.get(record_id, record_id)
    )

  def shape_of(self, record_id: int) -> typing.Any:
    """The build-time static shape (nest) of a record, or None."""
    return self.executor.record_shapes.get(
      self.space_ids.get(record_id, record_id)
    )

  def _batched(self, record_id: int) -> bool:
    space = self.space_of(record_id)
    return space is not None and any(
      s.has_batch_rank for _, s in space.flatten()
    )

  def _candidates(self, nodes: list[GraphFnNode], feeds: set[int]) -> str:
    """Where batches start: graph functions that feed the loss with a
    batch-ranked output from inputs without one."""
    paths = []
    for n in nodes:
      if (
        n.fn is not None
        and n.output.id in feeds
        and self._batched(n.output.id)
        and not any(self._batched(r.id) for r in n.inputs())
        and n.component.path not in paths
      ):
        paths.append(n.component.path)
    return (
      f"; graph functions where a batch that feeds the loss starts "
      f"belong to {paths}"
      if paths
      else ""
    )

  def replay(self, args: typing.Sequence[typing.Any]) -> typing.Any:
    """Traces the API with towers (inside its tf.function); returns its
    outputs."""
    with (
      # Each tower differentiates on it: persistent.
      gradients.tf_recording(persistent=True),
      gradients.tf_gradient_overrides({}) as registry,
    ):
      # Its own transaction, like any replay: inlined in a loop, its
      # deferred writes (RNG advances) happen once per iteration.
      return tf_transaction(lambda: _TowerTrace(self, registry).run(args))


class _TowerTrace:
  """The values of one trace: shared (once), per tower, merged, split."""

  def __init__(
    self, plan: TowerPlan, registry: dict[int, gradients.GradientOverride]
  ) -> None:
    self.plan = plan
    self.strategy = plan.strategy
    self.executor = plan.executor
    self.registry = registry
    self.values: dict[int, typing.Any] = {}  # Record id -> shared value.
    # Record id -> [value per tower].
    self.towers: dict[int, list[typing.Any]] = {}
    # Record id -> merged value of a tower record.
    self.merged: dict[int, typing.Any] = {}
    # Record id -> [slice per tower] of a batch.
    self.slices: dict[int, list[typing.Any]] = {}

  def run(self, args: typing.Sequence[typing.Any]) -> typing.Any:
    self.values.update(zip(self.plan.input_ids, args))
    for node in self.plan.nodes:
      if node.id in self.plan.tower_ids:
        self.towers[node.output.id] = [
          self._run_tower(node, k) for k in range(self.strategy.num_towers)
        ]
        continue
      args_, kwargs = self._shared(node.args), self._shared(node.kwargs)
      if node.fn is None:
        self.values[node.output.id] = args_[0][node.getitem_key]
      else:
        with tf.name_scope(node.component.path.replace("/", "_")):
          self.values[node.output.id] = self.executor.run(node, args_, kwargs)
    return self._shared(self.plan.outputs)

  # --- views of records --------------------------------------------------

  def _shared(self, nest: typing.Any) -> typing.Any:
    def value(x: OpRecord) -> typing.Any:
      if x.id in self.towers:
        if x.id not in self.merged:
          self.merged[x.id] = self._merge(x, self.towers[x.id])
        return self.merged[x.id]
      return self.values[x.id]

    return _resolve(value, nest)

  def _tower(self, nest: typing.Any, k: int) -> typing.Any:
    def value(x: OpRecord) -> typing.Any:
      if x.id in self.towers:
        return self.towers[x.id][k]
      if x.id in self.plan.sources:
        if x.id not in self.slices:
          self.slices[x.id] = self._split(x)
        return self.slices[x.id][k]
      return self.values[x.id]

    return _resolve(value, nest)

  def _run_tower(self, node: GraphFnNode, k: int) -> typing.Any:
    args, kwargs = self._tower(node.args, k), self._tower(node.kwargs, k)
    if node.fn is None:
      return args[0][node.getitem_key]
    # The tower device wins over the device map: the point is to move the
    # work.
    scope = f"tower{k}_" + node.component.path.replace("/", "_")
    with tf.device(self.strategy.devices[k]), tf.name_scope(scope):
      return node.fn.tf_body(node.component, *args, **kwargs)

  # --- split and merge -------------------------------------------------------

  def _leaves(
    self, record: OpRecord, value: typing.Any
  ) -> tuple[_LeafInfo, list[typing.Any], typing.Any]:
    """[(name, leaf space or None, build-time shape or None)] and the flat
    leaves of `value`, the value of `record`."""
    space = self.plan.space_of(record.id)
    shapes = self.plan.shape_of(record.id)
    if space is None:
      flat = tree.flatten(value)
      info: _LeafInfo = [(_name(record, ()), None, None) for _ in flat]
      return info, flat, value
    struct = space.structure()
    flat = tree.flatten_up_to(struct, value, check_types=False)
    flat_shapes: list[typing.Any] = [None] * len(flat)
    if shapes is not None:
      try:
        flat_shapes = tree.flatten_up_to(struct, shapes, check_types=False)
      except (TypeError, ValueError):
        pass
    info = [
      (_name(record, path), s, shape)
      for (path, s), shape in zip(space.flatten(), flat_shapes)
    ]
    return info, flat, struct

  def _split(self, record: OpRecord) -> list[typing.Any]:
    value = self.values[record.id]
    info, flat, struct = self._leaves(record, value)
    k_towers = self.strategy.num_towers
    per_tower: list[list[typing.Any]] = [[] for _ in range(k_towers)]
    for (name, space, _), leaf in zip(info, flat):
      if space is None or not space.has_batch_rank:
        for k in range(k_towers):
          per_tower[k].append(leaf)
        continue
      axis = _batch_axis(space)
      size = leaf.shape[axis] if leaf.shape.rank is not None else None
      if size is not None and size % k_towers:
        raise BuildError(
          f"{self.plan.where}: the batch of {self.plan._split_name()} has "
          f"{size} rows (leaf '{name}'), which {k_towers} towers cannot "
          f"split evenly; use a batch size divisible by {k_towers}"
        )
      if size is None:
        ok = tf.equal(tf.shape(leaf)[axis] % k_towers, 0)
        check = tf_check(
          ok,
          self.strategy.split_at or self.executor.root,
          self.plan.name,
          name or "batch",
          f"the batch must split evenly into {k_towers} towers",
        )
        with tf.control_dependencies([check]):
          leaf = tf.identity(leaf)
      for k, part in enumerate(tf.split(leaf, k_towers, axis=axis)):
        per_tower[k].append(part)
    return [tree.unflatten_as(struct, leaves) for leaves in per_tower]

  def _merge(
    self, record: OpRecord, tower_values: list[typing.Any]
  ) -> typing.Any:
    infos: _LeafInfo = []
    flats = []
    struct = None
    for value in tower_values:
      info, flat, struct = self._leaves(record, value)
      infos = infos or info
      flats.append(flat)
    out: list[typing.Any] = []
    for i, (name, space, shape) in enumerate(infos):
      leaves = [f[i] for f in flats]
      if not isinstance(leaves[0], (tf.Tensor, tf.Variable)):
        out.append(leaves[0])  # A Python value: the same in every tower.
        continue
      if space is not None and space.has_batch_rank:
        merged = tf.concat(leaves, axis=_batch_axis(space))
        rule = "sum"  # A loss summed over samples sums over towers too.
      else:
        self._check_unbatched(record, name, shape, leaves[0])
        rule = self.strategy.reduction_for(name)
        merged = _reduce(rule, leaves)
      self.registry[id(merged)] = TowerLoss(
        merged, leaves, self.strategy.devices, rule
      )
      out.append(merged)
    return tree.unflatten_as(struct, out)

  def _check_unbatched(
    self,
    record: OpRecord,
    name: str,
    build_shape: typing.Any,
    leaf: typing.Any,
  ) -> None:
    """A leaf reduced as a scalar must not have changed shape with the
    batch (its space would miss a batch rank)."""
    if build_shape is None or leaf.shape.rank is None:
      return
    shape = leaf.shape.as_list()
    if None not in shape + list(build_shape) and shape != list(build_shape):
      raise BuildError(
        f"{self.plan.where}: {record.label} leaf '{name}' has shape "
        f"{list(build_shape)} on the whole batch but {list(shape)} in a "
        f"tower, yet its space has no batch rank, so towers cannot merge "
        f"it; declare the graph function's output_space with a batch rank"
      )


@dataclasses.dataclass(eq=False)
class TowerLoss:
  """A value merged from per-tower values: `merged` = combine(`losses`).

  Registered with `gradients.tf_gradient_overrides`, it gives
  `tf_gradients(merged, variables)`: the gradients of each tower's loss,
  taken on its tower's device, combined on each variable's device the way
  the losses were combined.
  """

  merged: typing.Any
  losses: list  # One tensor per tower.
  devices: list  # The tower devices, in the same order.
  combine: str  # "mean", "sum" or "first".

  def gradients(
    self, tape: tf.GradientTape, variables: typing.Any
  ) -> typing.Any:
    if self.combine not in ("mean", "sum"):
      raise BuildError(
        f"the loss handed to the optimizer merges its towers with "
        f"'{self.combine}'; a loss must merge with 'mean' or 'sum' (see "
        f"MultiTowerStrategy's loss_reduction and output_reductions)"
      )
    flat = tree.flatten(variables)
    per_tower: list[list[typing.Any]] = []
    for loss, device in zip(self.losses, self.devices):
      with tf.device(device):
        per_tower.append(tape.gradient(loss, flat))
    out: list[typing.Any] = []
    for i, var in enumerate(flat):
      grads = [g[i] for g in per_tower if g[i] is not None]
      if not grads:
        out.append(None)
        continue
      with tf.device(getattr(var, "device", None) or None):
        total = tf.add_n([tf.convert_to_tensor(g) for g in grads])
        if self.combine == "mean":
          total = total / tf.cast(len(self.losses), total.dtype)
      out.append(total)
    return tree.unflatten_as(variables, out)


def _resolve(
  value: typing.Callable[[OpRecord], typing.Any], nest: typing.Any
) -> typing.Any:
  """`nest` with each record replaced by `value(record)`."""
  return tree.map_structure(
    lambda x: value(x) if isinstance(x, OpRecord) else x, nest
  )


def _name(record: OpRecord, leaf_path: typing.Sequence[typing.Any]) -> str:
  """The key path of a leaf: getitem keys from the graph function's output,
  then the leaf's path in the value ("loss", "mean_vs")."""
  keys = list(leaf_path)
  node = record.producer
  while node is not None and node.fn is None:
    keys.insert(0, node.getitem_key)
    node = node.args[0].producer
  return "/".join(str(k) for k in keys)


def _batch_axis(space: Space) -> int:
  return 1 if space.has_time_rank and space.time_major else 0


def _reduce(rule: str, leaves: list[typing.Any]) -> typing.Any:
  dtype = leaves[0].dtype
  if (
    rule == "first"
    or len(leaves) == 1
    or not (dtype.is_floating or dtype.is_integer or dtype.is_complex)
  ):
    return tf.identity(leaves[0])  # Bools, strings: tower 0's.
  total = tf.add_n(leaves)
  if rule == "sum":
    return total
  if total.dtype.is_floating or total.dtype.is_complex:
    return total / tf.cast(len(leaves), total.dtype)
  return total // len(leaves)


# --- devices --------------------------------------------------------------


def configure_logical_cpus(num: int) -> list[str]:
  """Splits the CPU into `num` logical devices ("/device:CPU:0" ...), for
  towers without GPUs. Must run before TF initializes its devices (before
  the first op); a clear error otherwise."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  try:
    tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * int(num)
    )
  except RuntimeError as e:
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == int(num):
      return [f"/device:CPU:{i}" for i in range(int(num))]
    raise BuildError(
      f"configure_logical_cpus({num}) after TF initialized its devices; "
      f"call it first thing (before any op runs): {e}"
    ) from None
  return [f"/device:CPU:{i}" for i in range(int(num))]


def local_tower_devices(num_towers: int) -> list[str]:
  """`num_towers` device strings: the local (logical) GPUs if there are
  that many, else logical CPUs (see `configure_logical_cpus`)."""
  for kind in ("GPU", "CPU"):
    devices = tf.config.list_logical_devices(kind)
    if len(devices) >= num_towers:
      return [d.name for d in devices[:num_towers]]
  raise BuildError(
    f"local_tower_devices({num_towers}): only "
    f"{len(tf.config.list_logical_devices('GPU'))} GPUs and "
    f"{len(tf.config.list_logical_devices('CPU'))} logical CPUs; call "
    f"configure_logical_cpus({num_towers}) before TF starts"
  )
