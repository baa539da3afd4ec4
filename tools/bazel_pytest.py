"""Entry point of `bazel test //:pytest`: runs pytest on tests/ from the
runfiles tree.

Bazel runs it with the `python3` found on PATH (Bazel 4's autodetecting Python
toolchain), so activate the project's venv first; see BUILD.
"""

import os
import sys

import pytest

if __name__ == "__main__":
  here = os.path.dirname(os.path.abspath(__file__))
  tests = os.path.join(os.path.dirname(here), "tests")
  # No cache dir: the runfiles tree is read-only.
  sys.exit(pytest.main([tests, "-p", "no:cacheprovider"] + sys.argv[1:]))
