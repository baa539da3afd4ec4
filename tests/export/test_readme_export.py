"""The README's Export examples run as written: the export in this process,
acting and continued training in a fresh process without ingraph_rl."""

import contextlib
import io
import os
import re
import shutil

import pytest
import tensorflow as tf

from ingraph_rl.testing.fresh_process import ROOT

README = ROOT / "README.md"


def export_blocks():
  text = README.read_text()
  section = text.split("\n## Export\n", 1)[1].split("\n## ", 1)[0]
  return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.slow
def test_readme_export_examples_run_in_a_fresh_process(fresh_python):
  export, act, train = export_blocks()
  namespace = {}
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    exec(compile(export, str(README), "exec"), namespace)
  expected = re.search(r"^# (\[.*\])$", export, re.M).group(1)
  assert printed.getvalue().strip() == expected
  path = namespace["path"]
  try:
    run_loaded(fresh_python, path, act, train)
  finally:
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def run_loaded(fresh_python, path, act, train):
  child = (
    "path = sys.argv[1]\n"
    + act
    + train
    + "import json\nprint(json.dumps({'ok': True}))\n"
  )
  assert fresh_python(child, path) == {"ok": True}
  again = tf.saved_model.load(path + "_continued")
  assert int(again.signatures["get_train_step"]()["train_step"]) == 10
