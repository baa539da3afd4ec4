"""Helpers every benchmark shares (the contract is /work/shared/BENCHMARKS.md).

A benchmark measures ours and a baseline on the same work, interleaved,
several repetitions, and writes `benchmarks/results/<name>.json`:

    from benchmarks import common

    runs = common.interleave({"ours": run_ours, "plain": run_plain}, reps=5)
    ours = common.Stat.of(v["total_s"] for v in runs["ours"])
    rows = [common.Row("case/ours", "total", "ms", ours.scaled(1e3)), ...]
    ratios = {"ours_over_plain": common.paired_ratio(...)}
    common.write_results("my_bench", quick, config, rows, ratios)
    common.print_table("my_bench", rows, ratios, summary="...")

Importing this module sets `OMP_WAIT_POLICY=PASSIVE` and quiets TF's C++
logs (unless already set), so import it before TensorFlow or torch.
"""

import dataclasses
import gc
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

# Before any backend is imported: spinning OpenMP threads make timings swing
# 30-200x on a 2-core machine (see DESIGN.md, section 6).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
# Where results go; tests point it at a temporary folder so a smoke run never
# overwrites the committed full results.
RESULTS_DIR = pathlib.Path(
  os.environ.get("INGRAPH_RL_BENCH_RESULTS", RESULTS_DIR)
)


# --- the machine -------------------------------------------------------------


def machine_info():
  """{cpu, cores, gpu, tf, torch} of this machine (`gpu`: None without one;
  a backend that is not installed has version None). Imports no backend."""
  return {
    "cpu": _cpu_name(),
    "cores": os.cpu_count(),
    "gpu": _gpu_name(),
    "tf": _version("tensorflow", ("tensorflow", "tensorflow-cpu")),
    "torch": _version("torch", ("torch",)),
  }


def _cpu_name():
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _gpu_name():
  torch = sys.modules.get("torch")
  if torch is not None and torch.cuda.is_available():
    return torch.cuda.get_device_name(0)
  tf = sys.modules.get("tensorflow")
  if tf is not None and not tf.config.list_physical_devices("GPU"):
    return None
  if shutil.which("nvidia-smi"):
    try:
      out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
      ).stdout
    except (OSError, subprocess.SubprocessError):
      return None
    names = [n.strip() for n in out.splitlines() if n.strip()]
    return ", ".join(names) or None
  return None


def _version(module, dists):
  mod = sys.modules.get(module)
  if mod is not None and getattr(mod, "__version__", None):
    return mod.__version__
  for dist in dists:
    try:
      return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
      continue
  return None


def configure_threads(torch_threads=None, tf_intra_op=None, tf_inter_op=None):
  """Sets thread counts where given (TF's only before TF runs anything) and
  returns what is in effect, for a benchmark's `config` (with whether TF
  runs its oneDNN kernels). Imports a backend only to set its threads."""
  if torch_threads is not None:
    import torch

    torch.set_num_threads(int(torch_threads))
  if tf_intra_op is not None or tf_inter_op is not None:
    import tensorflow as tf

    if tf_intra_op is not None:
      tf.config.threading.set_intra_op_parallelism_threads(int(tf_intra_op))
    if tf_inter_op is not None:
      tf.config.threading.set_inter_op_parallelism_threads(int(tf_inter_op))
  out = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}
  torch = sys.modules.get("torch")
  out["torch_threads"] = (
    torch.get_num_threads() if torch is not None else "torch not imported"
  )
  tf = sys.modules.get("tensorflow")
  if tf is not None:
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    out["tf_intra_op_threads"] = intra or "0 (TF default: all cores)"
    out["tf_inter_op_threads"] = inter or "0 (TF default)"
    from experiments import configs  # Imports TF: only once it is loaded.

    # Off by default on CPUs without AVX-512 (experiments' --onednn).
    out["tf_onednn"] = configs.onednn_enabled()
  return out


def define_intra_op_threads_flag():
  """`--intra_op_threads` of a benchmark that runs the experiments' systems
  in its own process; pass its value to `experiment_threads`."""
  from absl import flags

  return flags.DEFINE_integer(
    "intra_op_threads",
    None,
    "TF intra-op threads of this process (0: TF's default); default: "
    "what a one-process experiment takes (experiments/configs.py).",
  )


def experiment_threads(intra_op_threads):
  """Sets TF's intra-op threads as a one-process experiment does (or to
  `intra_op_threads`), before TF runs anything; returns
  `configure_threads`'s record."""
  from experiments import configs

  n = configs.intra_op_threads(intra_op_threads)
  return configure_threads(tf_intra_op=n or None)


# --- measuring ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Stat:
  """Median, min and max of repeated measurements."""

  median: float
  min: float
  max: float
  reps: int

  @classmethod
  def of(cls, values):
    values = [float(v) for v in values]
    if not values:
      raise ValueError("no measurements")
    return cls(statistics.median(values), min(values), max(values), len(values))

  def scaled(self, factor):
    """The same figures times `factor` (e.g. 1e3 for seconds -> ms)."""
    return Stat(
      self.median * factor, self.min * factor, self.max * factor, self.reps
    )


def measure(fn, reps, warmup=1):
  """Times `fn()` `reps` times (after `warmup` untimed calls), collecting
  garbage before each call. Returns a `Stat` in seconds."""
  for _ in range(warmup):
    fn()
  times = []
  for _ in range(reps):
    gc.collect()
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return Stat.of(times)


def cpu_per(fn, units):
  """(CPU seconds per unit, wall seconds per unit) of `fn()`: this
  process's CPU, all threads."""
  gc.collect()
  wall, cpu = time.perf_counter(), time.process_time()
  fn()
  return (
    (time.process_time() - cpu) / units,
    (time.perf_counter() - wall) / units,
  )


def raw_env_kwargs(env_id):
  """`make_vector_env` keyword arguments of a lone env stepped in a loop as
  the raw ceiling: for Atari, ale-py's stepping threads pinned to cores
  0..k-1. Unpinned, such an env sometimes kept both of its threads on one
  of the 2 cores for whole rounds (DQN Pong's 8 envs: 4.3k against 6.3k
  env steps/s), so raw, and every ratio over it, was bimodal. The systems
  keep the experiments' unpinned threads (pinned, DQN's loop ran within
  1%: benchmarks/README.md, cpu_budget, 2026-11-27 later)."""
  from ingraph_rl.environments import is_atari_id

  return {"thread_affinity_offset": 0} if is_atari_id(env_id) else {}


def random_stepper(env, seed):
  """`step(k)`: k steps of a vector env with uniform random actions."""
  import numpy as np  # Only here: this module loads before the backends.

  rng = np.random.default_rng(seed)
  n = env.action_space.num_categories

  def step(k):
    for _ in range(k):
      env.step(rng.integers(0, n, env.num_envs, dtype=np.int64))

  return step


def interleave(fns, reps, warmup=1, between=gc.collect):
  """Runs the callables of `fns` (name -> fn) in turn, `reps` rounds after
  `warmup` untimed ones, rotating which goes first each round so drift on a
  shared machine hits every variant alike.

  Each call is timed; its record is `{"wall_s": seconds, "cpu_s": this
  process's CPU seconds, all threads}` plus the dict the callable returns
  (if any). `between()` runs before every call, untimed.
  Returns name -> list of records, one per timed round.
  """
  names = list(fns)
  out = {n: [] for n in names}
  for rnd in range(warmup + reps):
    shift = rnd % len(names)
    for name in names[shift:] + names[:shift]:
      if between is not None:
        between()
      start, cpu = time.perf_counter(), time.process_time()
      extra = fns[name]()
      record = {
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
      }
      if extra:
        record.update(extra)
      if rnd >= warmup:
        out[name].append(record)
  return out


def column(records, key):
  """The values of `key` in a list of records (from `interleave`)."""
  return [r[key] for r in records]


def paired_ratio(a, b):
  """Median over rounds of a[i] / b[i] (a and b measured in the same
  round, so drift cancels)."""
  return statistics.median(x / y for x, y in zip(a, b, strict=True))


def paired_difference(a, b):
  """Median over rounds of a[i] - b[i]."""
  return statistics.median(x - y for x, y in zip(a, b, strict=True))


# --- reporting ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
  """One line of results: a figure of one case."""

  case: str
  metric: str
  unit: str
  stat: Stat

  @classmethod
  def from_json(cls, d):
    return cls(
      d["case"],
      d["metric"],
      d["unit"],
      Stat(d["median"], d["min"], d["max"], d["reps"]),
    )

  def to_json(self):
    return {
      "case": self.case,
      "metric": self.metric,
      "unit": self.unit,
      "median": _num(self.stat.median),
      "min": _num(self.stat.min),
      "max": _num(self.stat.max),
      "reps": self.stat.reps,
    }


def _num(x, digits=6):
  """A float rounded to `digits` significant digits (JSON stays readable)."""
  x = float(x)
  if not math.isfinite(x):
    raise ValueError(f"not a finite number: {x}")
  return float(f"{x:.{digits}g}")


def results_path(name):
  return RESULTS_DIR / f"{name}.json"


def merge_stored(name, rows, ratios, config_cases):
  """`rows`, `ratios` and `config_cases` (a benchmark's `config["cases"]`)
  with what `benchmarks/results/<name>.json` holds of the cases NOT run
  now (a row, ratio or case key produced now replaces the stored one):
  for a benchmark whose cases need different process-wide settings, run
  one invocation per setting."""
  stored = json.loads(results_path(name).read_text())
  new_rows = {(r.case, r.metric, r.unit) for r in rows}
  kept = [
    Row.from_json(r)
    for r in stored["results"]
    if (r["case"], r["metric"], r["unit"]) not in new_rows
  ]
  return (
    kept + list(rows),
    {**stored["ratios"], **ratios},
    {**stored["config"].get("cases", {}), **config_cases},
  )


def write_results(name, quick, config, rows, ratios, extra=None):
  """Writes `benchmarks/results/<name>.json` in the contract's format and
  returns its path. A ratio may be None (not reached); `extra` adds
  top-level keys (e.g. learning curves)."""
  doc = {
    "benchmark": name,
    "quick": bool(quick),
    "machine": machine_info(),
    "config": config,
    "results": [r.to_json() for r in rows],
    "ratios": {k: None if v is None else _num(v) for k, v in ratios.items()},
  }
  doc.update(extra or {})
  RESULTS_DIR.mkdir(parents=True, exist_ok=True)
  path = results_path(name)
  tmp = path.with_suffix(".json.tmp")
  tmp.write_text(json.dumps(doc, indent=2) + "\n")
  tmp.replace(path)
  return path


def format_table(rows, ratios):
  """The results as aligned text: one line per row, then the ratios."""
  head = ("case", "metric", "unit", "median", "min", "max", "reps")
  body = [
    (
      r.case,
      r.metric,
      r.unit,
      _fmt(r.stat.median),
      _fmt(r.stat.min),
      _fmt(r.stat.max),
      str(r.stat.reps),
    )
    for r in rows
  ]
  widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
  right = {3, 4, 5, 6}

  def line(cells):
    return "  ".join(
      c.rjust(w) if i in right else c.ljust(w)
      for i, (c, w) in enumerate(zip(cells, widths))
    ).rstrip()

  lines = [line(head), line(["-" * w for w in widths])]
  lines += [line(b) for b in body]
  if ratios:
    lines.append("")
    width = max(len(k) for k in ratios)
    lines += [
      f"{k.ljust(width)}  {'-' if v is None else _fmt(v)}"
      for k, v in ratios.items()
    ]
  return "\n".join(lines)


def _fmt(x):
  x = float(x)
  if x == 0 or 0.01 <= abs(x) < 1e6:
    return f"{x:,.3f}" if abs(x) < 100 else f"{x:,.1f}"
  return f"{x:.3g}"


def print_table(name, rows, ratios, summary, quick=False, path=None):
  """Prints the table of results, then `summary` as the very last line."""
  note = " (--quick: smoke run, not a measurement)" if quick else ""
  print(f"== {name}{note}")
  print(format_table(rows, ratios))
  if path is not None:
    print(f"\nwrote {path}")
  print(summary, flush=True)


def pyplot():
  """matplotlib.pyplot with the file-only Agg backend."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def save_plot(fig, name):
  """Writes `fig` as `results/<name>.png` (tight layout, 110 dpi), closes it
  and returns the path."""
  fig.tight_layout()
  path = RESULTS_DIR / f"{name}.png"
  RESULTS_DIR.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=110)
  pyplot().close(fig)
  return path
