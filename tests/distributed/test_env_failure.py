"""A cluster actor tells its env's failure from its learner's (issue 40):
`roles.env_failure` finds the WorkerDiedError inside the TF error that the
actor's graph call raises, as a real env step in a graph raises it."""

import pytest
import tensorflow as tf

from ingraph_rl.distributed import roles
from ingraph_rl.environments import WorkerDiedError


def graph_error(exception):
  """The TF error of a graph call whose numpy_function raises."""

  def step(x):
    raise exception

  @tf.function
  def call():
    return tf.numpy_function(step, [tf.constant(1.0)], tf.float32)

  with pytest.raises(tf.errors.OpError) as e:
    call()
  return e.value


def test_a_worker_died_error_in_the_env_step_is_the_envs():
  message = (
    "env worker 1 (pid 7; env 1 of 2: CartPole-v1) did not answer within "
    "3 s while stepping (killed it)"
  )
  error = graph_error(WorkerDiedError(message))
  assert isinstance(error, roles.UNREACHABLE)  # Not told apart by type.
  assert roles.env_failure(error) == f"WorkerDiedError: {message}"


def test_other_errors_are_not_the_envs():
  assert roles.env_failure(graph_error(ValueError("bad"))) is None
  assert (
    roles.env_failure(tf.errors.UnavailableError(None, None, "gone")) is None
  )
  assert roles.EXIT_ENV_FAILED not in (
    roles.EXIT_LEARNER_GONE,
    roles.EXIT_PS_GONE,
    0,
    1,
  )
