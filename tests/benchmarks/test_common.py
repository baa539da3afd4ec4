"""benchmarks/common.py: a raw-stepping env pins ale-py's stepping threads."""

import os

from benchmarks import common
from ingraph_rl.environments import make_vector_env


def _threads():
  return set(os.listdir("/proc/self/task"))


def test_raw_atari_env_pins_its_stepping_threads_to_distinct_cores():
  cores = sorted(os.sched_getaffinity(0))
  before = _threads()
  kwargs = common.raw_env_kwargs("atari:pong")
  env = make_vector_env("atari:pong", 4, 0, **kwargs)
  try:
    env.reset(0)
    new = _threads() - before
    masks = [os.sched_getaffinity(int(tid)) for tid in new]
    # ale-py starts one thread per core (at most one per env), each on
    # one core of its own.
    assert len(masks) == min(len(cores), 4)
    assert all(len(m) == 1 for m in masks)
    assert len(set.union(*masks)) == len(masks)
  finally:
    env.close()
  assert common.raw_env_kwargs("CartPole-v1") == {}


def test_merge_stored_keeps_the_cases_not_run_now(tmp_path, monkeypatch):
  from benchmarks import common

  monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
  stat = common.Stat(1.0, 1.0, 1.0, 1)
  common.write_results(
    "b",
    False,
    {"cases": {"pong": {"threads": 0}, "cheetah": {"threads": 1}}},
    [
      common.Row("pong/ours", "throughput", "steps/s", stat),
      common.Row("cheetah/ours", "throughput", "steps/s", stat),
    ],
    {"pong_ratio": 1.0, "cheetah_ratio": 2.0},
  )
  new = common.Stat(5.0, 4.0, 6.0, 3)
  rows, ratios, cases = common.merge_stored(
    "b",
    [common.Row("cheetah/ours", "throughput", "steps/s", new)],
    {"cheetah_ratio": 3.0},
    {"cheetah": {"threads": 2}},
  )
  by_case = {r.case: r.stat for r in rows}
  assert by_case == {"pong/ours": stat, "cheetah/ours": new}
  assert ratios == {"pong_ratio": 1.0, "cheetah_ratio": 3.0}
  assert cases == {"pong": {"threads": 0}, "cheetah": {"threads": 2}}


def test_configure_threads_records_whether_tf_runs_onednn():
  """Every benchmark's config says whether TF's oneDNN kernels ran (off
  by default on CPUs without AVX-512; experiments' --onednn)."""
  import tensorflow as tf  # noqa: F401 (recorded only once TF is loaded)

  from experiments import configs

  record = common.configure_threads()
  assert record["tf_onednn"] is configs.onednn_enabled()
  assert isinstance(record["tf_intra_op_threads"], (int, str))
