"""ingraph_rl/utils/config_fields.py: its docstring examples (fields,
choices, an actor copy's weights_dtype) hold."""

import doctest

from ingraph_rl.utils import config_fields


def test_docstring_examples():
  failures, tried = doctest.testmod(config_fields)
  assert failures == 0 and tried >= 4
