"""Multi-layer perceptron: the head every rlcore model ends in."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn

from rlcore.errors import ConfigError
from rlcore.modules.activation import activation_gain, resolve_activation


class MLP(nn.Sequential):
    """``Linear -> act -> ... -> Linear`` with an optionally structured output.

    Args:
        input_dim: input features D.
        output_dim: int ``A`` for an output ``[B, A]``, or a shape such as ``[2, A]`` for an output
            ``[B, 2, A]`` (used by state-dependent-std distributions: mean and std from one head).
        hidden_dims: hidden layer sizes; ``-1`` means "same as the input size".
        activation: activation name (see ``rlcore.modules.activation.ACTIVATIONS``).
        last_activation: optional activation after the output layer.
        init_gains: orthogonal-init gain per Linear layer (len = number of Linear layers), or None for
            the activation's gain on hidden layers and 0.01 on the output layer (small initial outputs:
            initial actions near the default pose, initial values near zero).
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int | Sequence[int],
        hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        last_activation: str | None = None,
        init_gains: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self.input_dim = int(input_dim)
        if isinstance(output_dim, int):
            self.output_shape: tuple[int, ...] = (int(output_dim),)
        else:
            self.output_shape = tuple(int(d) for d in output_dim)
        self.output_dim = math.prod(self.output_shape)
        dims = [self.input_dim] + [self.input_dim if int(h) == -1 else int(h) for h in hidden_dims]
        for i in range(len(dims) - 1):
            self.append(nn.Linear(dims[i], dims[i + 1]))
            self.append(resolve_activation(activation))
        self.append(nn.Linear(dims[-1], self.output_dim))
        if last_activation is not None:
            self.append(resolve_activation(last_activation))
        if len(self.output_shape) > 1:
            self.append(nn.Unflatten(-1, self.output_shape))
        num_linear = len(dims)
        if init_gains is not None and len(init_gains) != num_linear:
            raise ConfigError(f"init_gains has {len(init_gains)} entries but the MLP has {num_linear} Linear layers.")
        self.init_weights(init_gains, activation)

    __jit_unused_properties__ = ("linear_layers",)

    @property
    def linear_layers(self) -> list[nn.Linear]:
        """The Linear layers, input to output."""
        return [m for m in self if isinstance(m, nn.Linear)]

    def init_weights(self, scales: float | Sequence[float] | None = None, activation: str = "elu") -> None:
        """Orthogonal weights, zero biases.

        Args:
            scales: orthogonal-init gain: one number for every Linear layer, one per Linear layer (input to
                output), or None for ``activation``'s gain on the hidden layers and 0.01 on the output layer.
                (rsl_rl's ``MLP.init_weights(scales)`` indexes a sequence by position in the ``nn.Sequential``,
                activations included; rlcore indexes Linear layers only.)
            activation: the hidden activation, for the default gains.
        """
        layers = self.linear_layers
        if scales is None:
            scales = [activation_gain(activation)] * (len(layers) - 1) + [0.01]
        elif isinstance(scales, (int, float)):
            scales = [float(scales)] * len(layers)
        if len(scales) != len(layers):
            raise ConfigError(f"init_weights: scales has {len(scales)} entries but the MLP has {len(layers)} Linear "
                              "layers; give one gain per Linear layer or a single number.")
        for layer, gain in zip(layers, scales):
            nn.init.orthogonal_(layer.weight, gain=float(gain))
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., D] -> [..., *output_shape]``."""
        for module in self:
            x = module(x)
        return x
