"""A member's fluid form as compiled rules: the fluid model's loop is compiled (numba), so
a gate it calls each step is compiled functions over two float arrays, the gate's
parameters and its state, which the member builds (its ``fluid_gate``). The Python
methods of the subclasses call the same functions: one rule, tested as it runs."""

from __future__ import annotations

import numpy as np


class FluidGate:
    """Parameters and state of one gate (their layout is its rules' own)."""

    def __init__(self, params: np.ndarray, state: np.ndarray):
        self.params = np.ascontiguousarray(params, dtype=float)
        self.state = np.ascontiguousarray(state, dtype=float)
