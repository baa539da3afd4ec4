"""The component model: composition, assembly (meta graph) and build."""

from ingraph_rl.core.assembly import inline
from ingraph_rl.core.component import Component
from ingraph_rl.core.decorators import api, graph_fn
from ingraph_rl.core.meta_graph import MetaGraph, OpRecord
from ingraph_rl.errors import (
  AssemblyError,
  BuildError,
  InputIncompleteError,
  SpaceError,
)

__all__ = [
  "Component",
  "api",
  "graph_fn",
  "inline",
  "MetaGraph",
  "OpRecord",
  "AssemblyError",
  "BuildError",
  "InputIncompleteError",
  "SpaceError",
]
