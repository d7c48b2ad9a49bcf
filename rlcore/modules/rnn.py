"""Recurrent encoder (GRU or LSTM) that remembers one hidden state per environment."""

from __future__ import annotations

from typing import Union

import torch
import torch.nn as nn

from rlcore.errors import ConfigError
from rlcore.utils.trajectories import unpad_trajectories

HiddenState = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor], None]
"""GRU: ``[L, N, H]``; LSTM: ``(h [L, N, H], c [L, N, H])``; ``None`` before the first step (zeros)."""

RNN_TYPES = ("gru", "lstm")


class RNN(nn.Module):
    """GRU/LSTM with two modes.

    - Inference (rollout) mode, ``masks is None``: input ``[N, D]`` is one step of N environments; the
      module carries its own hidden state from call to call and returns ``[N, H]``.
    - Batch (update) mode, ``masks`` given: input ``[T, K, D]`` holds K padded trajectories, run from
      ``hidden_state`` (their saved initial states); output is unpadded back to ``[T, N, H]``.
    """

    def __init__(self, input_size: int, hidden_dim: int = 256, num_layers: int = 1, type: str = "lstm") -> None:
        super().__init__()
        rnn_type = str(type).lower()
        if rnn_type not in RNN_TYPES:
            raise ConfigError(f"Unknown rnn_type '{type}'. Valid types: {', '.join(RNN_TYPES)}.")
        self.rnn_type = rnn_type
        self.rnn = (nn.GRU if rnn_type == "gru" else nn.LSTM)(input_size, hidden_dim, num_layers)
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.hidden_state: HiddenState = None

    @property
    def is_lstm(self) -> bool:
        return self.rnn_type == "lstm"

    def forward(self, input: torch.Tensor, masks: torch.Tensor | None = None,  # rsl_rl's parameter name
                hidden_state: HiddenState = None) -> torch.Tensor:
        """One step ``[N, D] -> [N, H]`` (no ``masks``), or padded trajectories ``[T, K, D]`` -> ``[T, N, H]``."""
        if masks is not None:
            if hidden_state is None:
                raise ValueError("RNN batch mode (masks given) needs the hidden states saved at trajectory starts.")
            out, _ = self.rnn(input, hidden_state)
            return unpad_trajectories(out, masks)
        if self.hidden_state is None:
            self.hidden_state = self.zero_state(input.shape[0], input)
        out, self.hidden_state = self.rnn(input.unsqueeze(0), self.hidden_state)
        return out.squeeze(0)

    def zero_state(self, batch_size: int, like: torch.Tensor) -> HiddenState:
        """Zero hidden state for ``batch_size`` environments, on ``like``'s device and dtype."""
        h = like.new_zeros(self.num_layers, batch_size, self.hidden_dim)
        return (h, h.clone()) if self.is_lstm else h

    def reset(self, dones: torch.Tensor | None = None, hidden_state: HiddenState = None) -> None:
        """Reset the carried state.

        ``dones=None``: set it to ``hidden_state`` (None means zeros on the next step). ``dones [N]``:
        zero the rows of the finished environments only (out of place, so a graph through the others survives).
        """
        if dones is None:
            self.hidden_state = hidden_state
            return
        if hidden_state is not None:
            raise ValueError("reset(dones, hidden_state): give either dones or a new hidden state, not both.")
        if self.hidden_state is None:
            return
        keep = (~dones.bool()).view(1, -1, 1)
        self.hidden_state = _map_state(self.hidden_state, lambda h: h * keep.to(h.dtype))

    def detach_hidden_state(self, dones: torch.Tensor | None = None) -> None:
        """Cut the autograd graph of the carried state (all envs, or only the finished ones)."""
        if self.hidden_state is None:
            return
        if dones is None:
            self.hidden_state = _map_state(self.hidden_state, torch.Tensor.detach)
        else:
            done = dones.bool().view(1, -1, 1)
            self.hidden_state = _map_state(self.hidden_state, lambda h: torch.where(done, h.detach(), h))


def _map_state(state: HiddenState, fn) -> HiddenState:
    if isinstance(state, tuple):
        return tuple(fn(s) for s in state)  # type: ignore[return-value]
    return fn(state)
