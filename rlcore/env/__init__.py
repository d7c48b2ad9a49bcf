"""Environment contract and adapters."""

from rlcore.env.vec_env import VecEnv

__all__ = ["VecEnv"]
