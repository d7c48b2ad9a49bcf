"""Pure-torch classic-control tasks (pendulum swing-up, cart-pole) used to prove that algorithms learn."""

from tasks.classic.cartpole import CartPole
from tasks.classic.pendulum import PendulumSwingUp

__all__ = ["CartPole", "PendulumSwingUp"]
