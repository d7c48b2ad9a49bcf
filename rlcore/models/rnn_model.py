"""RNNModel: normalised 1D groups through a GRU/LSTM, then the MLP head; one hidden state per env."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.models.mlp_model import ExportedPolicy, MLPModel
from rlcore.modules import RNN, HiddenState


class RNNModel(MLPModel):
    """Recurrent model: ``latent = RNN(normalize(concat(1D groups)))``.

    In rollouts (no masks) the model keeps the hidden state of every environment itself; call
    ``reset(dones)`` after each env step. In updates it takes padded trajectories ``[T, K, ...]``,
    their masks and the hidden states saved at trajectory starts, and returns ``[T, N, ...]``.

    Args (besides MLPModel's):
        rnn_type: "gru" or "lstm".
        rnn_hidden_dim: hidden size H.
        rnn_num_layers: stacked layers L.
    """

    is_recurrent = True

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
        rnn_type: str = "lstm",
        rnn_hidden_dim: int = 256,
        rnn_num_layers: int = 1,
        init_gains: Sequence[float] | None = None,
        estimator_cfg: Mapping[str, Any] | None = None,
    ) -> None:
        self._rnn_hidden_dim = int(rnn_hidden_dim)
        super().__init__(obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization,
                         distribution_cfg, init_gains, estimator_cfg)
        self.rnn = RNN(self.obs_dim, self._rnn_hidden_dim, rnn_num_layers, rnn_type)

    def get_latent(
        self, obs: TensorDict, masks: torch.Tensor | None = None, hidden_state: HiddenState = None
    ) -> torch.Tensor:
        return self.rnn(super().get_latent(obs), masks, hidden_state)

    def _latent_dim(self) -> int:
        return self._rnn_hidden_dim

    def reset(self, dones: torch.Tensor | None = None, hidden_state: HiddenState = None) -> None:
        """Zero the hidden state of finished envs (``dones [N]``), or set/clear it for all (``dones=None``)."""
        self.rnn.reset(dones, hidden_state)

    def get_hidden_state(self) -> HiddenState:
        """The carried hidden state (``None`` before the first step)."""
        return self.rnn.hidden_state

    def detach_hidden_state(self, dones: torch.Tensor | None = None) -> None:
        self.rnn.detach_hidden_state(dones)

    # ------------------------------------------------------------------ export
    def _export_module(self, stateful: bool) -> nn.Module:
        norm, mlp, det = self._export_parts()
        rnn = copy.deepcopy(self.rnn.rnn).cpu()
        if self.rnn.is_lstm:
            core = _ExportLSTM(norm, rnn, mlp, det)
            return (_StatefulLSTM(core) if stateful else core).eval()
        core = _ExportGRU(norm, rnn, mlp, det)
        return (_StatefulGRU(core) if stateful else core).eval()

    def as_jit(self) -> torch.jit.ScriptModule:
        """Stateful TorchScript policy: ``actions = f(obs [B, D])`` keeps its hidden state; ``reset()`` zeroes it."""
        return torch.jit.script(self._export_module(stateful=True))

    def as_onnx(self, verbose: bool = False) -> nn.Module:
        """ONNX wrapper with explicit state: ``(obs, h_in[, c_in]) -> (actions, h_out[, c_out])``, state ``[L, B, H]``."""
        module = self._export_module(stateful=False)
        h = torch.zeros(self.rnn.num_layers, 1, self.rnn.hidden_dim)
        lstm = self.rnn.is_lstm
        inputs = ["obs", "h_in"] + (["c_in"] if lstm else [])
        outputs = ["actions", "h_out"] + (["c_out"] if lstm else [])
        axes = {name: {1: "batch"} for name in inputs[1:] + outputs[1:]}
        module.set_onnx_interface(inputs, outputs, (torch.zeros(1, self.obs_dim), h) + ((h.clone(),) if lstm else ()),
                                  {"obs": {0: "batch"}, "actions": {0: "batch"}, **axes}, is_recurrent=True,
                                  verbose=verbose)
        module.state_shape = (self.rnn.num_layers, self.rnn.hidden_dim)
        module.rnn_type = "lstm" if lstm else "gru"
        module.input_size, module.hidden_size, module.num_layers = self.obs_dim, self.rnn.hidden_dim, self.rnn.num_layers
        return module


class _ExportGRU(ExportedPolicy):
    def __init__(self, normalizer: nn.Module, rnn: nn.GRU, mlp: nn.Module, det: nn.Module) -> None:
        super().__init__()
        self.obs_normalizer, self.rnn, self.mlp, self.deterministic_output = normalizer, rnn, mlp, det

    def forward(self, obs: torch.Tensor, h_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, h_out = self.rnn(self.obs_normalizer(obs).unsqueeze(0), h_in)
        return self.deterministic_output(self.mlp(out.squeeze(0))), h_out


class _ExportLSTM(ExportedPolicy):
    def __init__(self, normalizer: nn.Module, rnn: nn.LSTM, mlp: nn.Module, det: nn.Module) -> None:
        super().__init__()
        self.obs_normalizer, self.rnn, self.mlp, self.deterministic_output = normalizer, rnn, mlp, det

    def forward(
        self, obs: torch.Tensor, h_in: torch.Tensor, c_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h_out, c_out) = self.rnn(self.obs_normalizer(obs).unsqueeze(0), (h_in, c_in))
        return self.deterministic_output(self.mlp(out.squeeze(0))), h_out, c_out


class _StatefulGRU(nn.Module):
    """TorchScript deployment wrapper that carries the GRU state between calls (any batch size)."""

    def __init__(self, core: _ExportGRU) -> None:
        super().__init__()
        self.core = core
        self.register_buffer("hidden_state", torch.zeros(core.rnn.num_layers, 1, core.rnn.hidden_size))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.hidden_state.shape[1] != obs.shape[0]:
            self.hidden_state = torch.zeros(self.hidden_state.shape[0], obs.shape[0], self.hidden_state.shape[2])
        actions, h = self.core(obs, self.hidden_state)
        self.hidden_state = h
        return actions

    @torch.jit.export
    def reset(self) -> None:
        self.hidden_state = torch.zeros_like(self.hidden_state)


class _StatefulLSTM(nn.Module):
    """TorchScript deployment wrapper that carries the LSTM state between calls (any batch size)."""

    def __init__(self, core: _ExportLSTM) -> None:
        super().__init__()
        self.core = core
        self.register_buffer("hidden_state", torch.zeros(core.rnn.num_layers, 1, core.rnn.hidden_size))
        self.register_buffer("cell_state", torch.zeros(core.rnn.num_layers, 1, core.rnn.hidden_size))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.hidden_state.shape[1] != obs.shape[0]:
            self.hidden_state = torch.zeros(self.hidden_state.shape[0], obs.shape[0], self.hidden_state.shape[2])
            self.cell_state = torch.zeros_like(self.hidden_state)
        actions, h, c = self.core(obs, self.hidden_state, self.cell_state)
        self.hidden_state = h
        self.cell_state = c
        return actions

    @torch.jit.export
    def reset(self) -> None:
        self.hidden_state = torch.zeros_like(self.hidden_state)
        self.cell_state = torch.zeros_like(self.cell_state)
