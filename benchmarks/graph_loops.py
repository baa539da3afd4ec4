"""Graph loops for benchmarks (flag-free: tests import it beside other
benchmarks' flags)."""

import tensorflow as tf


def repeat_in_graph(fn, args, k):
  """`run()`: `fn(*args)` `k` times in ONE graph call (a tf.while_loop),
  as the actor's and the DQN loop's graphs call the policy: no Python call
  per forward. The arguments ride as loop variables and every output feeds
  a sum the loop returns, so grappler can neither hoist the work out of
  the loop nor prune it (outputs consumed only by control dependencies
  are pruned: pure ops then never run)."""

  def total(out):
    leaves = [
      tf.cast(tf.reduce_sum(x), tf.float64)
      for x in tf.nest.flatten(out)
      if x.dtype.is_floating or x.dtype.is_integer
    ]
    return tf.add_n(leaves)

  @tf.function(autograph=False)
  def loop(args):
    def body(i, acc, args):
      out = fn(*args)
      return i + 1, acc + total(out), args

    return tf.while_loop(
      lambda i, *_: i < k,
      body,
      (tf.constant(0), tf.constant(0.0, tf.float64), args),
      parallel_iterations=1,
    )[1]

  args = tf.nest.map_structure(tf.convert_to_tensor, tuple(args))
  loop(args).numpy()  # Trace.
  return lambda: loop(args).numpy()
