"""The env layer imports neither tensorflow nor torch: env worker processes
import it, and DeepMind Lab crashes in a process that imported tensorflow."""

from ingraph_rl.testing.fresh_process import run_python

MODULES = [
  "ingraph_rl.environments",
  "ingraph_rl.environments.atari",
  "ingraph_rl.environments.dmlab",
  "ingraph_rl.environments.dmlab30",
  "ingraph_rl.environments.gymnasium_env",
  "ingraph_rl.environments.vector_env",
  "ingraph_rl.environments.workers",
  "ingraph_rl.environments.worker_main",
  "ingraph_rl.testing.fake_deepmind_lab",
  "ingraph_rl.testing.deepmind_lab_shim",
]
CHECK = """
import importlib, json, sys
loaded = {}
for name in sys.argv[1:]:
  importlib.import_module(name)
  loaded[name] = sorted(m for m in sys.modules
                        if m.split(".")[0] in ("tensorflow", "torch"))
# Building CartPole and Pong envs stays TF-free too.
from ingraph_rl.environments import make_vector_env
for env_id in ("CartPole-v1", "atari:pong"):
  make_vector_env(env_id, 1).close()
  loaded[env_id] = sorted(m for m in sys.modules
                          if m.split(".")[0] in ("tensorflow", "torch"))
print(json.dumps(loaded))
"""


def test_env_modules_import_neither_tensorflow_nor_torch():
  loaded = run_python(CHECK, *MODULES, timeout=120)
  assert sorted(loaded) == sorted(MODULES + ["CartPole-v1", "atari:pong"])
  assert loaded == {name: [] for name in loaded}


def test_in_graph_stepping_is_not_re_exported():
  # It imports tensorflow: importers name the module.
  import ingraph_rl.environments as environments

  for name in (
    "tf_step",
    "tf_reset",
    "torch_step",
    "torch_reset",
    "step_shapes",
    "step_dtypes",
  ):
    assert not hasattr(environments, name), name


def test_package_docstring_example_runs():
  import doctest

  import ingraph_rl.environments as environments

  failures, tried = doctest.testmod(environments)
  assert tried >= 3 and failures == 0
