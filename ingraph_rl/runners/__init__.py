"""Runners: what runs agents, generic over their builders (`builder.py`).

  builder.py       `Root` (a root component, its API list, input spaces and
                   seed: what an executor needs) and `ActorLearnerBuilder`,
                   the protocol of agents whose actors feed a learner's queue.
  driver.py        `ActorLearnerDriver`: actor threads and a learner in one
                   process; `EpisodeTotals`.
  evaluation.py    greedy episodes of a builder's policy with given weights.
  environments.py  the actors' vector envs from `--env` ids.

The cluster roles are in `ingraph_rl.distributed`, the SavedModel export in
`ingraph_rl.export`; neither imports an agent either. An agent is one
builder (`ingraph_rl/agents/<agent>/builder.py`).
"""
