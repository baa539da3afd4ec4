"""The PEP 517 build backend (pyproject.toml): setuptools', plus TensorFlow.

An isolated build (`pip install .`, `python -m build`) starts from an empty
environment, but setup.py's build_ops compiles the custom ops with
TensorFlow's headers and tf.sysconfig's flags. pyproject.toml's static
`requires` cannot read requirements.txt, so these hooks add its
tensorflow-cpu pin to what wheels and editable installs need: the ops are
compiled against the TensorFlow release that the wheel then requires
(setup.py asks for the same minor series; TF's custom-op ABI holds within
one). An sdist only copies sources: no TensorFlow.

`read_pins` is also how setup.py reads requirements.txt, the one place
where versions are pinned.
"""

import os
import re

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (the other PEP 517 hooks)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = os.path.join(ROOT, "requirements.txt")
TENSORFLOW = "tensorflow-cpu"

_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!*-]+)")


def canonical(name):
  """PEP 503's normalized name: `Dm_Tree` and `dm-tree` are one package."""
  return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path=REQUIREMENTS):
  """{canonical name: version} of requirements.txt's `name==version` lines
  (comments and blank lines skipped; anything else is an error)."""
  pins = {}
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      line = line.split("#", 1)[0].strip()
      if not line:
        continue
      match = _PIN.fullmatch(line)
      if match is None:
        raise ValueError(
          f"{path}:{number}: expected a pin `name==version`, got {line!r}"
        )
      pins[canonical(match[1])] = match[2]
  return pins


def tensorflow_pin():
  return f"{TENSORFLOW}=={read_pins()[TENSORFLOW]}"


def get_requires_for_build_wheel(config_settings=None):
  return _setuptools.get_requires_for_build_wheel(config_settings) + [
    tensorflow_pin()
  ]


def get_requires_for_build_editable(config_settings=None):
  return _setuptools.get_requires_for_build_editable(config_settings) + [
    tensorflow_pin()
  ]
