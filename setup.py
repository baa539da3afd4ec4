"""Install ingraph_rl. The primary install path (Bazel is described in BUILD).

`make venv` installs the exact pins of requirements.txt first; the ranges
below are what the package supports.

The build also compiles the C++ custom ops (ingraph_rl/ops/*.cc) into
ingraph_rl/ops/_segment_tree_ops.so with g++ and TensorFlow's own flags
(tf.sysconfig, passed through unchanged):

    g++ -std=c++17 -shared -fPIC -O2 ingraph_rl/ops/*.cc -o ... \
        <tf.sysconfig.get_compile_flags()> <tf.sysconfig.get_link_flags()>

so it needs the TensorFlow it will run with, importable at build time:
`pip install --no-build-isolation -e .` (what `make venv` runs) writes the
library in place next to ingraph_rl/ops/*.py; a non-editable build puts it in
the wheel. `python setup.py build_ops --inplace` rebuilds it alone (e.g. after
editing a .cc or changing TensorFlow).

INGRAPH_RL_BUILD_OPS: unset = build, and on failure warn and install anyway
(the ops have a pure-TF fallback); 1 = a failed build fails the install;
0 = don't build.
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
OPS_PACKAGE_DIR = os.path.join("ingraph_rl", "ops")
OPS_LIBRARY = "_segment_tree_ops.so"  # The name BUILD and the loader use.

_TF_FLAGS = (
  "import json, tensorflow as tf\n"
  "print(json.dumps([tf.sysconfig.get_compile_flags(), "
  "tf.sysconfig.get_link_flags()]))\n"
)


def tf_flags(python=sys.executable):
  """TensorFlow's (compile flags, link flags) for custom ops."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run(
    [python, "-c", _TF_FLAGS],
    check=True,
    env=env,
    capture_output=True,
    text=True,
  )
  compile_flags, link_flags = json.loads(out.stdout.strip().splitlines()[-1])
  return compile_flags, link_flags


def compile_ops(output, sources):
  """g++ ... -o output; raises RuntimeError with the compiler's output."""
  compile_flags, link_flags = tf_flags()
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
    mode = os.environ.get("INGRAPH_RL_BUILD_OPS", "")
    sources = self._sources()
    if mode == "0" or not sources:
      return
    try:
      compile_ops(self._target(), sources)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
      if mode == "1":
        raise
      if os.path.exists(self._target()):  # Not a stale one either.
        os.remove(self._target())
      detail = getattr(e, "stderr", None) or e
      print(
        f"WARNING: the custom ops were not built; ingraph_rl will use "
        f"its pure-TF fallback. Set INGRAPH_RL_BUILD_OPS=1 to make this "
        f"an error.\n{detail}",
        file=sys.stderr,
      )

  # For setuptools' editable installs and wheels.
  def get_outputs(self):
    if not self._sources() or os.environ.get("INGRAPH_RL_BUILD_OPS") == "0":
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


setuptools.setup(
  name="ingraph_rl",
  version="0.1.0",
  description="Reinforcement learning where every part runs in the "
  "TensorFlow graph",
  packages=setuptools.find_packages(include=["ingraph_rl", "ingraph_rl.*"]),
  python_requires=">=3.10",
  install_requires=[
    "tensorflow-cpu>=2.21,<2.22",
    "tensorflow-probability>=0.25,<0.26",
    "numpy>=1.26,<3",
    "dm-tree>=0.1.8",
    # bfloat16 numpy arrays (stored weights); TF itself depends on it.
    "ml-dtypes>=0.5",
    "gymnasium>=1.0,<2",
    "absl-py>=2.0",
    "tensorboard>=2.21,<2.22",
  ],
  extras_require={
    # Ask for the CPU build explicitly (see requirements.txt).
    "torch": ["torch==2.13.0"],
    "atari": ["ale-py>=0.10", "opencv-python-headless>=4.8"],
    "test": ["pytest>=8", "pytest-timeout", "hypothesis>=6", "pyyaml>=6"],
  },
  cmdclass={"build": build, "build_ops": build_ops},
  distclass=BinaryDistribution,
)
