"""Errors raised by ingraph_rl. Every message names where the problem is."""


class IngraphError(Exception):
  """Base class of all ingraph_rl errors."""


class SpaceError(IngraphError, ValueError):
  """A value or space does not match the space that was expected.

  The message names the component path, the API method, the argument, the
  expected space and what was received, as far as they are known where it is
  raised. Executors add the context the space itself does not know.
  """

  def __init__(
    self,
    reason,
    *,
    component=None,
    api=None,
    argument=None,
    expected=None,
    received=None,
  ):
    self.reason = reason
    self.component = component
    self.api = api
    self.argument = argument
    self.expected = expected
    self.received = received
    super().__init__(self._message())

  def _message(self):
    where = []
    if self.component is not None:
      where.append(f"component '{self.component}'")
    if self.api is not None:
      where.append(f"API method '{self.api}'")
    if self.argument is not None:
      where.append(f"argument '{self.argument}'")
    msg = (", ".join(where) + ": " if where else "") + self.reason
    if self.expected is not None:
      msg += f"\n  expected: {self.expected}"
    if self.received is not None:
      msg += f"\n  received: {self.received}"
    return msg

  def with_context(self, *, component=None, api=None, argument=None):
    """A copy with missing context filled in (keeps what is already known)."""
    return SpaceError(
      self.reason,
      component=self.component if self.component is not None else component,
      api=self.api if self.api is not None else api,
      argument=self.argument if self.argument is not None else argument,
      expected=self.expected,
      received=self.received,
    )


class AssemblyError(IngraphError):
  """Wiring mistake found while the meta graph is assembled."""


class BuildError(IngraphError):
  """Failure while spaces flow through the meta graph and variables are made."""


class InputIncompleteError(BuildError):
  """Some components never got the input spaces their variables depend on."""


class EnvironmentNotAvailableError(IngraphError, ImportError):
  """The package behind an environment (e.g. `deepmind_lab`) is not
  installed. Raised when the environment is made, never when ingraph_rl is
  imported; the message says how to install it."""


class CheckpointError(IngraphError):
  """No checkpoint of a directory that has checkpoints could be read (see
  `utils.checkpoints.CheckpointSaver.restore`)."""


class ExportError(IngraphError):
  """An agent cannot be exported as asked (e.g. an API steps an environment
  through `tf.numpy_function`), or a SavedModel cannot be loaded by this
  version of ingraph_rl. `api` names the root API when one is at fault."""

  def __init__(self, message, api=None):
    self.api = api
    super().__init__(message)
