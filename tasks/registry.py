"""A tiny name -> factory registry so configs and scripts can build any task from a string.

The Go2 factories import their task module lazily, so importing the registry never pulls in a heavy
simulator (MuJoCo) that the chosen task does not need; the classic tasks are pure torch.
"""

from __future__ import annotations

from typing import Any, Callable

from rlcore.env import ConfigError, GymnasiumVecEnv, VecEnv
from tasks.classic.cartpole import CartPole
from tasks.classic.pendulum import PendulumSwingUp

TaskFactory = Callable[..., VecEnv]

_REGISTRY: dict[str, TaskFactory] = {}


class UnknownTaskError(ConfigError, KeyError):
    """Raised by :func:`make_task` for a name that is not registered (catchable as either base)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


def register_task(name: str, factory: TaskFactory, *, overwrite: bool = False) -> None:
    """Register ``factory(**kwargs) -> VecEnv`` under ``name``; re-registering needs ``overwrite``."""
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"task {name!r} is already registered (pass overwrite=True to replace it)")
    _REGISTRY[name] = factory


def list_tasks() -> list[str]:
    """Sorted names of the registered tasks."""
    return sorted(_REGISTRY)


def make_task(name: str, **kwargs: Any) -> VecEnv:
    """Build the task registered as ``name``, passing ``kwargs`` (num_envs, device, seed, ...) through."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}") from None
    return factory(**kwargs)


# ---------------------------------------------------------------------------- built-in tasks
def _make_pendulum(**kwargs: Any) -> VecEnv:
    return PendulumSwingUp(**kwargs)


def _make_cartpole(**kwargs: Any) -> VecEnv:
    return CartPole(**kwargs)


register_task("pendulum", _make_pendulum)
register_task("cartpole", _make_cartpole)


def _make_gym(env_id: str = "Pendulum-v1", **kwargs: Any) -> VecEnv:
    """Any registered Gymnasium id (``task=gym env_id=<id> num_envs=<n>``); kwargs go to ``GymnasiumVecEnv.make``."""
    return GymnasiumVecEnv.make(env_id, **kwargs)


register_task("gym", _make_gym)


def _make_go2(**kwargs: Any) -> VecEnv:
    from tasks.go2 import Go2Env  # MuJoCo: only for the Go2 tasks (module doc)

    return Go2Env(**kwargs)


def _make_go2_rough(**kwargs: Any) -> VecEnv:
    from tasks.go2 import Go2Env

    terrain = {"type": "rough", **kwargs.pop("terrain", {})}
    return Go2Env(terrain=terrain, **kwargs)


register_task("go2", _make_go2)
register_task("go2_rough", _make_go2_rough)
