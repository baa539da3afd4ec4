"""The fuzz suite's budget and report.

Every target runs `examples` hypothesis examples of `calls` calls each,
derandomized (the same calls every run), without deadlines. The default is
the CI budget (> 10,000 calls for the whole suite in < 3 minutes);
`--fuzz-long` (what `make fuzz` passes) is the long campaign (> 100,000
calls). At the end the counts per target, backend and API are printed
(and written as JSON with `--fuzz-report=PATH`).
"""

import dataclasses
import os

import hypothesis
import pytest

from ingraph_rl.testing import fuzz

# Calls per target and backend: CI, and the long campaign.
CI_EXAMPLES, CI_CALLS = 10, 40
LONG_EXAMPLES, LONG_CALLS = 50, 90


@dataclasses.dataclass(frozen=True)
class Budget:
  examples: int
  calls: int
  long: bool

  def settings(self):
    return hypothesis.settings(
      max_examples=self.examples,
      deadline=None,
      derandomize=True,
      database=None,
      suppress_health_check=list(hypothesis.HealthCheck),
      phases=[hypothesis.Phase.generate],
      print_blob=False,
    )


def pytest_addoption(parser):
  parser.addoption(
    "--fuzz-long",
    action="store_true",
    default=False,
    help="the long fuzz campaign (make fuzz): more examples and calls",
  )
  parser.addoption(
    "--fuzz-report",
    default=None,
    help="write the fuzz counts as JSON to this path",
  )


def pytest_collection_modifyitems(config, items):
  for item in items:
    if "tests/fuzz/" in str(item.fspath).replace("\\", "/"):
      item.add_marker(pytest.mark.fuzz)


@pytest.fixture(scope="session")
def budget(request):
  if request.config.getoption("--fuzz-long"):
    return Budget(LONG_EXAMPLES, LONG_CALLS, True)
  return Budget(CI_EXAMPLES, CI_CALLS, False)


def run_target(target, budget):
  """Runs `target` for the budget; fails on any anomaly it met."""

  @budget.settings()
  @hypothesis.given(data=hypothesis.strategies.data())
  def campaign(data):
    for _ in range(budget.calls):
      target.step(data.draw)

  start = len(fuzz.STATS.failures)
  campaign()
  failures = fuzz.STATS.failures[start:]
  assert not failures, "\n".join(failures[:10])


@pytest.fixture(scope="session")
def run():
  return run_target


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  if not fuzz.STATS.counts:
    return
  terminalreporter.write_sep("=", "fuzz: calls per target, backend and API")
  terminalreporter.write_line(fuzz.STATS.table())
  path = config.getoption("--fuzz-report")
  if path:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fuzz.STATS.dump(path)
    terminalreporter.write_line(f"fuzz counts written to {path}")
