"""Convolutional encoder for 2D observation groups (height maps, depth images)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from rlcore.errors import ConfigError
from rlcore.modules.activation import resolve_activation

NORMS = ("none", "batch", "layer")
GLOBAL_POOLS = ("none", "avg", "max")


def _per_layer(value, n: int, name: str) -> list:
    """Broadcast a scalar setting to ``n`` layers, or check a per-layer list has length ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ConfigError(f"CNN '{name}' has {len(value)} entries but there are {n} conv layers.")
        return list(value)
    return [value] * n


class CNN(nn.Sequential):
    """Stack of ``Conv2d -> norm -> activation -> (max pool)`` layers with automatic 'same' padding.

    Args:
        input_dim: input image size ``(H, W)``.
        input_channels: input channels C.
        output_channels: channels of each conv layer (one entry per layer).
        kernel_size, stride, dilation: int (all layers) or one per layer.
        norm: "none", "batch" or "layer" (LayerNorm over ``[C, H, W]``), or one per layer.
        activation: activation name.
        max_pool: bool or one per layer: 2x2 max pooling after the layer.
        global_pool: "none", "avg" (global average pooling) or "max" over the spatial dims at the end.
        flatten: flatten the output to ``[B, output_dim]``.

    Padding is ``dilation * (kernel - 1) // 2`` (odd kernels keep the size at stride 1); the output
    shape is computed layer by layer and exposed as ``output_shape`` / ``output_dim``.
    Weights use Kaiming-normal initialisation, biases zero.
    """

    def __init__(
        self,
        input_dim: Sequence[int],
        input_channels: int,
        output_channels: Sequence[int] = (16, 32),
        kernel_size: int | Sequence[int] = 3,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        norm: str | Sequence[str] = "none",
        activation: str = "elu",
        max_pool: bool | Sequence[bool] = False,
        global_pool: str = "none",
        flatten: bool = True,
    ) -> None:
        super().__init__()
        if len(input_dim) != 2:
            raise ConfigError(f"CNN input_dim must be (H, W), got {tuple(input_dim)}.")
        n = len(output_channels)
        if n == 0:
            raise ConfigError("CNN needs at least one conv layer in output_channels.")
        kernels = _per_layer(kernel_size, n, "kernel_size")
        strides = _per_layer(stride, n, "stride")
        dilations = _per_layer(dilation, n, "dilation")
        norms = [str(x).lower() for x in _per_layer(norm, n, "norm")]
        pools = _per_layer(max_pool, n, "max_pool")
        if global_pool not in GLOBAL_POOLS:
            raise ConfigError(f"Unknown CNN global_pool '{global_pool}'. Valid: {', '.join(GLOBAL_POOLS)}.")
        self.input_shape = (int(input_channels), int(input_dim[0]), int(input_dim[1]))
        c, h, w = self.input_shape
        for out_c, k, s, d, nm, pool in zip(output_channels, kernels, strides, dilations, norms, pools):
            if nm not in NORMS:
                raise ConfigError(f"Unknown CNN norm '{nm}'. Valid: {', '.join(NORMS)}.")
            pad = d * (k - 1) // 2
            self.append(nn.Conv2d(c, out_c, k, stride=s, padding=pad, dilation=d))
            c = int(out_c)
            h = (h + 2 * pad - d * (k - 1) - 1) // s + 1
            w = (w + 2 * pad - d * (k - 1) - 1) // s + 1
            if h < 1 or w < 1:
                raise ConfigError(f"CNN layers shrink the {self.input_shape[1:]} input to nothing; "
                                 "reduce strides/kernels or pooling.")
            if nm == "batch":
                self.append(nn.BatchNorm2d(c))
            elif nm == "layer":
                self.append(nn.LayerNorm([c, h, w]))
            self.append(resolve_activation(activation))
            if pool:
                self.append(nn.MaxPool2d(2, 2))
                h, w = h // 2, w // 2
                if h < 1 or w < 1:
                    raise ConfigError(f"CNN layers shrink the {self.input_shape[1:]} input to nothing; "
                                     "reduce strides/kernels or pooling.")
        if global_pool == "avg":
            self.append(nn.AdaptiveAvgPool2d(1))
            h = w = 1
        elif global_pool == "max":
            self.append(nn.AdaptiveMaxPool2d(1))
            h = w = 1
        self.flatten = flatten
        if flatten:
            self.append(nn.Flatten(start_dim=1))
        self.output_shape: tuple[int, ...] = (c * h * w,) if flatten else (c, h, w)
        self.output_dim: int | tuple[int, ...] = c * h * w if flatten else (c, h, w)
        self.init_weights()

    def init_weights(self) -> None:
        for m in self:
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W] -> [B, output_dim]`` (or ``[B, C', H', W']`` without flatten)."""
        for module in self:
            x = module(x)
        return x
