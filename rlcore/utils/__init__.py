"""Helpers: config resolution, trajectories, distributed helpers, logging writers, export, checkpoints.

The names of rsl_rl 5.x's ``rsl_rl.utils`` are available here too (``resolve_callable``,
``split_and_pad_trajectories``, ``LogWriter``, ...). They are imported on first use, so that importing one
submodule (e.g. ``rlcore.utils.trajectories`` from a model) does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LogWriter": "log_writer",
    "WandbLogWriter": "wandb_log_writer",
    "Logger": "logger",
    "check_nan": "nan_check",
    "compile_model": "compile",
    "get_param": "config",
    "reduce_gradients_in_buckets": "distributed",
    "resolve_callable": "config",
    "resolve_class": "config",
    "resolve_nn_activation": "activation",
    "resolve_obs_groups": "config",
    "resolve_optimizer": "optimizer",
    "split_and_pad_trajectories": "trajectories",
    "unpad_trajectories": "trajectories",
}
"""Public name -> the ``rlcore.utils`` submodule that defines it."""

__all__ = [
    "LogWriter",
    "Logger",
    "WandbLogWriter",
    "check_nan",
    "compile_model",
    "get_param",
    "reduce_gradients_in_buckets",
    "resolve_callable",
    "resolve_class",
    "resolve_nn_activation",
    "resolve_obs_groups",
    "resolve_optimizer",
    "split_and_pad_trajectories",
    "unpad_trajectories",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"rlcore.utils.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlcore.utils' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
