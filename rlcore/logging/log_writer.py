"""LogWriter: the interface of a logging backend (rsl_rl 5.x-compatible), so users can plug in their own.

A train config selects a writer with ``"logger": {"class_name": <LogWriter subclass or its import path>, **kwargs}``;
the runner's :class:`~rlcore.logging.logger.Logger` builds it as ``cls(log_dir=log_dir, **kwargs)`` when training
starts. The plain strings ``"tensorboard"``, ``"wandb"`` and ``"none"`` remain the short forms.
"""

from __future__ import annotations

import pathlib
from abc import ABC, abstractmethod


class LogWriter(ABC):
    """A logging backend. Only :meth:`add_scalar` is required; every other hook does nothing by default.

    The hooks are called by the runner's logger: ``store_config`` once when training starts, ``save_file`` for
    the code-state files written then (``git/*.diff``), ``save_model`` after each checkpoint, ``save_video`` for
    new ``*.mp4`` files under the run directory, ``stop`` when training ends.
    """

    @abstractmethod
    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
        """Record ``scalar_value`` under ``tag`` (e.g. ``"Loss/value"``) at iteration ``global_step``."""

    def store_config(self, env_cfg: dict | object, train_cfg: dict) -> None:
        """Record the environment and train configurations (once, when training starts)."""

    def save_model(self, model_path: str, it: int) -> None:
        """Upload the checkpoint just written to ``model_path`` at iteration ``it``."""

    def save_file(self, path: str) -> None:
        """Upload an arbitrary file of the run."""

    def save_video(self, video: pathlib.Path, it: int) -> None:
        """Upload a video file of the run."""

    def stop(self) -> None:
        """Close the backend (flush and finish the run)."""


__all__ = ["LogWriter"]
