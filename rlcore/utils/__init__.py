"""Generic helpers: trajectories, activations, optimisers, schedules, NaN checks, ``torch.compile``, CPU memory.

The names of rsl_rl 5.x's ``rsl_rl.utils`` are available here too (``resolve_callable``,
``split_and_pad_trajectories``, ``LogWriter``, ...). They are imported on first use, so that importing one
submodule (e.g. ``rlcore.utils.trajectories`` from a model) does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LogWriter": "rlcore.logging.log_writer",
    "WandbLogWriter": "rlcore.logging.wandb_log_writer",
    "Logger": "rlcore.logging.logger",
    "check_nan": "rlcore.utils.nan_check",
    "compile_model": "rlcore.utils.compile",
    "get_param": "rlcore.config.resolve",
    "reduce_gradients_in_buckets": "rlcore.distributed",
    "resolve_callable": "rlcore.config.resolve",
    "resolve_class": "rlcore.config.resolve",
    "resolve_nn_activation": "rlcore.utils.activation",
    "resolve_obs_groups": "rlcore.config.resolve",
    "resolve_optimizer": "rlcore.utils.optimizer",
    "split_and_pad_trajectories": "rlcore.utils.trajectories",
    "unpad_trajectories": "rlcore.utils.trajectories",
}
"""Public name -> the module that defines it (some live in the concern packages: config, logging, distributed)."""

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
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlcore.utils' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
