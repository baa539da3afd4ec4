"""The model checks PPO's and TRPO's fuzz targets share: actions in range,
weights read back equal the variables, Adam's step count as the model
counts it, every float variable finite."""

import numpy as np


def check_actor_critic(target, api, args, out, scope, num_actions, adam_steps):
  """After any call of `target` (a fuzz Target with `fuzzer` and
  `continuous`) whose model says Adam took `adam_steps` steps."""
  fuzzer = target.fuzzer
  if api == "get_actions":
    a = out["actions"]
    if len(a) != len(args[0]):
      fuzzer.inconsistent(api, f"{len(a)} actions")
    if not target.continuous and np.any((a < 0) | (a >= num_actions)):
      fuzzer.inconsistent(api, f"actions {a}")
  elif api == "get_weights":
    for path, value in out.items():
      if not np.array_equal(value, fuzzer.state[f"var:{scope}/model/{path}"]):
        fuzzer.inconsistent(api, f"weight {path} differs")
  state = fuzzer.state
  steps = [v for k, v in state.items() if k.endswith("adam/iterations")]
  if int(steps[0]) != adam_steps:
    fuzzer.inconsistent(api, f"Adam steps {steps} != model")
  for k, v in state.items():
    if k.startswith("var:") and v.dtype.kind == "f":
      if not np.all(np.isfinite(v)):
        fuzzer.inconsistent(api, f"non-finite values in {k}")
        return
