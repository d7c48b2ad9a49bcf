"""``torch.compile`` for a model, refusing the modes that cannot work with the algorithms."""

from __future__ import annotations

import torch

from rlcore.errors import ConfigError

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
"""Modes that replay CUDA graphs: a replay overwrites the previous call's outputs, and the algorithms call a
model several times before using the results (actor on the batch, then on mirrored observations, ...)."""


def compile_model(model: torch.nn.Module, mode: str | None = None) -> torch.nn.Module:
    """``torch.compile(model, mode=mode)``, or ``model`` itself when ``mode`` is None.

    Raises:
        ValueError: a CUDA-graph mode (``"reduce-overhead"``, ``"max-autotune"``); use ``"default"`` or
            ``"max-autotune-no-cudagraphs"``.
    """
    if mode is None:
        return model
    if mode in CUDA_GRAPH_MODES:
        raise ConfigError(f"torch.compile mode '{mode}' replays CUDA graphs, which the algorithms cannot use; "
                         "use 'default' or 'max-autotune-no-cudagraphs' (or None to not compile).")
    return torch.compile(model, mode=mode)  # type: ignore[return-value]


__all__ = ["compile_model"]
