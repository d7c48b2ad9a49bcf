"""rsl_rl's ``resolve_nn_activation``: an activation module by name (rlcore's table is rlcore.modules.activation)."""

from __future__ import annotations

import torch.nn as nn


def resolve_nn_activation(act_name: str) -> nn.Module:
    """A new activation module for ``act_name`` (case-insensitive), e.g. ``"elu"``.

    Raises:
        ValueError: the name is unknown; the message lists the valid names.
    """
    from rlcore.modules.activation import resolve_activation  # utils sits below modules: import on use

    return resolve_activation(act_name)


__all__ = ["resolve_nn_activation"]
