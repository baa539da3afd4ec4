"""The experiments' one progress format: plain lines on stdout,

    [impala] frames    204800  fps    9210  updates    160  ...  wall 22.4
    [dqn] env steps 12000  SPS 2210  episodes 61  ...  wall 5.6

the agent in brackets, then `name value` pairs two spaces apart, ending
with the seconds since training started (`wall`): what benchmarks parse
(benchmarks/apex_frames.py, cluster_scaling.py), the same in every
experiment and in a cluster task's log as in a one-process run.
"""

import time


def progress_line(agent, fields, start):
  """`[agent] name value  ...  wall s`: `fields` are (name, formatted
  value) pairs; `start` the `time.time()` training started at.

  >>> line = progress_line("dqn", [("env steps", 800), ("SPS", 90)], 0.0)
  >>> line[:33], float(line.split()[-1]) > 0
  ('[dqn] env steps 800  SPS 90  wall', True)
  """
  pairs = "  ".join(f"{name} {value}" for name, value in fields)
  return f"[{agent}] {pairs}  wall {time.time() - start:.1f}"


def print_progress(agent, fields, start):
  print(progress_line(agent, fields, start), flush=True)
