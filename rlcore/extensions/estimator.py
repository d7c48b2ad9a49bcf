"""The supervised loss of a model's state estimator, as a PPO extension.

A model built with ``estimator_cfg`` (:class:`~rlcore.models.mlp_model.StateEstimator`) regresses privileged
target groups from what it reads; PPO adds ``loss_coef * MSE(estimate, target)`` to its loss on every
mini-batch, so policy and estimator train concurrently on the same rollout (Ji et al., 2022). PPO attaches
this extension by itself for each of its models that has an estimator: there is nothing to configure here.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from rlcore.errors import ConfigError
from rlcore.extensions.base import Algorithm, Batch, Extension


class EstimatorLoss(Extension):
    """``loss += loss_coef * E[(estimate - target)^2]`` for one model's estimator (``part``: "actor" or "critic").

    Logged as ``estimator`` (the actor's) or ``estimator_<part>``: the mean squared error before the weight.
    """

    name: ClassVar[str] = "estimator"

    def __init__(self, part: str = "actor") -> None:
        self.part = part
        if part != "actor":
            self.name = f"estimator_{part}"  # type: ignore[misc]
        self.loss_names = (self.name,)

    @classmethod
    def check_algorithm(cls, alg: Algorithm) -> None:
        if getattr(alg.actor, "estimator", None) is None and getattr(alg.critic, "estimator", None) is None:
            raise ConfigError("EstimatorLoss: neither the actor nor the critic has an estimator (estimator_cfg).")

    def extra_loss(self, alg: Algorithm, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        model = getattr(alg, self.part)
        # PPO evaluated the models on this mini-batch just before (its first rows: extensions append theirs after
        # them), so the estimate of that forward pass, graph included, is reused rather than computed again.
        cached, masks = model.last_estimate, batch.masks
        if masks is not None:  # trajectories (recurrent PPO): the estimate is [T, N, D], like the actions
            reuse = cached is not None and cached.requires_grad and cached.shape[:-1] == batch.actions.shape[:-1]
            estimate = cached if reuse else None
        else:
            rows = batch.actions.shape[0]
            reuse = cached is not None and cached.requires_grad and cached.dim() == 2 and cached.shape[0] >= rows
            estimate = cached[:rows] if reuse else None
        states = batch.hidden_states[0 if self.part == "actor" else 1] if batch.hidden_states is not None else None
        mse = model.estimator_loss(batch.observations, estimate, masks, states)
        return model.estimator.loss_coef * mse, {self.name: mse}


__all__ = ["EstimatorLoss"]
