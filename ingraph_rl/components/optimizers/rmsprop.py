"""RMSProp with TF's ResourceApplyRMSProp (IMPALA's optimizer)."""

import tensorflow as tf

from ingraph_rl.components.optimizers.optimizer import (
  Optimizer,
  as_dtype,
  torch_layout,
)


class RMSProp(Optimizer):
  """TF's RMSProp: ms = decay*ms + (1-decay)*g^2,
  mom = momentum*mom + lr*g / sqrt(ms + epsilon), var -= mom.

  epsilon sits INSIDE the square root (as in tf.train.RMSPropOptimizer,
  which scalable_agent used with epsilon=0.1); torch.optim.RMSprop adds it
  outside, so the two agree only for tiny epsilon. IMPALA's settings:
  `RMSProp(0.00048, decay=0.99, momentum=0.0, epsilon=0.1)`.
  """

  slot_names = ("ms", "mom")

  def __init__(
    self,
    learning_rate,
    decay=0.9,
    momentum=0.0,
    epsilon=1e-10,
    clip_global_norm=None,
    scope="rmsprop",
  ):
    super().__init__(learning_rate, clip_global_norm, scope)
    self.decay, self.momentum, self.epsilon = decay, momentum, epsilon

  def _tf_apply(self, var, grad, slots, step, lr):
    ms, mom = slots
    tf.raw_ops.ResourceApplyRMSProp(
      var=var.handle,
      ms=ms.handle,
      mom=mom.handle,
      lr=lr,
      rho=as_dtype(self.decay, var.dtype),
      momentum=as_dtype(self.momentum, var.dtype),
      epsilon=as_dtype(self.epsilon, var.dtype),
      grad=grad,
    )

  def _torch_apply(self, var, grad, slots, step, lr):
    ms, mom = (torch_layout(s, var) for s in slots)
    ms.mul_(self.decay).add_((1 - self.decay) * grad * grad)
    mom.mul_(self.momentum).add_(lr * grad / (ms + self.epsilon).sqrt())
    var.sub_(mom)
