"""Config dataclass fields that carry their own help (and how a command
line sets them), so experiments generate their flags from the config
instead of declaring them again (`experiments/config_flags.py`).

    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Config:
    ...   units: int = field(64, "Hidden units.")
    >>> dataclasses.fields(Config)[0].metadata["help"]
    'Hidden units.'
"""

import dataclasses

HELP = "help"
CHOICES = "choices"  # A string field's allowed values (an enum flag).
FLAG = "flag"  # False: no flag (derived or set by code).
ZERO_IS_NONE = "zero_is_none"  # An Optional number: 0 on the command
# line means None (off).


def field(default, help, *, choices=None, flag=True, zero_is_none=False):
  """A `dataclasses.field` with `default` and metadata: `help` (the flag's
  help), `choices` (string values a flag accepts), `flag=False` (the field
  gets no flag), `zero_is_none` (an Optional number whose flag value 0
  means None)."""
  metadata = {HELP: help, FLAG: flag, ZERO_IS_NONE: zero_is_none}
  if choices is not None:
    metadata[CHOICES] = tuple(choices)
  return dataclasses.field(default=default, metadata=metadata)


def required(help):
  """A field without a default (e.g. the env's action count): no flag."""
  return dataclasses.field(metadata={HELP: help, FLAG: False})
