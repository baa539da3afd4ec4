"""benchmarks/cluster_scaling.py --quick runs real single-process and
loopback-cluster IMPALA jobs and writes results in the contract's format."""

import pytest


# ~60 s of real processes: `make test-all` runs it (the benchmark has
# its own full run); the default suite stays under 15 min on 2 cores.
@pytest.mark.slow
def test_quick_run_writes_results(run_quick):
  doc, out = run_quick("cluster_scaling", timeout=300)
  assert doc["benchmark"] == "cluster_scaling" and doc["quick"] is True
  cases = {
    r["case"]: r for r in doc["results"] if r["metric"] == "learner frames/s"
  }
  assert set(cases) == {"cluster/actors1", "single/actors1"}
  assert all(r["median"] > 0 for r in cases.values())
  assert doc["ratios"]["cluster_over_single_actors1"] > 0
  assert out.stdout.strip().splitlines()[-1].startswith("x1: cluster")
