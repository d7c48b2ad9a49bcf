"""Convolutional encoder for 2D observation groups (height maps, depth images)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn

from rlcore.errors import ConfigError
from rlcore.modules.activation import resolve_activation

NORMS = ("none", "batch", "layer")
GLOBAL_POOLS = ("none", "avg", "max")
PADDINGS = ("same", "none", "zeros", "reflect", "replicate", "circular")
"""``padding`` values: rlcore's "same" (the default) and rsl_rl's five."""


def _conv_padding(padding: str, size: int, k: int, s: int, d: int) -> int:
    """Padding on each side of one spatial axis of ``size`` for a conv with kernel k, stride s, dilation d.

    - "same": ``d * (k - 1) // 2``, independent of the size (odd kernels: output ``ceil(size / s)``).
    - "none": 0.
    - rsl_rl's modes ("zeros", "reflect", "replicate", "circular"): the padding rsl_rl 5.5.1 computes from the
      size, ``ceil((d * (k - 1) + 1 - s - size % s) / 2)``, so its configs give the same shapes (and checkpoints
      load); never negative (rsl_rl itself fails where the formula goes below 0).
    """
    if padding == "same":
        return d * (k - 1) // 2
    if padding == "none":
        return 0
    return max(0, math.ceil((d * (k - 1) + 1 - s - size % s) / 2))


def _per_layer(value, n: int, name: str) -> list:
    """Broadcast a scalar setting to ``n`` layers, or check a per-layer list has length ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ConfigError(f"CNN '{name}' has {len(value)} entries but there are {n} conv layers.")
        return list(value)
    return [value] * n


def _layer_settings(input_dim: Sequence[int], output_channels: Sequence[int], kernel_size, stride, dilation, norm,
                    max_pool) -> list[tuple]:
    """``(channels, kernel, stride, dilation, norm, max_pool)`` per conv layer, scalar settings broadcast to every
    layer (none for no layer); a ConfigError for a malformed ``input_dim`` or a per-layer list of the wrong length."""
    if len(input_dim) != 2:
        raise ConfigError(f"CNN input_dim must be (H, W), got {tuple(input_dim)}.")
    n = len(output_channels)
    if n == 0:  # no conv layer: the per-layer settings have nothing to apply to
        return []
    kernels = _per_layer(kernel_size, n, "kernel_size")
    strides = _per_layer(stride, n, "stride")
    dilations = _per_layer(dilation, n, "dilation")
    norms = [str(x).lower() for x in _per_layer(norm, n, "norm")]
    pools = _per_layer(max_pool, n, "max_pool")
    return list(zip(output_channels, kernels, strides, dilations, norms, pools))


class CNN(nn.Sequential):
    """Stack of ``Conv2d -> norm -> activation -> (max pool)`` layers.

    Args (rsl_rl 5.5.1's, in its order):
        input_dim: input image size ``(H, W)``.
        input_channels: input channels C.
        output_channels: channels of each conv layer (one entry per layer). Empty: no conv layer, the encoder
            only flattens the image (an MLP head then reads it cell by cell, as legged_gym's critic reads its
            height scan; the cheap choice for a model that is never deployed); needs ``flatten`` and no global pool.
        kernel_size, stride, dilation: int (all layers) or one per layer.
        padding: "same" (default): ``dilation * (kernel - 1) // 2`` zeros on each side, so odd kernels keep
            H and W at stride 1; "none": no padding; "zeros", "reflect", "replicate", "circular": rsl_rl's
            size-dependent padding with that ``padding_mode`` (see :func:`_conv_padding`). rsl_rl's default is
            "none"; rlcore keeps "same" so existing configs and checkpoints keep their shapes.
        norm: "none", "batch" or "layer" (LayerNorm over ``[C, H, W]``), or one per layer.
        activation: activation name.
        max_pool: bool or one per layer: 2x2 max pooling after the layer.
        global_pool: "none", "avg" (global average pooling) or "max" over the spatial dims at the end.
        flatten: flatten the output to ``[B, output_dim]``.

    The output shape is computed layer by layer and exposed as ``output_shape`` / ``output_dim``;
    ``output_channels`` is the last layer's channel count when the output is not flattened (None otherwise,
    as in rsl_rl). Weights use Kaiming-normal initialisation, biases zero.
    """

    def __init__(
        self,
        input_dim: Sequence[int],
        input_channels: int,
        output_channels: Sequence[int] = (16, 32),
        kernel_size: int | Sequence[int] = 3,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        padding: str = "same",
        norm: str | Sequence[str] = "none",
        activation: str = "elu",
        max_pool: bool | Sequence[bool] = False,
        global_pool: str = "none",
        flatten: bool = True,
    ) -> None:
        super().__init__()
        layers = _layer_settings(input_dim, output_channels, kernel_size, stride, dilation, norm, max_pool)
        if global_pool not in GLOBAL_POOLS:
            raise ConfigError(f"Unknown CNN global_pool '{global_pool}'. Valid: {', '.join(GLOBAL_POOLS)}.")
        padding = str(padding).lower()
        if padding not in PADDINGS:
            raise ConfigError(f"Unknown CNN padding '{padding}'. Valid: {', '.join(PADDINGS)}.")
        self.input_shape = (int(input_channels), int(input_dim[0]), int(input_dim[1]))
        if not layers and (not flatten or global_pool != "none"):
            raise ConfigError("A CNN without conv layers (output_channels: []) only flattens its input: it needs "
                              "flatten=True and global_pool='none'.")
        shape = self.input_shape
        for out_c, k, s, d, nm, pool in layers:
            shape = self._append_layer(shape, out_c, k, s, d, nm, pool, padding, activation)
        c, h, w = shape
        if global_pool == "avg":
            self.append(nn.AdaptiveAvgPool2d(1))
            h = w = 1
        elif global_pool == "max":
            self.append(nn.AdaptiveMaxPool2d(1))
            h = w = 1
        self.flatten = flatten
        self.output_channels: int | None = None if flatten else c
        if flatten:
            self.append(nn.Flatten(start_dim=1))
        self.output_shape: tuple[int, ...] = (c * h * w,) if flatten else (c, h, w)
        self.output_dim: int | tuple[int, ...] = c * h * w if flatten else (c, h, w)
        self.init_weights()

    def _append_layer(self, shape: tuple[int, int, int], out_c, k: int, s: int, d: int, norm: str, pool: bool,
                      padding: str, activation: str) -> tuple[int, int, int]:
        """Append one ``Conv2d -> norm -> activation -> (max pool)`` layer to an input of ``shape`` (C, H, W) and
        return its output shape; a ConfigError when the norm is unknown or the layer leaves no pixel."""
        if norm not in NORMS:
            raise ConfigError(f"Unknown CNN norm '{norm}'. Valid: {', '.join(NORMS)}.")
        c, h, w = shape
        mode = padding if padding in ("reflect", "replicate", "circular") else "zeros"
        pad = (_conv_padding(padding, h, k, s, d), _conv_padding(padding, w, k, s, d))
        self.append(nn.Conv2d(c, out_c, k, stride=s, padding=pad, dilation=d, padding_mode=mode))
        c = int(out_c)
        h = (h + 2 * pad[0] - d * (k - 1) - 1) // s + 1
        w = (w + 2 * pad[1] - d * (k - 1) - 1) // s + 1
        self._check_not_empty(h, w)
        if norm == "batch":
            self.append(nn.BatchNorm2d(c))
        elif norm == "layer":
            self.append(nn.LayerNorm([c, h, w]))
        self.append(resolve_activation(activation))
        if pool:
            self.append(nn.MaxPool2d(2, 2))
            h, w = h // 2, w // 2
            self._check_not_empty(h, w)
        return c, h, w

    def _check_not_empty(self, h: int, w: int) -> None:
        """A ConfigError when a layer leaves an ``h x w`` map with no pixel (the settings cannot fit the input)."""
        if h < 1 or w < 1:
            raise ConfigError(f"CNN layers shrink the {self.input_shape[1:]} input to nothing; "
                              "reduce strides/kernels or pooling.")

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
