"""`@api` and `@graph_fn`: how a component declares what it can do.

An API method only wires: it calls sub-component APIs and its own graph
functions. A graph function does the numeric work; it has a TF body and may
register a torch body beside it:

    class Scale(Component):
      @api
      def call(self, x):
        return self._graph_fn_scale(x)

      @graph_fn
      def _graph_fn_scale(self, x):
        return 2.0 * x          # TensorFlow body.

      @_graph_fn_scale.torch
      def _graph_fn_scale(self, x):
        return 2.0 * x          # torch body, picked by the torch executor.
"""

import functools
import inspect
import typing

from ingraph_rl.core import context

# A component's method: its first argument is the component.
Body = typing.Callable[..., typing.Any]


class ApiMethod:
  """Descriptor made by `@api`. Calling it on a component records an API
  call in the running assembly (see `core.assembly`)."""

  def __init__(
    self, fn: Body, own_leading_dims: typing.Iterable[str] = ()
  ) -> None:
    self.fn = fn
    self.name = fn.__name__
    # Arguments whose batch/time sizes need not agree with the others'.
    self.own_leading_dims = frozenset(own_leading_dims)
    self.signature = inspect.signature(fn)
    params = list(self.signature.parameters.values())[1:]  # Drop `self`.
    for p in params:
      if p.kind in (p.VAR_KEYWORD,):
        raise TypeError(f"API method '{self.name}' may not take **kwargs")
    self.params = params
    functools.update_wrapper(typing.cast(Body, self), fn)

  def __get__(
    self, component: typing.Any, owner: type | None = None
  ) -> typing.Any:
    if component is None:
      return self
    return functools.partial(_call_api, component, self)

  def bind(
    self,
    component: typing.Any,
    args: typing.Sequence[typing.Any],
    kwargs: dict[str, typing.Any],
  ) -> dict[str, typing.Any]:
    """Argument name -> value, with defaults applied; *args are expanded to
    names `name[0]`, `name[1]`, ..."""
    bound = self.signature.bind(component, *args, **kwargs)
    bound.apply_defaults()
    out: dict[str, typing.Any] = {}
    for p in self.params:
      value = bound.arguments[p.name]
      if p.kind == p.VAR_POSITIONAL:
        for i, v in enumerate(value):
          out[f"{p.name}[{i}]"] = v
      else:
        out[p.name] = value
    return out


def _call_api(
  component: typing.Any,
  method: ApiMethod,
  *args: typing.Any,
  **kwargs: typing.Any,
) -> typing.Any:
  return context.current(component, method.name).call_api(
    component, method, args, kwargs
  )


def api(
  fn: Body | None = None, *, own_leading_dims: typing.Iterable[str] = ()
) -> typing.Any:
  """Declares an API method of a component.

  By default the arguments of one call must agree on their batch (and
  time) sizes; `@api(own_leading_dims=("inputs",))` exempts arguments
  whose leading dims mean something else (e.g. a folded [B * T] batch).
  """
  if fn is None:
    return lambda f: ApiMethod(f, own_leading_dims)
  return ApiMethod(fn, own_leading_dims)


class GraphFn:
  """Descriptor made by `@graph_fn`: a TF body and an optional torch body.

  Options:
    returns: number of values the function returns as a tuple, so an API
      method can unpack them (`a, b = self._graph_fn_x(...)`). Default: one
      (possibly nested) value.
    neutral: the body uses no backend-specific ops (only indexing and nest
      handling), so it serves as the torch body too.
    needs_subtree: the body reads variables of sub-components, so it waits
      until the whole subtree has made its variables.
    needs_gradients: the body calls `executors.gradients.tf_gradients`; the TF
      executor records the whole root API on a gradient tape.
    output_space: `f(component) -> Space` (or `f(component, in_spaces)`,
      given the spaces of the call's inputs in order) declaring the
      result's space instead of inferring it from the traced tensors
      (which cannot know bounds, the ranks of a value that comes out of a
      queue, or whether a dim is time or a feature); returning None falls
      back to inference.
  """

  def __init__(
    self,
    tf_body: Body,
    returns: int | None = None,
    neutral: bool = False,
    needs_subtree: bool = False,
    needs_gradients: bool = False,
    output_space: Body | None = None,
  ) -> None:
    self.tf_body = tf_body
    self.torch_body: Body | None = tf_body if neutral else None
    self.name = tf_body.__name__
    self.returns = returns
    self.needs_subtree = needs_subtree
    self.needs_gradients = needs_gradients
    self.output_space = output_space
    functools.update_wrapper(typing.cast(Body, self), tf_body)

  def torch(self, body: Body) -> "GraphFn":
    """Registers the torch body; use as `@_graph_fn_x.torch`."""
    self.torch_body = body
    return self

  def __get__(
    self, component: typing.Any, owner: type | None = None
  ) -> typing.Any:
    if component is None:
      return self
    return functools.partial(_call_graph_fn, component, self)


def _call_graph_fn(
  component: typing.Any, fn: GraphFn, *args: typing.Any, **kwargs: typing.Any
) -> typing.Any:
  return context.current(component, fn.name).call_graph_fn(
    component, fn, args, kwargs
  )


def graph_fn(
  fn: Body | None = None,
  *,
  returns: int | None = None,
  neutral: bool = False,
  needs_subtree: bool = False,
  needs_gradients: bool = False,
  output_space: Body | None = None,
) -> typing.Any:
  """Declares a graph function. Usable bare or with options: a `GraphFn`,
  or a decorator that makes one."""
  options: dict[str, typing.Any] = dict(
    returns=returns,
    neutral=neutral,
    needs_subtree=needs_subtree,
    needs_gradients=needs_gradients,
    output_space=output_space,
  )
  if fn is None:
    return functools.partial(GraphFn, **options)
  return GraphFn(fn, **options)
