"""Components: layers, networks, and the common wiring pieces."""
