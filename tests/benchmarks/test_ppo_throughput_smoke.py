"""The PPO throughput benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed
results)."""

import numpy as np
import pytest

from benchmarks.numpy_gae import numpy_gae


# ~40 s (two agents built, a rollout and updates each): `make test-all`.
@pytest.mark.slow
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  doc, out = run_quick("ppo_throughput")
  assert doc["benchmark"] == "ppo_throughput" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  cases = {(r["case"], r["unit"]) for r in doc["results"]}
  for side in ("ours", "cleanrl_style_torch", "raw_env"):
    assert (f"halfcheetah/{side}", "env steps/s") in cases
  for side in ("ours", "cleanrl_style_torch"):
    for part in ("update", "act", "env"):
      assert (f"halfcheetah/{side}/cpu_{part}", "ms/env step") in cases
  for variant in ("one_call", "python_minibatch_loop"):
    assert (f"update/halfcheetah/{variant}", "ms") in cases
  for r in doc["results"]:
    assert r["reps"] >= 1 and r["min"] <= r["median"] <= r["max"]
  for key in (
    "halfcheetah_steps_per_s_over_cleanrl_style_torch",
    "halfcheetah_cpu_per_env_step_cleanrl_style_torch_over_ours",
    "update_one_call_over_python_minibatch_loop",
  ):
    assert doc["ratios"][key] > 0
  shares = doc["config"]["cases"]["halfcheetah"][
    "cpu_shares (medians of per-rep CPU per env step)"
  ]
  for side in ("ours", "cleanrl_style_torch"):
    assert sum(shares[side].values()) == pytest.approx(1.0, abs=0.01)
  threads = doc["config"]["cases"]["halfcheetah"]["threads"]
  assert threads["torch_threads"] >= 1
  assert threads["tf_onednn"] in (True, False)  # As TF loaded here.
  assert not (tmp_path / "ppo_throughput.png").exists()  # Full runs only.
  assert out.stdout.strip().splitlines()[-1].startswith("ppo_throughput")


def test_numpy_gae_matches_a_hand_computed_case():
  # Two envs, three steps; env 1's episode ends at step 1.
  gamma, lam = 0.9, 0.5
  rewards = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]], np.float32)
  values = np.array([[0.5, 0.2, 0.1], [0.3, 0.4, 0.6]], np.float32)
  dones = np.array([[False, False, False], [False, True, False]])
  bootstrap = np.array([1.0, 2.0], np.float32)
  adv, ret = numpy_gae(rewards, values, dones, bootstrap, gamma, lam)
  # Env 0: deltas, then A_t = delta_t + gamma * lam * A_{t+1}.
  d2 = 2.0 + 0.9 * 1.0 - 0.1
  d1 = 0.0 + 0.9 * 0.1 - 0.2
  d0 = 1.0 + 0.9 * 0.2 - 0.5
  a2, a1 = d2, d1 + 0.45 * d2
  a0 = d0 + 0.45 * a1
  # Env 1: step 1 ends the episode (no bootstrap, no carry from step 2).
  e2 = 1.0 + 0.9 * 2.0 - 0.6
  e1 = 1.0 - 0.4
  e0 = 0.0 + 0.9 * 0.4 - 0.3 + 0.45 * e1
  np.testing.assert_allclose(adv, [[a0, a1, a2], [e0, e1, e2]], rtol=1e-6)
  np.testing.assert_allclose(ret, adv + values, rtol=1e-6)
