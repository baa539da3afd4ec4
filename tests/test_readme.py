"""The README's Python examples run as written."""

import re

from ingraph_rl.testing.fresh_process import ROOT

README = ROOT / "README.md"


def test_readme_python_blocks_run(capsys):
  blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
  assert len(blocks) >= 2
  namespace = {}
  for block in blocks:
    exec(compile(block, str(README), "exec"), namespace)
  printed = capsys.readouterr().out
  assert "value(states: FloatBox(shape=(4,)" in printed
  assert (
    "component 'critic', API method 'value', argument 'states': "
    "shape mismatch at dim 1: expected 4, got 5"
  ) in printed
