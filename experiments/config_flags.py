"""absl flags generated from config dataclasses, and presets.

Every field of the given dataclasses becomes a flag of the field's name,
type and default, with the help of its metadata
(`ingraph_rl.utils.config_fields.field`); fields marked `flag=False` (set
by code: the env's action count, derived schedules) get none. Optional
fields take None as default; `zero_is_none` fields read 0 as None;
string fields with `choices` are enums.

A run's values are the fields' defaults, overridden by a preset (a dict,
e.g. the embedded CartPole setup), overridden by the flags the user passed
on the command line or in a flagfile (`FlagValues[name].present`): an
unpassed flag never overrides the preset.

    FLAG_HOLDERS = config_flags.define_flags(Settings, IMPALAConfig)
    values = config_flags.resolve((Settings, IMPALAConfig), PRESET)

Usage errors: an experiment checks its values before it builds anything,
in one line, and ends with `config_flags.run(main)` instead of
`app.run(main)`, so a bad value prints ONE line `error: --flag=value: what
to change` and exits 2 (a traceback only with --verbosity=1):

    def main(argv):
      values = config_flags.resolve((Settings, PPOConfig), PRESET)
      config_flags.check_flags(
        (Settings, PPOConfig), values,
        configs=[lambda: make(PPOConfig, values, num_actions=2)])
      ...

    if __name__ == "__main__":
      config_flags.run(main)

`check_flags` refuses a number below its field's `minimum`
(`config_fields.field(..., minimum=1)`), an `env` no env can be made of
(`environments.env_ids.check_env_id`, with the closest id), a `logdir`
that is no directory and cannot be made one, and what the config
dataclasses refuse (each `configs` callable builds one; its error names
the flag). `usage_of("env", value)` turns what a block raises about an
env (a DM Lab level that does not exist) into a usage error.
"""

import contextlib
import dataclasses
import os
import re
import sys
import typing

from absl import app, flags
from absl import logging as absl_logging

from ingraph_rl.environments.env_ids import check_env_id
from ingraph_rl.errors import (
  BuildError,
  CheckpointError,
  EnvironmentNotAvailableError,
)
from ingraph_rl.utils.config_fields import (
  CHOICES,
  FLAG,
  HELP,
  MINIMUM,
  ZERO_IS_NONE,
)

# The flags defined here belong to the module calling `define_flags` (the
# experiment: its key flags, what --help lists).
flags.disclaim_key_flags()


def flag_fields(cls):
  """The dataclass fields of `cls` that have flags."""
  return [f for f in dataclasses.fields(cls) if f.metadata.get(FLAG, True)]


def _base_type(cls, field):
  """(flag kind, optional): "bool", "integer", "float", "string" or
  "enum"."""
  hint = typing.get_type_hints(cls)[field.name]
  optional = False
  if typing.get_origin(hint) is typing.Union:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = len(args) < len(typing.get_args(hint))
    if CHOICES in field.metadata:
      return "enum", optional
    if len(args) != 1:
      raise TypeError(
        f"{cls.__name__}.{field.name}: a flag needs one type "
        f"(or choices), got {hint}"
      )
    hint = args[0]
  if CHOICES in field.metadata:
    return "enum", optional
  kinds = {bool: "bool", int: "integer", float: "float", str: "string"}
  if hint not in kinds:
    raise TypeError(
      f"{cls.__name__}.{field.name}: no flag for type {hint}; "
      f"mark the field flag=False"
    )
  return kinds[hint], optional


def _default(field):
  if field.default is dataclasses.MISSING:
    raise TypeError(f"field {field.name!r} has no default: mark it flag=False")
  return field.default


def define_flags(*classes, flag_values=flags.FLAGS):
  """Defines one flag per flag field of `classes` (a name may appear only
  once over all of them); returns {name: FlagHolder}."""
  holders = {}
  for cls in classes:
    for field in flag_fields(cls):
      if field.name in holders:
        raise ValueError(
          f"flag {field.name!r} is declared by two of "
          f"{[c.__name__ for c in classes]}"
        )
      kind, _ = _base_type(cls, field)
      help_text = field.metadata.get(HELP)
      if not help_text:
        raise ValueError(f"{cls.__name__}.{field.name} has no help")
      args = dict(
        name=field.name,
        default=_default(field),
        help=help_text,
        flag_values=flag_values,
      )
      if kind == "enum":
        holders[field.name] = flags.DEFINE_enum(
          enum_values=list(field.metadata[CHOICES]), **args
        )
      else:
        holders[field.name] = getattr(flags, f"DEFINE_{kind}")(**args)
  return holders


def flag_help(field):
  """The help a field's flag shows: the field's (absl puts an enum's
  choices first)."""
  if CHOICES in field.metadata:
    return f"<{'|'.join(field.metadata[CHOICES])}>: {field.metadata[HELP]}"
  return field.metadata.get(HELP)


def _from_flag(field, value):
  if field.metadata.get(ZERO_IS_NONE) and value == 0:
    return None
  return value


def resolve(classes, preset=None, flag_values=flags.FLAGS):
  """{name: value} of every flag field of `classes`: the field's default,
  else the preset's value, else (when passed on the command line or in a
  flagfile) the flag's."""
  preset = dict(preset or {})
  known = {f.name: f for cls in classes for f in flag_fields(cls)}
  unknown = set(preset) - set(known)
  if unknown:
    raise ValueError(f"preset sets unknown fields {sorted(unknown)}")
  values = {}
  for name, field in known.items():
    if flag_values[name].present:
      values[name] = _from_flag(field, flag_values[name].value)
    elif name in preset:
      values[name] = preset[name]
    else:
      values[name] = _default(field)
  return values


def make(cls, values, **code_values):
  """`cls(**...)` from its flag fields in `values` and the fields set by
  code (`code_values`)."""
  return cls(
    **{f.name: values[f.name] for f in flag_fields(cls)}, **code_values
  )


def agreement_problems(classes, flag_values=flags.FLAGS):
  """Where a defined flag and its field disagree (missing flag, default,
  help, type, choices): an empty list when every flag is the field's."""
  problems = []
  for cls in classes:
    for field in flag_fields(cls):
      where = f"--{field.name} ({cls.__name__}.{field.name})"
      if field.name not in flag_values:
        problems.append(f"{where}: no such flag")
        continue
      flag = flag_values[field.name]
      kind, _ = _base_type(cls, field)
      if flag.default != _default(field):
        problems.append(
          f"{where}: default {flag.default!r} != {_default(field)!r}"
        )
      if flag.help != flag_help(field):
        problems.append(f"{where}: help {flag.help!r} != {flag_help(field)!r}")
      flag_kind = {
        "bool": "bool",
        "int": "integer",
        "float": "float",
        "string": "string",
      }.get(flag.flag_type(), flag.flag_type())
      if kind == "enum":
        choices = list(getattr(flag.parser, "enum_values", []))
        if choices != list(field.metadata[CHOICES]):
          problems.append(
            f"{where}: choices {choices} != {list(field.metadata[CHOICES])}"
          )
      elif flag_kind != kind:
        problems.append(f"{where}: type {flag.flag_type()} != {kind}")
  return problems


def table(values):
  """A markdown table of the run's values (TensorBoard text)."""
  rows = "\n".join(f"|{name}|{value}|" for name, value in values.items())
  return "|param|value|\n|-|-|\n" + rows


# --- usage errors ----------------------------------------------------------

# The exit status of a usage error (a flag value to change), as argparse's.
USAGE_EXIT_CODE = 2


class UsageError(Exception):
  """A flag value the user must change: `--flag=value: message`."""

  def __init__(self, flag, value, message):
    super().__init__(f"--{flag}={value}: {message}")
    self.flag, self.value = flag, value


def check_logdir(path, flag="logdir"):
  """UsageError unless `path` is a directory or one can be made there (its
  nearest existing ancestor is a writable directory); makes nothing."""
  if os.path.isdir(path):
    if not os.access(path, os.W_OK | os.X_OK):
      raise UsageError(flag, path, "a directory this user cannot write")
    return
  if os.path.exists(path):
    raise UsageError(flag, path, "is a file, not a directory: pass a directory")
  parent = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise UsageError(
      flag, path, f"cannot be made: {parent} is a file, not a directory"
    )
  if not os.access(parent, os.W_OK | os.X_OK):
    raise UsageError(flag, path, f"cannot be made: {parent} is not writable")


def _blamed_flag(message, names, flag_values):
  """The flag a config's error message names: the first name in it that
  was passed (the preset's values are valid), else the first name."""
  named = [
    n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message) if n in names
  ]
  passed = [n for n in named if n in flag_values and flag_values[n].present]
  return (passed or named or [None])[0]


def check_flags(classes, values, *, configs=(), flag_values=flags.FLAGS):
  """Checks a run's `values` (from `resolve`) before anything is built;
  raises the first problem as a UsageError naming its flag:

  - a number below its field's `minimum` (`config_fields.field(minimum=)`);
  - `env` (if a field): `environments.env_ids.check_env_id`;
  - `logdir` (if set): a directory, or one can be made;
  - each of `configs` (callables that build the agent's config from
    `values`, with stand-ins for what the env sets, e.g. num_actions=2)
    raising BuildError or ValueError: the flag its message names.
  """
  fields = {f.name: f for cls in classes for f in flag_fields(cls)}
  for name, field in fields.items():
    minimum, value = field.metadata.get(MINIMUM), values[name]
    if minimum is not None and value is not None and value < minimum:
      raise UsageError(name, value, f"must be >= {minimum}")
  if "env" in fields:
    try:
      check_env_id(values["env"])
    except (ValueError, EnvironmentNotAvailableError) as e:
      raise UsageError("env", values["env"], str(e)) from e
  if "logdir" in fields and values["logdir"]:
    check_logdir(values["logdir"])
  for make_config in configs:
    try:
      make_config()
    except (BuildError, ValueError) as e:
      message = str(e).splitlines()[0] if str(e) else type(e).__name__
      flag = _blamed_flag(message, fields, flag_values)
      if flag is None:
        raise
      raise UsageError(flag, values[flag], message) from e


@contextlib.contextmanager
def usage_of(flag, value):
  """Turns what the block raises about `--flag=value` (ValueError, or a
  missing package) into a UsageError: e.g. the first env made of `--env`,
  where DM Lab says a level does not exist."""
  try:
    yield
  except (ValueError, EnvironmentNotAvailableError) as e:
    message = str(e).strip().splitlines()[0] if str(e) else repr(e)
    raise UsageError(flag, value, message) from e


def run(main, argv=None):
  """`app.run(main)`, where a UsageError prints one line, `error: --flag=
  value: what to change`, to stderr and exits 2 (with --verbosity=1 or
  more: the traceback too); so does a CheckpointError (a --logdir whose
  checkpoints all fail to read). Other errors are bugs: their traceback,
  as usual."""

  def checked_main(args):
    try:
      return main(args)
    except (UsageError, CheckpointError) as e:
      if absl_logging.get_verbosity() >= absl_logging.DEBUG:
        raise
      sys.stderr.write(f"error: {_as_usage_error(e)}\n")
      sys.stderr.flush()
      sys.exit(USAGE_EXIT_CODE)

  app.run(checked_main, argv=argv)


def _as_usage_error(error):
  """A CheckpointError (no checkpoint the run's --logdir holds reads) is
  bad input on --logdir, not a bug."""
  if isinstance(error, UsageError):
    return error
  logdir = flags.FLAGS["logdir"].value if "logdir" in flags.FLAGS else ""
  return UsageError("logdir", logdir, str(error))
