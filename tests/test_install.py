"""The package as users install it, not as `make venv` does: from a clean
copy of the checkout, into a fresh venv with the pins.

An isolated `pip install .` and `python -m build --wheel` must both compile
the custom ops against the pinned TensorFlow (tools/build_backend.py), the
wheel must be a platform wheel holding the library, and in the fresh venv
prioritized replay must run on the custom op, not on its pure-TF fallback.

Marked `install` (minutes of pip and g++): `make test` runs the wheel's
tests in the background beside the suite (its wheel built without
isolation, and the backend's isolated-build requirements checked on their
own), `make test-all` all of them, with the isolated `pip install .`; a
plain `pytest` run deselects them.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from ingraph_rl.testing.fresh_process import ROOT

pytestmark = [pytest.mark.install, pytest.mark.timeout(1500)]

OPS_LIBRARY = "ingraph_rl/ops/_segment_tree_ops.so"
CUSTOM_OPS = {"SegmentTreeUpdate", "ResourceSegmentTreeFindPrefixsumIdx"}

# Runs in the fresh venv with `python -I` from its own directory: only the
# installed package is importable. The same updates and sample on the
# custom op and on the pure-TF path (same seed) must agree, and the weights
# must follow Schaul et al.'s formula.
CHECK = """
import json
import numpy as np
import ingraph_rl
from ingraph_rl import ops
from ingraph_rl.components.memories import segment_tree
from ingraph_rl.components.memories.prioritized_replay import PrioritizedReplay
from ingraph_rl.executors.tensorflow import TFExecutor
from ingraph_rl.export.agent import graph_op_types
from ingraph_rl.spaces import Dict, FloatBox, IntBox

RECORDS = Dict(obs=FloatBox((3,)), add_batch_rank=True)
SPACES = {
  "records": RECORDS,
  "batch_size": IntBox(65, low=1),
  "indices": IntBox(4, add_batch_rank=True),
  "priorities": FloatBox(low=0.1, high=5.0, add_batch_rank=True),
  "beta": FloatBox(low=0.0, high=1.0),
}
PRIORITIES = np.array([0.5, 4.0, 1.0, 2.0], np.float32)
ALPHA, BETA = 0.6, 0.4
out = {
  "package": ingraph_rl.__file__,
  "library": ops.load_segment_tree_ops() and ops.LIBRARY_PATH,
  "default_impl": segment_tree.DEFAULT_IMPL,
}
if out["library"] is None:  # The stderr says why.
  print(json.dumps(out))
  raise SystemExit()


def run(impl):
  segment_tree.DEFAULT_IMPL = impl
  ex = TFExecutor(PrioritizedReplay(4, alpha=ALPHA, seed=3), SPACES)
  ex.execute("insert", RECORDS.sample(4, seed=0))
  ex.execute("update_priorities", np.arange(4, dtype=np.int32), PRIORITIES)
  sample = ex.execute("sample", 32, np.float32(BETA))
  ops_used = set()
  for api in ("insert", "update_priorities", "sample"):
    ops_used |= set(graph_op_types(ex.function(api)))
  sum_tree = ex.get_weights()["prioritized_replay/sum_tree"]
  return (
    {k: np.asarray(sample[k]).tolist() for k in ("indices", "weights")},
    sorted(ops_used),
    np.asarray(sum_tree).tolist(),
  )


out["custom"], out["tf"] = run("custom_op"), run("tf")
probs = PRIORITIES**ALPHA / np.sum(PRIORITIES**ALPHA)
indices = np.array(out["custom"][0]["indices"])
weights = (4 * probs[indices]) ** -BETA / (4 * probs.min()) ** -BETA
out["reference_weights"] = weights.tolist()
out["reference_leaves"] = (PRIORITIES**ALPHA).tolist()
print(json.dumps(out))
"""


def _run(argv, cwd=None, env=None, timeout=900):
  """Runs argv; on failure, fails the test with the tail of its output."""
  result = subprocess.run(
    [str(a) for a in argv],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )
  shown = " ".join(str(a)[:200] for a in argv)  # Not all of CHECK.
  assert result.returncode == 0, (
    f"{shown} failed ({result.returncode}):\n"
    f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
  )
  return result


def _pip_env():
  # The machine's pip configuration (index, find-links) stays as users
  # have it; only byte-compiling the thousands of TF files is skipped.
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["PIP_COMPILE"] = "0"
  return env


def clean_copy(dest):
  """The checkout's files that git tracks or would track (no .venv, build
  outputs or the in-place op library), copied to `dest`."""
  listed = _run(
    ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd=ROOT,
  ).stdout.split("\0")
  for name in listed:
    source = ROOT / name
    if name and source.is_file():  # Deleted in the working tree: skipped.
      (dest / name).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy2(source, dest / name)
  assert not (dest / OPS_LIBRARY).exists()
  return dest


def check_installed(venv):
  """Runs CHECK in `venv`; asserts the custom op ran, and returns its
  JSON."""
  env = _pip_env()
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  python = venv / "bin" / "python"
  result = _run([python, "-I", "-c", CHECK], cwd=venv, env=env)
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out["package"].startswith(str(venv)), out["package"]
  assert out["library"] is not None, result.stderr[-3000:]  # Why not.
  assert "pure-TF fallback" not in result.stderr, result.stderr[-3000:]
  assert out["default_impl"] == "custom_op"
  (custom, custom_ops, custom_tree), (tf, tf_ops, tf_tree) = (
    out["custom"],
    out["tf"],
  )
  assert CUSTOM_OPS <= set(custom_ops), custom_ops
  assert not CUSTOM_OPS & set(tf_ops), tf_ops
  assert custom == tf
  assert custom_tree == tf_tree
  assert custom_tree[4:] == pytest.approx(out["reference_leaves"], rel=1e-6)
  assert custom_tree[1] == pytest.approx(sum(out["reference_leaves"]))
  assert custom["weights"] == pytest.approx(out["reference_weights"], rel=1e-5)
  return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  path = tmp_path_factory.mktemp("install")
  yield path
  shutil.rmtree(path, ignore_errors=True)  # Venvs of ~2 GB.


@pytest.fixture(scope="module")
def venv(workdir):
  """A fresh venv of the base Python, as a user makes one."""
  path = workdir / "venv"
  _run([sys._base_executable, "-m", "venv", path])
  return path


def _pip_install(venv, *args):
  """pip install with the pins of requirements.txt, then tf-keras without
  its requirements (as the README says: they would pull the full
  `tensorflow` beside tensorflow-cpu)."""
  pip = [venv / "bin" / "python", "-m", "pip", "install", "-q"]
  env = _pip_env()
  _run(pip + ["-c", ROOT / "requirements.txt", *args], env=env)
  _run(pip + ["--no-deps", "-r", ROOT / "requirements-nodeps.txt"], env=env)


# `make test-all` only: its isolated build costs `make test` as much again
# as the wheel's (a second build env with TensorFlow), and builds the same
# way through the same backend.
@pytest.mark.slow
def test_pip_install_of_a_checkout_builds_and_uses_the_ops(venv, workdir):
  source = clean_copy(workdir / "pip_source")
  _pip_install(venv, source)
  check_installed(venv)


@pytest.fixture(scope="module")
def wheel(workdir):
  """`python -m build --wheel` of a clean copy, without isolation: the
  backend and its requirements come from this venv (which `make venv`
  installed from the same pins), so the op compiles against the pinned
  TF as in an isolated build. An isolated build env costs another
  TensorFlow install (~75 s with its g++, beside the suite): `make
  test-all` does that through `pip install .`, and
  `test_an_isolated_build_asks_for_the_pinned_tensorflow` checks the
  backend's requirements here."""
  source = clean_copy(workdir / "build_source")
  dist = workdir / "dist"
  _run(
    [
      sys.executable,
      "-m",
      "build",
      "--wheel",
      "--no-isolation",
      "--outdir",
      dist,
      source,
    ],
    env=_pip_env(),
  )
  [path] = dist.glob("*.whl")
  return path


def test_an_isolated_build_asks_for_the_pinned_tensorflow(tmp_path):
  """What pip and `build` install into an isolated build env: the
  backend's requirements, asked for in a fresh interpreter from a clean
  copy (as the frontends call the hook), name requirements.txt's pin."""
  source = clean_copy(tmp_path / "source")
  probe = (
    "import json, sys; sys.path.insert(0, 'tools'); import build_backend"
    " as b; print(json.dumps("
    "[b.get_requires_for_build_wheel(), b.get_requires_for_build_editable(),"
    " b.get_requires_for_build_sdist()]))"
  )
  out = _run([sys.executable, "-I", "-c", probe], cwd=source, env=_pip_env())
  # setuptools' hooks run setup.py, which may print first.
  last = out.stdout.strip().splitlines()[-1]
  wheel_reqs, editable_reqs, sdist_reqs = json.loads(last)
  pin = next(
    line.strip()
    for line in (ROOT / "requirements.txt").read_text().splitlines()
    if line.startswith("tensorflow-cpu==")
  )
  assert pin in wheel_reqs and pin in editable_reqs, (wheel_reqs, pin)
  assert not [r for r in sdist_reqs if "tensorflow" in r], sdist_reqs
  pyproject = (source / "pyproject.toml").read_text()
  assert 'build-backend = "build_backend"' in pyproject
  assert 'backend-path = ["tools"]' in pyproject


def test_the_wheel_is_platform_specific_and_holds_the_ops(wheel):
  tag = wheel.name.removesuffix(".whl").split("-")[-3:]
  assert tag[2] != "any" and tag[1] != "none", wheel.name
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    [wheel_info] = [n for n in names if n.endswith(".dist-info/WHEEL")]
    [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
    assert "Root-Is-Purelib: false" in z.read(wheel_info).decode()
    requires = [
      line.split(":", 1)[1].strip()
      for line in z.read(metadata).decode().splitlines()
      if line.startswith("Requires-Dist:")
    ]
  assert OPS_LIBRARY in names
  assert not [n for n in names if n.endswith(".cc")]
  # Built against the pinned TF; the wheel asks for that minor series.
  pin = next(
    line.split("==")[1].strip()
    for line in (ROOT / "requirements.txt").read_text().splitlines()
    if line.startswith("tensorflow-cpu==")
  )
  series = ".".join(pin.split(".")[:2])
  assert f"tensorflow-cpu=={series}.*" in requires, requires
  for extra in ("atari", "mujoco", "torch", "test"):
    assert any(f'extra == "{extra}"' in r for r in requires), (extra, requires)


def test_the_wheel_installs_and_uses_the_ops(venv, wheel):
  """In the fresh venv (after `pip install .` where `make test-all` ran
  it first: the wheel then replaces that package)."""
  _run([venv / "bin" / "python", "-m", "pip", "uninstall", "-y", "ingraph_rl"])
  _pip_install(venv, wheel)
  check_installed(venv)
