"""ApexConfig: the paper's per-actor epsilons and the settings checks."""

import pytest

from ingraph_rl.agents.apex import ApexConfig
from ingraph_rl.errors import BuildError


def test_actor_epsilons_follow_the_paper():
  """eps_i = 0.4^(1 + 7 i / (N - 1)), by hand for N = 3 and N = 8."""
  c = ApexConfig(num_actions=2)
  assert [c.actor_epsilon(i, 3) for i in range(3)] == pytest.approx(
    [0.4, 0.4**4.5, 0.4**8]
  )
  eps = [c.actor_epsilon(i, 8) for i in range(8)]
  assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
  assert eps[3] == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
  assert all(a > b for a, b in zip(eps, eps[1:]))
  assert c.actor_epsilon(0, 1) == 0.4
  with pytest.raises(ValueError, match="actor index 3"):
    c.actor_epsilon(3, 3)


def test_per_env_epsilons_spread_the_paper_over_all_envs():
  """With epsilon_per_env, 2 actors x 3 envs act as the paper's 6 actors:
  env j of actor i gets eps_(3i + j) of 6; without it, every env of an
  actor gets the actor's rate."""
  c = ApexConfig(num_actions=2, epsilon_per_env=True)
  want = [0.4 ** (1 + 7 * g / 5) for g in range(6)]
  assert c.actor_epsilons(0, 2, 3) == pytest.approx(want[:3])
  assert c.actor_epsilons(1, 2, 3) == pytest.approx(want[3:])
  plain = ApexConfig(num_actions=2)
  assert plain.actor_epsilons(1, 2, 3) == pytest.approx(0.4**8)
  with pytest.raises(ValueError, match="actor index 2"):
    c.actor_epsilons(2, 2, 3)


def test_config_checks_name_every_problem():
  with pytest.raises(BuildError) as e:
    ApexConfig(
      num_actions=1,
      train_batch_size=100,
      learning_starts=10,
      epsilon=2.0,
      publish_every=0,
      prefetch_batches=2,
      serve_batches=3,
      compute_dtype="half",
    )
  for part in (
    "compute_dtype must be one of",
    "num_actions",
    "learning_starts must be >= train_batch_size",
    "epsilon must lie",
    "publish_every must be >= 1",
    "serve_batches must be <= prefetch_batches",
  ):
    assert part in str(e.value)
