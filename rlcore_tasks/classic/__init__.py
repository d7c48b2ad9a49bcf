"""Pure-torch classic-control tasks (pendulum swing-up, cart-pole) used to prove that algorithms learn."""

from rlcore_tasks.classic.cartpole import CartPole
from rlcore_tasks.classic.pendulum import PendulumSwingUp

__all__ = ["CartPole", "PendulumSwingUp"]
