"""C++ custom ops (segment-tree sampling and updates) with pure-TF fallbacks.

No op exists yet: they arrive with the replay memories. The loader will live
here and fall back to the pure-TF path when the shared library is not built.
"""
