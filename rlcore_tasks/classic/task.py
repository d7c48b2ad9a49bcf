"""The classic-control tasks as rlcore's tools see them: ``pendulum`` and ``cartpole`` (pure torch).

Registered through the ``rlcore.tasks`` entry point in ``pyproject.toml``."""

from __future__ import annotations

from rlcore.env.task import TaskSpec
from rlcore_tasks.classic.cartpole import CartPole
from rlcore_tasks.classic.pendulum import PendulumSwingUp

TASKS = [
    TaskSpec(name="pendulum", make_env=PendulumSwingUp, summary="pendulum swing-up (torch)"),
    TaskSpec(name="cartpole", make_env=CartPole, summary="cart-pole balance (torch)"),
]
