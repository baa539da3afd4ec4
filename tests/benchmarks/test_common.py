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
