"""Rollout storage."""

from .rollout_storage import HiddenState, RolloutStorage

__all__ = ["HiddenState", "RolloutStorage"]
