"""Rolling means of episode returns from grouped totals.

Training loops see finished episodes as totals, e.g. "env 3 finished 2
episodes with returns summing to 41 in this unroll", not one return per
episode. `RecentEpisodes` keeps the last `window` episodes of such groups,
each group standing for `count` episodes of return `total / count` (its
mean): exact where a group is one episode, an approximation inside groups
of several.

>>> recent = RecentEpisodes(window=3)
>>> recent.add(10.0, 1)
>>> recent.add(9.0, 2)          # Two episodes of mean 4.5.
>>> recent.add(1.0, 1)          # Drops the first (10): 4.5, 4.5, 1.
>>> round(recent.mean, 6), recent.count, recent.total_episodes
(3.333333, 3, 4)
"""

import collections
import math


class RecentEpisodes:
  """The returns of the most recent `window` finished episodes, added as
  groups of (return total, episodes); `mean` is nan before any episode."""

  def __init__(self, window=100):
    if int(window) < 1:
      raise ValueError(f"window must be >= 1, got {window}")
    self.window = int(window)
    self._groups = collections.deque()  # [mean return, episodes].
    self.count = 0  # Episodes in the window.
    self.total_episodes = 0  # Episodes ever added.

  def add(self, return_total, episodes):
    """Adds `episodes` episodes whose returns sum to `return_total` (each
    counted at their mean); no-op for 0 episodes."""
    episodes = int(episodes)
    if episodes < 0:
      raise ValueError(f"episodes must be >= 0, got {episodes}")
    if not episodes:
      return
    self._groups.append([float(return_total) / episodes, episodes])
    self.count += episodes
    self.total_episodes += episodes
    # The oldest episodes leave first, a group partly if need be.
    while self.count > self.window:
      extra = self.count - self.window
      oldest = self._groups[0]
      if oldest[1] <= extra:
        self._groups.popleft()
        self.count -= oldest[1]
      else:
        oldest[1] -= extra
        self.count -= extra

  @property
  def mean(self):
    if not self.count:
      return math.nan
    return sum(m * n for m, n in self._groups) / self.count

  def returns(self):
    """The window's returns, oldest first (a group's episodes at their
    mean)."""
    return [m for m, n in self._groups for _ in range(n)]
