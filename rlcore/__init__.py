"""rlcore: TensorDict-based reinforcement learning for legged robots."""

import os as _os
import sys as _sys

# On small CPUs OpenMP's busy-waiting threads turn contention into multi-x slowdowns; it must be
# configured before torch loads, so do it here when rlcore is imported first.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
