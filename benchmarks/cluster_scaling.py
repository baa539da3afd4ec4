"""Cluster scaling: IMPALA frames/s vs number of actor processes on a
loopback cluster (1 ps, 1 learner, N actors; experiments/launch_local.py),
against the single-process IMPALA (N actor threads; experiments/impala.py)
in the same run, plus the learner's update rate with 1 vs 2 towers.

    python -m benchmarks.cluster_scaling            # full run (~8 min)
    python -m benchmarks.cluster_scaling --quick    # smoke (< 60 s)

Every configuration runs as real processes with the same flags (CartPole
by default, 8 envs per actor, unroll 20, batch 8). The figure is the rate at
which the LEARNER consumes frames, read from its progress lines ("[impala]
frames N fps F") after a warm-up: with a bounded queue, production equals
consumption in steady state, and a starved or saturated learner shows up
as the plateau. Ratios are cluster over single-process at the same N.
"""

import argparse
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import common

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRESS = re.compile(r"\[impala\] frames +(\d+) +fps +(\d+)")


def _progress_fps(path, skip):
  try:
    text = pathlib.Path(path).read_text(errors="replace")
  except FileNotFoundError:
    return []
  return [float(f) for _, f in PROGRESS.findall(text)][skip:]


def measure(kind, num_actors, args, workdir):
  """Median learner frames/s of one run of `kind` ("cluster" or "single")
  over `args.window_s` seconds after `args.warmup_lines` progress lines."""
  common_flags = [
    f"--env={args.env}",
    f"--num_envs_per_actor={args.envs_per_actor}",
    f"--unroll_length={args.unroll_length}",
    f"--batch_size={args.batch_size}",
    "--total_environment_frames=10000000000",
    "--eval_episodes=0",
    "--checkpoint_every_minutes=100000",
    f"--log_every_seconds={args.log_every_s}",
  ]
  logdir = tempfile.mkdtemp(prefix=f"{kind}{num_actors}_", dir=workdir)
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  if kind == "cluster":
    cmd = [
      sys.executable,
      str(ROOT / "experiments" / "launch_local.py"),
      "--num_ps=1",
      f"--num_actors={num_actors}",
      f"--logdir={logdir}",
      "--",
      *common_flags,
    ]
    log_path = os.path.join(logdir, "logs", "learner-0.log")
    out = subprocess.DEVNULL
  else:
    cmd = [
      sys.executable,
      "-m",
      "experiments.impala",
      f"--num_actors={num_actors}",
      f"--logdir={logdir}",
      *common_flags,
    ]
    log_path = os.path.join(logdir, "stdout.log")
    out = open(log_path, "w")
  proc = subprocess.Popen(
    cmd,
    cwd=ROOT,
    env=env,
    stdout=out,
    stderr=subprocess.STDOUT,
    start_new_session=True,
  )
  try:
    deadline = time.monotonic() + args.start_timeout_s
    while len(_progress_fps(log_path, 0)) < args.warmup_lines:
      if proc.poll() is not None or time.monotonic() > deadline:
        raise RuntimeError(
          f"{kind} x{num_actors} produced no progress; see {log_path}"
        )
      time.sleep(0.5)
    time.sleep(args.window_s)
    fps = _progress_fps(log_path, args.warmup_lines)
  finally:
    os.killpg(proc.pid, signal.SIGINT)
    try:
      proc.wait(30)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    if out is not subprocess.DEVNULL:
      out.close()
  if not fps:
    raise RuntimeError(f"{kind} x{num_actors}: no progress in the window")
  return statistics.median(fps)


def tower_rates(quick):
  """IMPALA learner updates/s (batch 8) with 1 and 2 logical-CPU towers,
  measured by benchmarks/towers.py in this process (which has not started
  TF yet: the other measurements are subprocesses)."""

  from benchmarks import towers
  from ingraph_rl.executors import strategies

  strategies.configure_logical_cpus(2)
  updates, reps = (5, 1) if quick else (40, 5)
  out = {}
  for n in (1, 2):
    r = towers.measure_tower_updates(
      n, case="impala_b8", updates=updates, reps=reps
    )
    out[n] = common.Stat(r["median"], r["min"], r["max"], r["reps"])
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--env", default="CartPole-v1")
  parser.add_argument("--actors", default="1,2,4")
  parser.add_argument("--envs_per_actor", type=int, default=8)
  parser.add_argument("--unroll_length", type=int, default=20)
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--reps", type=int, default=2)
  parser.add_argument("--window_s", type=float, default=15.0)
  args = parser.parse_args(argv)
  args.log_every_s, args.warmup_lines, args.start_timeout_s = 2.0, 2, 240.0
  if args.quick:
    args.actors, args.reps, args.window_s = "1", 1, 3.0
    args.log_every_s, args.warmup_lines = 1.0, 1
  actors = [int(n) for n in args.actors.split(",")]
  workdir = tempfile.mkdtemp(prefix="cluster_scaling_")
  fps = {(k, n): [] for k in ("cluster", "single") for n in actors}
  for rep in range(args.reps):
    for n in actors:
      for kind in ("single", "cluster"):  # Interleaved.
        value = measure(kind, n, args, workdir)
        fps[(kind, n)].append(value)
        print(f"rep {rep} {kind:7s} x{n}: {value:8.0f} frames/s", flush=True)
  rows, ratios = [], {}
  for (kind, n), values in fps.items():
    rows.append(
      common.Row(
        f"{kind}/actors{n}",
        "learner frames/s",
        "frames/s",
        common.Stat.of(values),
      )
    )
    rows.append(
      common.Row(
        f"{kind}/actors{n}",
        "frames/s per actor",
        "frames/s",
        common.Stat.of(v / n for v in values),
      )
    )
  for n in actors:
    ratios[f"cluster_over_single_actors{n}"] = common.paired_ratio(
      fps[("cluster", n)], fps[("single", n)]
    )
  towers = tower_rates(args.quick)
  if towers:
    for n, stat in towers.items():
      rows.append(
        common.Row(f"learner/towers{n}", "updates/s", "updates/s", stat)
      )
    ratios["towers2_over_towers1_updates"] = towers[2].median / towers[1].median
  config = dict(
    vars(args),
    actor_counts=actors,
    ps_tasks=1,
    note=(
      "frames are env steps x action repeats consumed by the "
      "learner; tower rates on logical CPU devices measure "
      "overhead, not speed-up"
    ),
  )
  common.write_results("cluster_scaling", args.quick, config, rows, ratios)
  median = {key: statistics.median(v) for key, v in fps.items()}
  summary = ", ".join(
    f"x{n}: cluster {median[('cluster', n)]:.0f}"
    f" vs single {median[('single', n)]:.0f}"
    f" frames/s"
    for n in actors
  )
  common.print_table("cluster_scaling", rows, ratios, summary, args.quick)
  if not args.quick:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = {
      "single": "one process (actor threads)",
      "cluster": "loopback cluster (processes)",
    }
    for kind in ("single", "cluster"):
      ax.plot(
        actors,
        [statistics.median(fps[(kind, n)]) for n in actors],
        marker="o",
        label=labels[kind],
      )
    ax.set_xlabel("actors")
    ax.set_ylabel("learner frames/s")
    ax.set_xticks(actors)
    ax.set_title(
      f"IMPALA {args.env}, {args.envs_per_actor} envs/actor, 2 cores"
    )
    ax.legend()
    common.save_plot(fig, "cluster_scaling")


if __name__ == "__main__":
  main()
