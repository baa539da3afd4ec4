"""Install ingraph_rl. The primary install path (Bazel is described in BUILD).

Versions are pinned in one place, requirements.txt: `make venv` installs
exactly those pins, and the requirements below are derived from them
(tools/build_backend.py reads the file).

The build also compiles the C++ custom ops (ingraph_rl/ops/*.cc) into
ingraph_rl/ops/_segment_tree_ops.so with g++ and TensorFlow's own flags
(tf.sysconfig, passed through unchanged):

    g++ -std=c++17 -shared -fPIC -O2 ingraph_rl/ops/*.cc -o ... \
        <tf.sysconfig.get_compile_flags()> <tf.sysconfig.get_link_flags()>

so it needs the TensorFlow it will run with, importable at build time. An
isolated build (`pip install .`, `python -m build --wheel`) gets the pinned
tensorflow-cpu from the build backend (tools/build_backend.py), and the
wheel requires the same minor series (TF's custom-op ABI holds within one);
the wheel is platform-specific. `pip install --no-build-isolation -e .`
(what `make venv` runs) uses the environment's TensorFlow and writes the
library in place next to ingraph_rl/ops/*.py. `python setup.py build_ops
--inplace` rebuilds it alone (e.g. after editing a .cc).

INGRAPH_RL_BUILD_OPS: unset or 1 = build, and a failed build fails the
install (a silent fallback would hide it: pip shows no build output);
0 = don't build (ingraph_rl then runs the ops' pure-TF fallback).
"""

import glob
import json
import os
import shlex
import subprocess
import sys

import setuptools

try:
  from setuptools.command.build import build as _build
except ImportError:  # setuptools < 64
  from distutils.command.build import build as _build

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tools"))
import build_backend  # noqa: E402 (tools/, also the PEP 517 backend)

PINS = build_backend.read_pins()
OPS_PACKAGE_DIR = os.path.join("ingraph_rl", "ops")
OPS_LIBRARY = "_segment_tree_ops.so"  # The name BUILD and the loader use.

_TF_FLAGS = (
  "import json, tensorflow as tf\n"
  "print(json.dumps([tf.sysconfig.get_compile_flags(), "
  "tf.sysconfig.get_link_flags(), tf.__version__]))\n"
)


def minor_series(name):
  """'X.Y' of its pin."""
  return ".".join(PINS[build_backend.canonical(name)].split(".")[:2])


def series(name):
  return f"{name}=={minor_series(name)}.*"


def pinned(name):
  return f"{name}=={PINS[build_backend.canonical(name)]}"


def at_least(name):
  return f"{name}>={PINS[build_backend.canonical(name)]}"


def tf_flags(python=sys.executable):
  """TensorFlow's (compile flags, link flags, version) for custom ops."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run(
    [python, "-c", _TF_FLAGS],
    check=True,
    env=env,
    capture_output=True,
    text=True,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])


def compile_ops(output, sources):
  """g++ ... -o output; raises RuntimeError with the compiler's output, or
  when the TensorFlow at hand is not of the series the package requires."""
  compile_flags, link_flags, version = tf_flags()
  required = minor_series(build_backend.TENSORFLOW)
  if version.split(".")[:2] != required.split("."):
    raise RuntimeError(
      f"the custom ops would be built against TensorFlow {version}, but "
      f"the package requires {series(build_backend.TENSORFLOW)} "
      f"(requirements.txt): their ABI "
      f"differs. Build in isolation (`pip install .`) or install that "
      f"TensorFlow first"
    )
  cxx = os.environ.get("CXX", "g++")
  tmp = output + ".tmp"  # Never leave a half-written library behind.
  cmd = (
    [cxx, "-std=c++17", "-shared", "-fPIC", "-O2"]
    + sources
    + ["-o", tmp]
    + compile_flags
    + link_flags
  )
  os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
  print(
    f"building {output}: " + " ".join(shlex.quote(c) for c in cmd),
    file=sys.stderr,
  )
  result = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if result.returncode != 0:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise RuntimeError(
      f"{cxx} failed ({result.returncode}):\n{result.stderr[-6000:]}"
    )
  os.replace(tmp, output)


def _build_ops_wanted():
  mode = os.environ.get("INGRAPH_RL_BUILD_OPS", "")
  if mode not in ("", "0", "1"):
    raise ValueError(
      f"INGRAPH_RL_BUILD_OPS: expected unset, 0 or 1, got {mode!r}"
    )
  return mode != "0"


class build_ops(setuptools.Command):
  """Compiles ingraph_rl/ops/*.cc into ingraph_rl/ops/_segment_tree_ops.so."""

  description = "build the C++ custom ops with g++ and TensorFlow's flags"
  user_options = [
    ("inplace", "i", "write the library into the source tree (ingraph_rl/ops)")
  ]
  boolean_options = ["inplace"]
  editable_mode = False  # Set by setuptools for `pip install -e .`.

  def initialize_options(self):
    self.inplace = False
    self.build_lib = None

  def finalize_options(self):
    self.set_undefined_options("build", ("build_lib", "build_lib"))

  def _sources(self):
    return sorted(glob.glob(os.path.join(HERE, OPS_PACKAGE_DIR, "*.cc")))

  def _target(self):
    if self.inplace or self.editable_mode:
      return os.path.join(HERE, OPS_PACKAGE_DIR, OPS_LIBRARY)
    return os.path.join(self.build_lib, OPS_PACKAGE_DIR, OPS_LIBRARY)

  def run(self):
    sources = self._sources()
    if not _build_ops_wanted() or not sources:
      return
    try:
      compile_ops(self._target(), sources)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
      if os.path.exists(self._target()):  # Never a stale one.
        os.remove(self._target())
      detail = getattr(e, "stderr", None) or e
      raise RuntimeError(
        f"the custom ops (ingraph_rl/ops/*.cc) were not built: {detail}\n"
        f"Set INGRAPH_RL_BUILD_OPS=0 to install without them (ingraph_rl "
        f"then uses their slower pure-TF fallback)"
      ) from e

  # For setuptools' editable installs and wheels.
  def get_outputs(self):
    if not self._sources() or not _build_ops_wanted():
      return []
    return [self._target()]

  def get_output_mapping(self):
    return {}  # The library is written straight to its final place.

  def get_source_files(self):
    return self._sources()


class build(_build):
  sub_commands = _build.sub_commands + [("build_ops", None)]


class BinaryDistribution(setuptools.Distribution):
  """The package ships a compiled library: platform wheels, not pure."""

  def has_ext_modules(self):
    return True


# The TensorFlow family in the pinned minor series (the ops are compiled
# against it); otherwise the ranges the package supports. tf-keras
# (requirements-nodeps.txt), which TFP imports, cannot be listed: its own
# requirements pull the full `tensorflow` beside tensorflow-cpu.
REQUIRES = [
  series("tensorflow-cpu"),
  series("tensorflow-probability"),
  series("tensorboard"),
  "numpy>=1.26,<3",
  "dm-tree>=0.1.8",
  # bfloat16 numpy arrays (stored weights); TF itself depends on it.
  "ml-dtypes>=0.5",
  "gymnasium>=1.0,<2",
  "absl-py>=2.0",
]
EXTRAS = {
  # The exact pin: the CPU build comes from local wheels (requirements.txt).
  "torch": [pinned("torch")],
  "atari": ["ale-py>=0.10"],
  # gymnasium's MuJoCo v5 environments (HalfCheetah, Hopper).
  "mujoco": [at_least("mujoco"), at_least("imageio")],
}
# What `pytest tests/` imports beyond the library: every backend and
# environment, cv2 and NumPy references, the process and benchmark helpers.
EXTRAS["test"] = sorted(
  set(EXTRAS["torch"] + EXTRAS["atari"] + EXTRAS["mujoco"])
) + [
  "pytest>=8",
  "pytest-timeout",
  "pytest-xdist",
  "hypothesis>=6",
  "pyyaml>=6",
  "psutil",
  "matplotlib",
  "opencv-python-headless>=4.8",
]

setuptools.setup(
  name="ingraph_rl",
  version="0.1.0",
  description="Reinforcement learning where every part runs in the "
  "TensorFlow graph",
  packages=setuptools.find_packages(include=["ingraph_rl", "ingraph_rl.*"]),
  python_requires=">=3.10",
  install_requires=REQUIRES,
  extras_require=EXTRAS,
  cmdclass={"build": build, "build_ops": build_ops},
  distclass=BinaryDistribution,
)
