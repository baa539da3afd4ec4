"""The DM Lab flags that experiments/impala.py and evaluate_dmlab.py share,
and the checks they run on them before any env starts.

    FLAGS = config_flags.define_flags(DMLabSettings)
    settings = dmlab_settings.from_flags()
    run, skipped = dmlab_settings.plan_levels(levels, settings)  # or raise

`--dataset_path` is scalable_agent's flag: the directory of the Brady,
Konkle & Oliva (2008) images that two psychlab levels of DMLab-30 read
(passed to the `Lab` as `datasetPath`). Without it a run that needs them
stops before any env starts, saying which levels, which dataset and where
to get it, unless `--skip_levels_without_dataset` leaves those levels out
(the report is then incomplete and says over how many levels its mean is).
"""

import dataclasses
import os
import typing

from experiments import config_flags
from ingraph_rl.environments import dmlab30
from ingraph_rl.utils.config_fields import field


@dataclasses.dataclass(frozen=True)
class DMLabSettings:
  """DM Lab settings of a run (flags of impala.py and evaluate_dmlab.py)."""

  dataset_path: typing.Optional[str] = field(
    None,
    "DM Lab levels: directory of the Brady, Konkle & Oliva (2008) images "
    "(DM Lab's data/brady_konkle_oliva2008/README.md) that "
    "psychlab_arbitrary_visuomotor_mapping and "
    "psychlab_continuous_recognition read (the Lab's datasetPath; as "
    "scalable_agent's flag).",
  )
  skip_levels_without_dataset: bool = field(
    False,
    "DMLab-30: leave out the levels that need --dataset_path instead of "
    "stopping (the report is then incomplete).",
  )


def from_flags(flag_values=None):
  """The DMLabSettings of the passed flags."""
  kwargs = {} if flag_values is None else {"flag_values": flag_values}
  values = config_flags.resolve((DMLabSettings,), **kwargs)
  return config_flags.make(DMLabSettings, values)


def plan_levels(levels, settings):
  """(levels to run, levels skipped) of `levels` (DM Lab level names);
  raises `dmlab30.DatasetMissingError` (a ValueError) when some need the
  dataset, none is given and skipping was not asked for."""
  if settings.skip_levels_without_dataset and not settings.dataset_path:
    skipped = [level for level in levels if dmlab30.needs_dataset(level)]
    return [level for level in levels if level not in skipped], skipped
  dmlab30.check_dataset(levels, settings.dataset_path)
  return list(levels), []


def lab_config(settings):
  """The `Lab` config these settings add ({"datasetPath": ...})."""
  if not settings.dataset_path:
    return {}
  path = settings.dataset_path
  return {"datasetPath": path if path == "dummy" else os.path.abspath(path)}
