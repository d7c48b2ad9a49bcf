"""CNNModel: 1D groups normalised, each 2D group through its own CNN encoder, concatenated."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.errors import ConfigError
from rlcore.models.mlp_model import ExportedPolicy, MLPModel, select_obs_groups
from rlcore.modules import CNN, HiddenState


class CNNModel(MLPModel):
    """Model over 1D and 2D observation groups.

    ``latent = concat(normalize(concat(1D groups)), cnn_g(obs[g]) for each 2D group g)``.

    Args (besides MLPModel's):
        cnn_cfg: CNN keyword arguments (see ``rlcore.modules.CNN``) used for every 2D group, or a dict
            ``{group: kwargs}`` with one entry per 2D group. ``flatten`` is forced on.
        cnns: already built encoders ``{group: CNN}`` to share with another model (e.g. the critic
            reusing the actor's height-scan encoder); their input shape must match the group's.
    """

    accepts_2d = True

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        obs_normalization: bool = False,
        distribution_cfg: dict | None = None,
        cnn_cfg: Mapping | None = None,
        cnns: Mapping[str, CNN] | None = None,
        init_gains: Sequence[float] | None = None,
        estimator_cfg: Mapping[str, Any] | None = None,
    ) -> None:
        _, groups_2d = select_obs_groups(obs, obs_groups, obs_set)
        if not groups_2d:
            raise ConfigError(
                f"CNNModel needs at least one 2D observation group [C, H, W] in '{obs_set}', got only 1D groups "
                f"{list(obs_groups[obs_set])}; use MLPModel (model=mlp) instead."
            )
        encoders = {g: _make_encoder(g, tuple(obs[g].shape[1:]), cnn_cfg, cnns) for g in groups_2d}
        self._cnn_out = sum(int(enc.output_dim) for enc in encoders.values())
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization,
                         distribution_cfg, init_gains, estimator_cfg)
        self.cnns = nn.ModuleDict(encoders)

    def get_latent(
        self, obs: TensorDict, masks: torch.Tensor | None = None, hidden_state: HiddenState = None
    ) -> torch.Tensor:
        parts = [super().get_latent(obs)] if self.obs_groups_1d else []
        for group, cnn in self.cnns.items():
            img = obs[group]
            lead = img.shape[:-3]
            parts.append(cnn(img.reshape(-1, *img.shape[-3:])).reshape(*lead, -1))
        return torch.cat(parts, dim=-1)

    def _latent_dim(self) -> int:
        return self.obs_dim + self._cnn_out

    # ------------------------------------------------------------------ export
    def export_inputs(self) -> list[tuple[str, tuple[int, ...]]]:
        names = [("obs", (self.obs_dim,))] if self.obs_groups_1d else []
        return names + [(g, tuple(self.cnns[g].input_shape)) for g in self.obs_groups_2d]

    def _export_module(self) -> nn.Module:
        norm, mlp, det = self._export_parts()
        encoders = [copy.deepcopy(self.cnns[g]).cpu() for g in self.obs_groups_2d]
        return _ExportCNN(norm, encoders, mlp, det, has_1d=bool(self.obs_groups_1d)).eval()

    def _example_inputs(self) -> tuple[torch.Tensor, ...]:
        return tuple(torch.zeros(1, *shape) for _, shape in self.export_inputs())

    def as_jit(self) -> torch.jit.ScriptModule:
        """TorchScript policy called as ``f(obs, group_1, group_2, ...)`` (inputs as in ``export_inputs()``)."""
        return torch.jit.trace(self._export_module(), self._example_inputs(), check_trace=False)

    def as_onnx(self, verbose: bool = False) -> nn.Module:
        """ONNX wrapper: inputs ``obs`` (if any 1D group) and one per 2D group named after it; output ``actions``."""
        module = self._export_module()
        names = [name for name, _ in self.export_inputs()]
        module.set_onnx_interface(names, ["actions"], self._example_inputs(),
                                  {name: {0: "batch"} for name in names + ["actions"]}, is_recurrent=False,
                                  verbose=verbose)
        module.obs_groups_2d = list(self.obs_groups_2d)
        module.obs_dim_1d = self.obs_dim
        module.obs_channels_2d = [int(self.cnns[g].input_shape[0]) for g in self.obs_groups_2d]
        module.obs_dims_2d = [tuple(int(d) for d in self.cnns[g].input_shape[1:]) for g in self.obs_groups_2d]
        return module


def _make_encoder(group: str, shape: tuple[int, ...], cnn_cfg: Mapping | None, cnns: Mapping[str, CNN] | None) -> CNN:
    """The encoder of one 2D group: a shared one (shape-checked) or a new CNN from the config."""
    if cnns is not None and group in cnns:
        enc = cnns[group]
        if tuple(enc.input_shape) != tuple(shape):
            raise ConfigError(
                f"Shared CNN encoder for group '{group}' expects input [C, H, W] = {list(enc.input_shape)}, "
                f"but the group has shape {list(shape)}."
            )
        if not enc.flatten:
            raise ConfigError(f"Shared CNN encoder for group '{group}' must flatten its output (flatten=True).")
        return enc
    cfg = dict(cnn_cfg or {})
    if cfg and all(isinstance(v, Mapping) for v in cfg.values()):  # per-group configs
        if group not in cfg:
            raise ConfigError(f"cnn_cfg has per-group entries {sorted(cfg)} but none for 2D group '{group}'.")
        cfg = dict(cfg[group])
    cfg["flatten"] = True
    return CNN(input_dim=shape[1:], input_channels=shape[0], **cfg)


class _ExportCNN(ExportedPolicy):
    """Deployable CNN policy: positional inputs ``(obs?, image_1, ..., image_k)``."""

    def __init__(self, normalizer: nn.Module, encoders: list[nn.Module], mlp: nn.Module, det: nn.Module,
                 has_1d: bool) -> None:
        super().__init__()
        self.obs_normalizer = normalizer
        self.cnns = nn.ModuleList(encoders)
        self.mlp = mlp
        self.deterministic_output = det
        self.has_1d = has_1d

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        parts = []
        images = inputs
        if self.has_1d:
            parts.append(self.obs_normalizer(inputs[0]))
            images = inputs[1:]
        for enc, img in zip(self.cnns, images):
            parts.append(enc(img))
        return self.deterministic_output(self.mlp(torch.cat(parts, dim=-1)))
