"""Optimizers by name, so configs can say ``optimizer: adamw``."""

from __future__ import annotations

import torch

from rlcore.errors import ConfigError

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}


def resolve_optimizer(optimizer_name: str) -> type[torch.optim.Optimizer]:
    """The optimizer class for ``optimizer_name`` (case-insensitive), e.g. ``resolve_optimizer("adam")(params, lr=1e-3)``.

    Raises:
        ValueError: the name is unknown; the message lists the valid names.
    """
    key = str(optimizer_name).lower()
    if key not in OPTIMIZERS:
        raise ConfigError(f"Unknown optimizer '{optimizer_name}'. Valid optimizers: {', '.join(OPTIMIZERS)}.")
    return OPTIMIZERS[key]


__all__ = ["OPTIMIZERS", "resolve_optimizer"]
