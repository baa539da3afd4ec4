"""`RecentEpisodes`: the last `window` episodes of grouped totals, checked
against expanding every group into its episodes (at the group's mean)."""

import doctest
import math

import numpy as np
import pytest

from ingraph_rl.utils import episode_stats
from ingraph_rl.utils.episode_stats import RecentEpisodes


def expanded_mean(groups, window):
  """The mean of the last `window` returns, each group (total, k) as k
  episodes of return total / k."""
  returns = [total / k for total, k in groups for _ in range(k)]
  return float(np.mean(returns[-window:]))


def test_matches_the_expanded_episodes_at_every_step():
  rng = np.random.default_rng(0)
  recent = RecentEpisodes(window=100)
  groups = []
  for _ in range(400):
    k = int(rng.choice([0, 1, 1, 2, 3, 7, 40]))
    total = float(rng.normal(50.0, 30.0)) * max(k, 1)
    recent.add(total, k)
    if k:
      groups.append((total, k))
    if not groups:
      assert math.isnan(recent.mean) and recent.count == 0
      continue
    seen = sum(k for _, k in groups)
    assert recent.total_episodes == seen
    assert recent.count == min(seen, 100)
    assert recent.mean == pytest.approx(expanded_mean(groups, 100), rel=1e-12)
  assert recent.total_episodes > 300  # The window did slide.


def test_a_group_larger_than_the_window_leaves_window_episodes():
  recent = RecentEpisodes(window=5)
  recent.add(100.0, 1)
  recent.add(70.0, 7)
  assert recent.count == 5 and recent.returns() == [10.0] * 5
  assert recent.mean == pytest.approx(10.0)
  recent.add(4.0, 2)  # 10, 10, 10, 2, 2.
  assert recent.returns() == [10.0, 10.0, 10.0, 2.0, 2.0]
  assert recent.mean == pytest.approx(34.0 / 5)


def test_bad_arguments():
  with pytest.raises(ValueError, match="window"):
    RecentEpisodes(window=0)
  with pytest.raises(ValueError, match="episodes"):
    RecentEpisodes().add(1.0, -1)


def test_docstring_example():
  failures, tried = doctest.testmod(episode_stats)
  assert tried >= 4 and failures == 0
