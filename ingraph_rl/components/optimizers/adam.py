"""Adam (Kingma & Ba) with TF's ResourceApplyAdam."""

import tensorflow as tf

from ingraph_rl.components.optimizers.optimizer import (
  Optimizer,
  as_dtype,
  torch_layout,
)


class Adam(Optimizer):
  """TF's Adam: lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t),
  var -= lr_t * m / (sqrt(v) + epsilon). torch.optim.Adam puts epsilon after
  the bias correction of v instead; the two agree to ~epsilon.
  """

  slot_names = ("m", "v")

  def __init__(
    self,
    learning_rate=1e-3,
    beta1=0.9,
    beta2=0.999,
    epsilon=1e-7,
    clip_global_norm=None,
    scope="adam",
  ):
    super().__init__(learning_rate, clip_global_norm, scope)
    self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

  def _tf_apply(self, var, grad, slots, step, lr):
    m, v = slots
    t = tf.cast(step, var.dtype)
    tf.raw_ops.ResourceApplyAdam(
      var=var.handle,
      m=m.handle,
      v=v.handle,
      beta1_power=tf.pow(as_dtype(self.beta1, var.dtype), t),
      beta2_power=tf.pow(as_dtype(self.beta2, var.dtype), t),
      lr=lr,
      beta1=as_dtype(self.beta1, var.dtype),
      beta2=as_dtype(self.beta2, var.dtype),
      epsilon=as_dtype(self.epsilon, var.dtype),
      grad=grad,
    )

  def _torch_apply(self, var, grad, slots, step, lr):
    m, v = (torch_layout(s, var) for s in slots)
    m.mul_(self.beta1).add_((1 - self.beta1) * grad)
    v.mul_(self.beta2).add_((1 - self.beta2) * grad * grad)
    lr_t = lr * (1 - self.beta2**step) ** 0.5 / (1 - self.beta1**step)
    var.sub_(lr_t * m / (v.sqrt() + self.epsilon))
