"""The IMPALA-throughput benchmark's --quick run works and writes the
contract's JSON (into a temporary folder, not over the committed results)."""

import pytest


@pytest.mark.slow  # ~35 s with its two variants: make test-all.
def test_quick_run_writes_contract_json(run_quick, tmp_path):
  # The agent-feature variants (not run by --quick unless given), on the
  # first env's first mode (threads) with 2 actors.
  doc, out = run_quick(
    "impala_throughput",
    "--variants=env_groups=2,batched_inference=1",
    timeout=300,
  )
  assert doc["benchmark"] == "impala_throughput" and doc["quick"] is True
  assert set(doc["machine"]) >= {"cpu", "cores", "gpu", "tf", "torch"}
  cases = {r["case"] for r in doc["results"]}
  assert "cartpole_v1/learner_only" in cases
  for mode in ("threads", "processes"):
    for phase in (
      "raw",
      "raw_threads",
      "actors_only",
      "end_to_end",
      "end_to_end_trained",
    ):
      assert f"cartpole_v1/{mode}/actors_2/{phase}" in cases
  # One thread stepping the envs in turn: for in-process (GIL) envs.
  assert "cartpole_v1/threads/actors_2/raw_serial" in cases
  assert "cartpole_v1/processes/actors_2/raw_serial" not in cases
  for r in doc["results"]:
    assert r["reps"] >= 1
    assert 0 < r["min"] <= r["median"] <= r["max"]
    if r["metric"] == "throughput":
      assert r["unit"] in ("frames/s", "env steps/s")
  for mode in ("threads", "processes"):
    for phase in ("actors_only", "end_to_end", "learner_only"):
      key = f"cartpole_v1_{mode}_actors_2_{phase}_over_raw"
      assert isinstance(doc["ratios"][key], float) and doc["ratios"][key] > 0
    best = f"cartpole_v1_{mode}_best_end_to_end_over_best_raw"
    assert doc["ratios"][best] > 0
  assert (
    doc["ratios"]["cartpole_v1_processes_over_threads_actors_2_end_to_end"] > 0
  )
  stats = {
    (r["case"], r["unit"]): r for r in doc["results"] if r["metric"] != "update"
  }
  for mode in ("threads_groups2", "threads_batched1"):
    for phase in ("raw", "actors_only", "end_to_end", "end_to_end_trained"):
      row = stats[(f"cartpole_v1/{mode}/actors_2/{phase}", "env steps/s")]
      assert row["min"] > 0, row
    for phase in ("actors_only", "end_to_end"):
      key = f"cartpole_v1_{mode}_actors_2_{phase}_over_raw"
      assert isinstance(doc["ratios"][key], float) and doc["ratios"][key] > 0
    assert (
      doc["ratios"][f"cartpole_v1_{mode}_best_end_to_end_over_best_raw"] > 0
    )
  assert doc["config"]["variants (first env only)"] == {
    "groups2": {"env_groups": 2},
    "batched1": {"batched_inference": 1},
  }
  assert set(
    doc["config"]["envs"]["cartpole_v1"]["faster_env_mode (medians)"].values()
  ) <= {"threads", "processes"}
  cfg = doc["config"]
  env_cfg = cfg["envs"]["cartpole_v1"]
  assert env_cfg["frames_per_env_step"] == 1
  # Both consumers really ran: the drain dequeued and the learner updated
  # (with batched inference: the inference thread served both phases).
  assert set(env_cfg["configs"]) >= {
    "threads_groups2/actors_2",
    "threads_batched1/actors_2",
  }
  for c in env_cfg["configs"].values():
    assert c["drained_rollouts"] > 0 and c["learner_updates_run"] > 0
    assert c["min_unrolls_per_window"] >= 1
  # The first env is profiled: env.step share of actor time in (0, 1] (with
  # env groups: each group's step is timed).
  for key in ("threads", "threads_groups2", "threads_batched1"):
    prof = env_cfg["configs"][f"{key}/actors_2"]["profile_actors_only"]
    assert 0 < prof["env_step_share_of_actor_thread_time"] <= 1, key
    assert prof["act_only_ms_per_call (actors idle)"] > 0, key
  assert "threads" in cfg
  assert not (tmp_path / "impala_throughput.png").exists()  # Full runs only.
  # The summary line comes last.
  last = out.stdout.strip().splitlines()[-1]
  assert last.startswith("impala_throughput [quick]")


# ~35 s on 2 shared cores (a learner, a driver and env worker processes to
# build): with the other benchmark smokes of that size, in make test-all.
@pytest.mark.slow
def test_quick_dmlab_run_uses_the_fake_in_env_workers(run_quick):
  doc, _ = run_quick(
    "impala_throughput",
    "--env=dmlab:seekavoid_arena_01",
    "--num_actors=1",
    "--envs_per_actor=2",
    "--unroll_length=5",
    "--batch_size=2",
    timeout=300,
    unset=("PYTHONPATH",),  # No deepmind_lab but the fake's shim.
  )
  cfg = doc["config"]["envs"]["dmlab_seekavoid_arena_01"]
  assert cfg["kind"] == "dmlab" and cfg["frames_per_env_step"] == 4
  assert "FAKE deepmind_lab" in cfg["deepmind_lab"]
  assert "0.34 ms of CPU per rendered 96x72 frame" in cfg["deepmind_lab"]
  assert "LP_NUM_THREADS=0" in cfg["deepmind_lab"]
  cases = {r["case"] for r in doc["results"]}
  for phase in ("raw", "actors_only", "end_to_end"):
    assert f"dmlab_seekavoid_arena_01/native/actors_1/{phase}" in cases
  # The layout's ratios, on wall clock and on CPU per step.
  layout = doc["ratios"]["dmlab_fake_actors_only_over_raw_actors_1_envs_2"]
  assert (
    layout
    == doc["ratios"][
      "dmlab_seekavoid_arena_01_native_actors_1_actors_only_over_raw"
    ]
  )
  cpu = doc["ratios"]["dmlab_fake_cpu_actors_only_over_raw_actors_1_envs_2"]
  assert 0 < cpu < 1.5  # The actors add TF's CPU to the env's.
  ratio = doc["ratios"]["dmlab_fake_actors_only_over_raw"]
  assert isinstance(ratio, float) and ratio > 0
  assert (
    ratio
    == doc["ratios"][
      "dmlab_seekavoid_arena_01_native_best_actors_only_over_best_raw"
    ]
  )
  verdict = doc["config"]["targets_verdict"]
  assert set(
    verdict[
      "dmlab_seekavoid_arena_01_native_actors_only_over_raw >= 0.7"
    ].values()
  ) <= {"met", "MISSED"}
  c = cfg["configs"]["native/actors_1"]
  assert c["drained_rollouts"] > 0 and c["learner_updates_run"] > 0
