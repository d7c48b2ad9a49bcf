"""Refuse NaN coming out of an environment, naming where it came from."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase


def check_nan(obs: TensorDictBase, rewards: torch.Tensor, dones: torch.Tensor) -> None:
    """Raise if an observation group, the rewards or the dones of one env step hold NaN.

    This is the per-step check of rsl_rl's runner (one host sync per call); rlcore's runner checks NaN and Inf
    once per rollout instead. Args: ``obs`` TensorDict[N], ``rewards`` [N], ``dones`` [N].

    Raises:
        ValueError: the message names the observation group, or says rewards / dones.
    """
    for key, value in obs.items(include_nested=True, leaves_only=True):
        if torch.isnan(value).any():
            raise ValueError(f"The observation group '{key}' from the environment contains NaN: check the env's "
                             "step() / reset() (e.g. a division by zero or an unstable simulation).")
    if torch.isnan(rewards).any():
        raise ValueError("The rewards from the environment contain NaN: check the env's reward terms.")
    if torch.isnan(dones.float()).any():
        raise ValueError("The dones from the environment contain NaN: check the env's termination terms.")


__all__ = ["check_nan"]
