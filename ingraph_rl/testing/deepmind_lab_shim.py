"""Makes the fake DM Lab importable as `deepmind_lab` in other processes.

DM Lab envs step in worker processes, which `import deepmind_lab`. To run
them on the fake (`ingraph_rl.testing.fake_deepmind_lab`), put a shim
directory holding a `deepmind_lab.py` that re-exports the fake on their
PYTHONPATH (workers inherit this process's environment):

>>> import os, tempfile
>>> from ingraph_rl.testing.deepmind_lab_shim import (
...     use_fake_deepmind_lab, write_deepmind_lab_shim)
>>> path = write_deepmind_lab_shim(tempfile.mkdtemp())
>>> sorted(os.listdir(path))
['deepmind_lab.py']
>>> env = {"PYTHONPATH": ""}
>>> use_fake_deepmind_lab(env, path) == path
True
>>> env["PYTHONPATH"] == path
True

Nothing in the package imports this module: only tests and benchmarks do.
"""

import os
import pathlib
import tempfile

FAKE_MODULE = "ingraph_rl.testing.fake_deepmind_lab"
SHIM_SOURCE = (
  '"""deepmind_lab: the fake of ingraph_rl (not DeepMind Lab)."""\n'
  f"from {FAKE_MODULE} import *  # noqa: F401,F403\n"
)


def write_deepmind_lab_shim(directory=None):
  """Writes `<directory>/deepmind_lab.py` (a fresh temporary directory if
  None) and returns the directory: the PYTHONPATH entry to add."""
  directory = pathlib.Path(
    directory or tempfile.mkdtemp(prefix="fake_deepmind_lab_")
  )
  directory.mkdir(parents=True, exist_ok=True)
  (directory / "deepmind_lab.py").write_text(SHIM_SOURCE)
  return str(directory)


def use_fake_deepmind_lab(environ=None, directory=None):
  """Prepends a shim directory (written if `directory` is None) to
  `environ["PYTHONPATH"]` (default `os.environ`, which processes started
  later inherit); returns the directory."""
  environ = os.environ if environ is None else environ
  path = (
    write_deepmind_lab_shim(directory)
    if directory is None
    or not (pathlib.Path(directory) / "deepmind_lab.py").exists()
    else str(directory)
  )
  old = environ.get("PYTHONPATH", "")
  environ["PYTHONPATH"] = os.pathsep.join([path] + ([old] if old else []))
  return path
