"""Memories: ring replay, prioritized replay on segment trees, frame-stack
replay, episode buffers. State lives in variables; operations are graph
functions, so an agent's act/observe/update fuse them into one graph."""
