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
MINIMUM = "minimum"  # The smallest value a number field accepts (None, for
# an Optional one, is always accepted).


def field(
  default,
  help,
  *,
  choices=None,
  flag=True,
  zero_is_none=False,
  minimum=None,
):
  """A `dataclasses.field` with `default` and metadata: `help` (the flag's
  help), `choices` (string values a flag accepts), `flag=False` (the field
  gets no flag), `zero_is_none` (an Optional number whose flag value 0
  means None), `minimum` (the smallest value its flag accepts:
  `experiments/config_flags.check_flags` refuses less)."""
  metadata = {HELP: help, FLAG: flag, ZERO_IS_NONE: zero_is_none}
  if choices is not None:
    metadata[CHOICES] = tuple(choices)
  if minimum is not None:
    metadata[MINIMUM] = minimum
  return dataclasses.field(default=default, metadata=metadata)


# The networks' product dtypes (`components.layers.precision`).
COMPUTE_DTYPES = ("float32", "bfloat16")


def compute_dtype_field():
  """An agent config's `compute_dtype` (its networks' torsos)."""
  return field(
    "float32",
    "Dtype of the network torso's conv and matmul products: float32, or "
    "bfloat16 (mixed precision: float32 variables and layer outputs; "
    "fast where oneDNN finds AMX or AVX512-BF16).",
    choices=COMPUTE_DTYPES,
  )


def choice_problems(config):
  """Problems of a config's string fields outside their `choices` (a
  non-string value, such as a torso's layer spec, is the config's own
  business)."""
  problems = []
  for f in dataclasses.fields(config):
    choices = f.metadata.get(CHOICES)
    value = getattr(config, f.name)
    if choices and isinstance(value, str) and value not in choices:
      problems.append(f"{f.name} must be one of {choices}, got {value!r}")
  return problems


def required(help):
  """A field without a default (e.g. the env's action count): no flag."""
  return dataclasses.field(metadata={HELP: help, FLAG: False})


def copy_weights_dtype(actor_weights_dtype):
  """The `weights_dtype` of an actor's copy of the weights, from a
  config's `actor_weights_dtype`: None for float32 (the copy then takes
  the learner's `compute_dtype`, as any float32 network does).

  >>> copy_weights_dtype("float32"), copy_weights_dtype("bfloat16")
  (None, 'bfloat16')
  """
  return None if actor_weights_dtype == "float32" else actor_weights_dtype
