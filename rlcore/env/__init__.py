"""Environment contract and adapters.

``GymnasiumVecEnv`` imports gymnasium only when it is built, so rlcore works without gymnasium installed.
"""

from rlcore.env.gymnasium import GymnasiumVecEnv
from rlcore.env.legged_gym import LeggedGymVecEnv
from rlcore.env.vec_env import VecEnv
from rlcore.errors import ConfigError  # tasks raise it for bad settings (they import only rlcore.env)

__all__ = ["ConfigError", "GymnasiumVecEnv", "LeggedGymVecEnv", "VecEnv"]
