"""`ingraph_rl.core` and `ingraph_rl.spaces` import neither TensorFlow nor
torch: not at import time, and not lazily inside a function either (what
they need of a backend comes from the executor)."""

import ast
import json
import pathlib
import pkgutil
import subprocess
import sys

import pytest

import ingraph_rl

PACKAGE_DIR = pathlib.Path(ingraph_rl.__file__).parent
BACKEND_FREE = ("core", "spaces")
BACKENDS = ("tensorflow", "torch")


def _modules(package):
  """`ingraph_rl.<package>` and every module under it, by name."""
  path = PACKAGE_DIR / package
  names = [f"ingraph_rl.{package}"]
  for info in pkgutil.walk_packages([str(path)], f"ingraph_rl.{package}."):
    names.append(info.name)
  return names


def _files(package):
  return sorted((PACKAGE_DIR / package).rglob("*.py"))


def test_the_packages_have_modules():
  # Guards the other tests against looking at nothing.
  assert "ingraph_rl.core.component" in _modules("core")
  assert "ingraph_rl.spaces.box" in _modules("spaces")
  assert len(_files("core")) > 5 and len(_files("spaces")) > 3


def test_importing_core_and_spaces_loads_no_backend():
  modules = [m for p in BACKEND_FREE for m in _modules(p)]
  code = (
    "import importlib, json, sys\n"
    f"for name in {modules!r}:\n"
    "  importlib.import_module(name)\n"
    "print(json.dumps(sorted(m for m in sys.modules\n"
    f"                        if m.split('.')[0] in {BACKENDS!r})))\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    check=True,
    timeout=120,
  )
  assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _backend_imports(path):
  """(line, module) of every import of a backend in the file, at any depth
  (function bodies included), also `importlib.import_module("torch")` and
  `__import__("tensorflow")` with a literal name."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      names = [node.module or ""]
    elif isinstance(node, ast.Call) and node.args:
      func = node.func
      fname = getattr(func, "attr", None) or getattr(func, "id", None)
      arg = node.args[0]
      if fname in ("import_module", "__import__", "LazyModule") and (
        isinstance(arg, ast.Constant) and isinstance(arg.value, str)
      ):
        names = [arg.value]
    found += [(node.lineno, n) for n in names if n.split(".")[0] in BACKENDS]
  return found


@pytest.mark.slow
@pytest.mark.parametrize("package", BACKEND_FREE)
def test_no_module_imports_a_backend_even_lazily(package):
  offenders = {
    str(path.relative_to(PACKAGE_DIR)): imports
    for path in _files(package)
    if (imports := _backend_imports(path))
  }
  assert offenders == {}


def test_the_ast_check_sees_lazy_imports(tmp_path):
  path = tmp_path / "m.py"
  path.write_text(
    "import numpy\n"
    "def f():\n"
    "  import tensorflow as tf\n"
    "  from torch import nn\n"
    "  return importlib.import_module('torch.nn')\n"
  )
  assert _backend_imports(path) == [
    (3, "tensorflow"),
    (4, "torch"),
    (5, "torch.nn"),
  ]
