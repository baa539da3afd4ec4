"""What core asks of an executor: the one way a backend reaches core.

Core imports neither TensorFlow nor torch. The builder, `Component` (its
`add_variable` / `add_resource` inside `create_variables`) and `InlineApi`
call the executor that builds them, which implements `Backend`
(`executors.tensorflow.TFExecutor`, `executors.torch.TorchExecutor`).
Values of the backend (tensors, variables) pass through core untouched,
typed `Any`.
"""

import typing

from ingraph_rl.core.inference import InputLead
from ingraph_rl.core.meta_graph import GraphFnNode
from ingraph_rl.core.variables import VariableSpec
from ingraph_rl.spaces import Space


class Backend(typing.Protocol):
  """An executor, as core sees it."""

  @property
  def backend(self) -> str:
    """The backend's name: "tensorflow" or "torch" (it picks a
    component's resource factory, see `Component.add_resource`)."""
    ...

  # --- variables and resources (inside `create_variables`) ---------------

  def create_variables(
    self, component: typing.Any, input_spaces: dict[str, Space]
  ) -> None:
    """Runs `component.create_variables(input_spaces)` (in the backend's
    variable-making context)."""
    ...

  def make_variable(
    self, component: typing.Any, spec: VariableSpec
  ) -> typing.Any:
    """A backend variable of `spec` (its initial value included)."""
    ...

  def make_resource(
    self,
    component: typing.Any,
    path: str,
    factory: typing.Callable[[], typing.Any],
  ) -> typing.Any:
    """Calls `factory` where the backend keeps state objects."""
    ...

  # --- the build's worklist ----------------------------------------------

  def run(
    self,
    node: GraphFnNode,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> typing.Any:
    """Runs the backend's body of a graph-function node."""
    ...

  def getitem(
    self, value: typing.Any, key: typing.Any, node: GraphFnNode
  ) -> typing.Any:
    """`value[key]` of a build-time value."""
    ...

  def value_shape(self, value: typing.Any) -> list[int | None]:
    """The shape of a build-time value, None for dims known only later."""
    ...

  def value_space(
    self,
    value: typing.Any,
    in_spaces: typing.Sequence[Space | None],
    in_leads: typing.Iterable[InputLead] = (),
  ) -> typing.Any:
    """The space (nest) of a graph function's build-time result."""
    ...

  # --- inline APIs ---------------------------------------------------------

  def replay(
    self,
    nodes: list[GraphFnNode],
    input_ids: list[int],
    args: typing.Sequence[typing.Any],
    outputs: typing.Any,
    record: bool = False,
  ) -> typing.Any:
    """Runs recorded nodes on `args` and returns the `outputs` nest of
    values (`record`: on a gradient tape, for nodes that differentiate)."""
    ...
