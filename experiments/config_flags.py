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
"""

import dataclasses
import typing

from absl import flags

from ingraph_rl.utils.config_fields import CHOICES, FLAG, HELP, ZERO_IS_NONE

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
