"""Runs Python in a fresh process that cannot import ingraph_rl (what a
SavedModel's user has)."""

import json
import os
import subprocess
import sys

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
  res = subprocess.run(
    [sys.executable, "-I", "-c", PRELUDE + script, *map(str, args)],
    cwd="/",
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert res.returncode == 0, res.stderr[-4000:]
  return json.loads(res.stdout.strip().splitlines()[-1])
