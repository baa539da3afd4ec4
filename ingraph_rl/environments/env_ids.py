"""Whether an env id names an env this machine can make, checked without
making it (no TF, no env built): the experiments check `--env` with it
before they build anything.

>>> check_env_id("CartPole-v1")
>>> try:
...   check_env_id("Cartpole-v1")
... except ValueError as e:
...   print(str(e).split(";")[-1])
 did you mean CartPole-v1?
"""

import difflib
import importlib
import importlib.util

from ingraph_rl.environments.atari import game_name
from ingraph_rl.environments.dmlab import dmlab_level_name, is_dmlab_id
from ingraph_rl.errors import EnvironmentNotAvailableError


def _suggestion(name, candidates):
  close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
  if not close:
    # Ids differ in case more often than in letters ("Cartpole").
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1)
    close = [lowered[c] for c in close]
  return f"; did you mean {close[0]}?" if close else ""


def _is_atari(env_id):
  return env_id.startswith("atari:") or env_id.startswith("ALE/")


def check_env_id(env_id):
  """Raises ValueError (one line, with the closest known id) when
  `env_id` names no gymnasium env or Atari ROM, and
  EnvironmentNotAvailableError when it needs a package that is not
  installed (ale-py, deepmind_lab). A DM Lab level's existence is DM
  Lab's to say: the level name's form is checked here, the level when an
  env is made."""
  if not isinstance(env_id, str) or not env_id.strip():
    raise ValueError(f"an env id is a non-empty string, got {env_id!r}")
  if is_dmlab_id(env_id):
    dmlab_level_name(env_id)
    if importlib.util.find_spec("deepmind_lab") is None:
      raise EnvironmentNotAvailableError(
        f"{env_id!r} needs deepmind_lab, which is not installed (it is "
        "not on PyPI: build it with Bazel from "
        "https://github.com/deepmind/lab, see docs/users/build.md there)",
        name="deepmind_lab",
      )
    return
  if _is_atari(env_id):
    try:
      from ale_py import roms
    except ImportError as e:
      raise EnvironmentNotAvailableError(
        f"{env_id!r} needs ale-py, which is not installed (pip install ale-py)",
        name="ale_py",
      ) from e
    game, known = game_name(env_id), roms.get_all_rom_ids()
    if game not in known:
      raise ValueError(
        f"ale-py has no ROM {game!r} (from {env_id!r})"
        + _suggestion(game, known)
      )
    return
  import gymnasium

  if ":" in env_id:  # "module:Env-v0" registers its envs on import.
    module = env_id.split(":", 1)[0]
    try:
      importlib.import_module(module)
    except ImportError as e:
      raise ValueError(f"{env_id!r}: cannot import {module!r} ({e})") from None
    env_id = env_id.split(":", 1)[1]
  try:
    gymnasium.spec(env_id)
  except gymnasium.error.Error as e:
    raise ValueError(
      f"gymnasium has no env {env_id!r} ({e})"
      + _suggestion(env_id, gymnasium.registry.keys())
    ) from None
