"""Agents: one folder per agent (config, networks, root components, and a
builder declaring its roots, API lists and spaces once; see
`ingraph_rl.runners.builder` for what runners need from a builder)."""
