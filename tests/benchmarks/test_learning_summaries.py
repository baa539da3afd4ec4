"""The learning benchmark's summary keeps cases that earlier presets left in
the JSON (it once failed on one, after a 1.5 h run)."""

from benchmarks import learning


def run(seed, greedy, last100):
  curve = [
    {"frames": 1000, "seconds": 5.0, "last100": 20.0},
    {"frames": 2000, "seconds": 9.0, "last100": last100},
  ]
  return {"seed": seed, "curve": curve, "greedy": greedy, "wall_s": 10.0}


def test_known_cases_are_summarized_and_kept_cases_pass_through():
  cases = {
    "dqn_cartpole": {
      "budget_s": None,
      "runs": [run(0, 250.0, 180.0), run(1, 150.0, 120.0)],
    },
    "apex_pong_per_actor_eps": {
      "budget_s": 3600.0,
      "runs": [run(0, -13.1, -17.4)],
    },
  }
  stored = {
    "apex_pong_per_actor_eps_note": 1.0,
    "dqn_cartpole_seeds_reaching_195": 0,
  }
  rows, ratios = learning.summaries(cases, stored)
  assert {row.case for row in rows} == {"dqn_cartpole"}
  # One of the two seeds reached a greedy 195.
  assert ratios["dqn_cartpole_seeds_reaching_195"] == 1
  assert ratios["apex_pong_per_actor_eps_note"] == 1.0
  assert stored["dqn_cartpole_seeds_reaching_195"] == 0  # Not changed.


def test_added_seeds_join_the_stored_ones_and_replace_the_same_seed():
  stored = [run(0, 1.0, 1.0), run(2, 2.0, 2.0)]
  new = [run(2, 5.0, 5.0), run(1, 3.0, 3.0)]
  merged = learning.add_seed_runs(stored, new)
  assert [(r["seed"], r["greedy"]) for r in merged] == [
    (0, 1.0),
    (1, 3.0),
    (2, 5.0),
  ]
  # The median over the case's seeds then counts all three.
  _, ratios = learning.summaries(
    {"ppo_halfcheetah": {"budget_s": None, "runs": merged}}, {}
  )
  assert ratios["ppo_halfcheetah_return_at_1m_steps"] == 3.0


def test_sac_returns_at_300k_are_the_median_of_seeds_that_all_got_there():
  def at(seed, frames, last100):
    r = run(seed, 1.0, last100)
    r["curve"][-1]["frames"] = frames
    return r

  done = [at(0, 300_000, 1500.0), at(1, 300_500, 2600.0), at(2, 3e5, 2700.0)]
  _, ratios = learning.summaries(
    {"sac_hopper": {"budget_s": None, "runs": done}}, {}
  )
  assert ratios["sac_hopper_return_at_300k_steps"] == 2600.0
  short = done[:2] + [at(2, 299_000, 2700.0)]
  _, ratios = learning.summaries(
    {"sac_hopper": {"budget_s": None, "runs": short}}, {}
  )
  assert ratios["sac_hopper_return_at_300k_steps"] is None


def test_ppo_pong_reports_at_2h_or_at_the_minutes_it_was_cut_to():
  case = learning.CASES["ppo_pong"]
  # +20 at its first point (5 s); the last point (19) is its final.
  runs = [run(0, 20.0, 19.0)]
  _, full = learning.summarize("ppo_pong", case, runs, budget_s=7200.0)
  assert full == {
    "ppo_pong_last100_return_at_2h": 19.0,
    "ppo_pong_seconds_to_plus18": 5.0,
  }
  _, cut = learning.summarize("ppo_pong", case, runs, budget_s=4500.0)
  assert cut["ppo_pong_last100_return_at_75min"] == 19.0
  assert "ppo_pong_last100_return_at_2h" not in cut
