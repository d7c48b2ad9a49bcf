"""``torch.compile`` for a model, refusing the modes that cannot work with the algorithms."""

from __future__ import annotations

from collections.abc import Iterable

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
    _check_mode(mode)
    return torch.compile(model, mode=mode)  # type: ignore[return-value]


def compile_mlp_heads(models: Iterable[torch.nn.Module], mode: str | None) -> None:
    """``torch.compile`` each model's MLP head in place (``nn.Module.compile``; ``mode`` None: nothing to do).

    In place, so state-dict keys, checkpoints and export are unchanged; the observation normalisers, encoders
    and distributions stay eager. The algorithms' ``compile(mode)`` methods call this.

    Raises:
        ConfigError: a CUDA-graph mode (see :func:`compile_model`).
    """
    if mode is None:
        return
    _check_mode(mode)
    for model in models:
        model.mlp.compile(mode=mode)


def _check_mode(mode: str) -> None:
    if mode in CUDA_GRAPH_MODES:
        raise ConfigError(f"torch.compile mode '{mode}' replays CUDA graphs, which the algorithms cannot use; "
                          "use 'default' or 'max-autotune-no-cudagraphs' (or None to not compile).")


__all__ = ["compile_mlp_heads", "compile_model"]
