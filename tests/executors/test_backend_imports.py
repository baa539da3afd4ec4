"""Each executor loads only its own backend: the torch executor never
imports TensorFlow, and the TF executor never imports torch."""

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
  "module, absent",
  [
    ("ingraph_rl.executors.torch", "tensorflow"),
    ("ingraph_rl.executors.tensorflow", "torch"),
  ],
)
@pytest.mark.slow
def test_an_executor_imports_only_its_backend(module, absent):
  code = (
    "import importlib, json, sys\n"
    f"importlib.import_module({module!r})\n"
    f"print(json.dumps({absent!r} in sys.modules))\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    check=True,
    timeout=300,
  )
  assert json.loads(out.stdout.strip().splitlines()[-1]) is False
