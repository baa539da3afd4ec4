"""Executors turn a built component tree into callable root APIs.

`TFExecutor` (ingraph_rl.executors.tensorflow) and `TorchExecutor`
(ingraph_rl.executors.torch) are imported from their modules, so using one
never imports the other backend.
"""
