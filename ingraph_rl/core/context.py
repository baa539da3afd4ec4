"""The running assembly, per thread.

API methods, graph functions and records (`@api`, `@graph_fn`,
`OpRecord.__getitem__`) report to the assembly that is running when they are
called. They find it here, so neither `decorators` nor `meta_graph` imports
`assembly` (which imports them): `assembly.assemble` installs itself with
`assembling`, and everything else asks `current()` for a `Recorder`.
"""

import contextlib
import threading
import typing

from ingraph_rl.errors import AssemblyError

_STATE = threading.local()


class Recorder(typing.Protocol):
  """What API methods, graph functions and records need of an assembly
  (`core.assembly.Assembly` implements it)."""

  def call_api(
    self,
    component: typing.Any,
    method: typing.Any,
    args: typing.Any,
    kwargs: dict[str, typing.Any],
  ) -> typing.Any: ...

  def call_graph_fn(
    self,
    component: typing.Any,
    fn: typing.Any,
    args: typing.Any,
    kwargs: dict[str, typing.Any],
  ) -> typing.Any: ...

  def record_getitem(
    self, record: typing.Any, key: typing.Any
  ) -> typing.Any: ...

  def inline_api(
    self, component: typing.Any, method: typing.Any
  ) -> typing.Any: ...


def current(component: typing.Any = None, what: str | None = None) -> Recorder:
  """The running assembly; a clear error when there is none."""
  asm = getattr(_STATE, "assembly", None)
  if asm is None:
    where = f" ('{component.path}'.{what})" if component is not None else ""
    raise AssemblyError(
      f"API methods and graph functions{where} run only while an "
      f"executor assembles the component; build it with "
      f"TFExecutor(component, input_spaces) or TorchExecutor(...) and call "
      f"executor.execute(api_name, ...)"
    )
  return asm


@contextlib.contextmanager
def assembling(recorder: Recorder) -> typing.Iterator[Recorder]:
  """Makes `recorder` the running assembly inside (restoring the previous
  one after, so assemblies may nest)."""
  previous = getattr(_STATE, "assembly", None)
  _STATE.assembly = recorder
  try:
    yield recorder
  finally:
    _STATE.assembly = previous
