"""rsl_rl's module path ``rsl_rl.utils.logger`` for drop-in imports (``from rlcore.utils.logger import Logger``).

The logger lives in :mod:`rlcore.logging.logger`, with the other things a run writes while it runs."""

from rlcore.logging.logger import Logger

__all__ = ["Logger"]
