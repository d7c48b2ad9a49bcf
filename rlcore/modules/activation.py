"""Activation functions by name, so configs can say ``activation: elu``."""

from __future__ import annotations

import torch.nn as nn

from rlcore.errors import ConfigError

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "elu": nn.ELU,
    "selu": nn.SELU,
    "relu": nn.ReLU,
    "crelu": nn.CELU,  # rsl_rl's name for CELU
    "celu": nn.CELU,
    "leaky_relu": nn.LeakyReLU,
    "lrelu": nn.LeakyReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "silu": nn.SiLU,
    "swish": nn.SiLU,
    "gelu": nn.GELU,
    "mish": nn.Mish,
    "softplus": nn.Softplus,
    "softsign": nn.Softsign,
    "identity": nn.Identity,
    "linear": nn.Identity,
}


def resolve_activation(name: str) -> nn.Module:
    """Return a new activation module for ``name`` (case-insensitive).

    Raises:
        ValueError: the name is unknown; the message lists the valid names.
    """
    key = str(name).lower()
    if key not in ACTIVATIONS:
        raise ConfigError(f"Unknown activation '{name}'. Valid activations: {', '.join(sorted(ACTIVATIONS))}.")
    return ACTIVATIONS[key]()


def activation_gain(name: str) -> float:
    """Orthogonal-init gain suited to an activation (``nn.init.calculate_gain`` where it knows the name)."""
    key = str(name).lower()
    table = {"relu": "relu", "leaky_relu": "leaky_relu", "lrelu": "leaky_relu", "tanh": "tanh", "selu": "selu",
             "sigmoid": "sigmoid"}
    if key in table:
        return float(nn.init.calculate_gain(table[key]))
    return 2.0**0.5 if key in ("elu", "crelu", "celu", "silu", "swish", "gelu", "mish", "softplus") else 1.0
