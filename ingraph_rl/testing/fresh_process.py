"""Runs Python in a fresh process: one that cannot import ingraph_rl (what
a SavedModel's user has), or one in the checkout (for what a test must not
share with its own process: imported modules, absl flags, TF's threads)."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# `-I` drops PYTHONPATH, the user site and the cwd from sys.path; the
# sys.modules entry also blocks an editable install of the package.
PRELUDE = """\
import sys
sys.modules["ingraph_rl"] = None
"""


def run_fresh(script, *args, timeout=240):
  """Runs `script` with `args` in `python -I` from /, without PYTHONPATH and
  with `import ingraph_rl` failing; returns the JSON of its last stdout
  line."""
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  argv = [sys.executable, "-I", "-c", PRELUDE + script, *map(str, args)]
  return _last_json(argv, "/", env, None, timeout)


def run_python(script, *args, stdin=None, timeout=240):
  """Runs `script` with `args` in `python -c` from the checkout's root
  (ingraph_rl, experiments and benchmarks importable), `stdin` its input;
  returns the JSON of its last stdout line."""
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  argv = [sys.executable, "-c", script, *map(str, args)]
  return _last_json(argv, ROOT, env, stdin, timeout)


def _last_json(argv, cwd, env, stdin, timeout):
  res = subprocess.run(
    argv,
    cwd=cwd,
    env=env,
    input=stdin,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert res.returncode == 0, res.stderr[-4000:]
  return json.loads(res.stdout.strip().splitlines()[-1])
