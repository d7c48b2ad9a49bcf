"""Learning algorithms and the factory that builds them from a config."""

from rlcore.algorithms.distillation import Distillation
from rlcore.algorithms.factory import construct_algorithm
from rlcore.algorithms.ppo import PPO

__all__ = ["PPO", "Distillation", "construct_algorithm"]
