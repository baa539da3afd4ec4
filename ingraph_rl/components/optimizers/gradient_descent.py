"""Plain gradient descent: var -= lr * grad (TF's
ResourceApplyGradientDescent)."""

import tensorflow as tf

from ingraph_rl.components.optimizers.optimizer import Optimizer


class GradientDescent(Optimizer):
  """SGD without momentum; matches torch.optim.SGD(momentum=0)."""

  def __init__(
    self, learning_rate, clip_global_norm=None, scope="gradient_descent"
  ):
    super().__init__(learning_rate, clip_global_norm, scope)

  def _tf_apply(self, var, grad, slots, step, lr):
    tf.raw_ops.ResourceApplyGradientDescent(
      var=var.handle, alpha=lr, delta=grad
    )

  def _torch_apply(self, var, grad, slots, step, lr):
    var.sub_(lr * grad)
