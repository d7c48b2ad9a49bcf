"""The one interface through which extensions plug into PPO.

PPO keeps a list of extensions and calls each hook at its place in the iteration; every hook defaults to "do
nothing", so an extension overrides only what it needs::

    iteration    ext.set_iteration(alg, it)    before each rollout          (exploration: std ceiling, per-env k)
    collection   a ~ N(mu, (k sigma)^2), k = ext.action_std_scale()         (exploration: per-env std factor)
                 reward += ext.intrinsic_reward(obs)                       (RND's curiosity bonus)
    loss         batch   = ext.augment_mini_batch(batch)                   (symmetry: mirrored copies)
                 loss   += ext.extra_loss(alg, batch)[0]                   (symmetry: mirror loss)
    after step   ext.after_step(batch)                                     (RND: its predictor's own Adam step)
    after update ext.update_normalization(rollout_obs)                     (RND's state normaliser)
    modes        ext.train_mode() / ext.eval_mode()
    checkpoint   ext.save() -> entries of the checkpoint dict; ext.load(checkpoint)
    distributed  ext.broadcast_modules(): what rank 0 copies to every rank at start

Extensions configured by dicts (rsl_rl's ``rnd_cfg``, ``symmetry_cfg``) are built by :meth:`Extension.from_cfg`;
others are handed to PPO as instances (``PPO(..., extensions=[...])``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.storage import RolloutStorage

Batch = RolloutStorage.Batch


class Algorithm(Protocol):
    """What an extension may read of the algorithm it plugs into (PPO)."""

    actor: nn.Module
    critic: nn.Module
    storage: RolloutStorage
    device: str | torch.device
    is_multi_gpu: bool


class Extension:
    """Base class of PPO's extensions: hooks that do nothing until overridden.

    Attributes:
        name: the extension's name: the checkpoint ``load_cfg`` key that selects it and, for the extensions built
            from rsl_rl's config dicts, PPO's attribute that holds it (``alg.rnd``, ``alg.symmetry``).
        loss_names: the keys the extension adds to ``PPO.update()``'s result (means over mini-batches), in order;
            :meth:`extra_loss` and :meth:`after_step` return values under these keys.
    """

    name: ClassVar[str] = "extension"
    loss_names: tuple[str, ...] = ()

    # ------------------------------------------------------------------ construction
    @classmethod
    def check_algorithm(cls, alg: Algorithm) -> None:
        """Raise ``ConfigError`` when the extension cannot work with ``alg`` (its models); called before building."""

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any], alg: Algorithm) -> Extension:
        """Build the extension from its resolved config dict (keyword arguments of the constructor) for ``alg``."""
        cls.check_algorithm(alg)
        return cls(**cfg)

    # ------------------------------------------------------------------ iteration
    def set_iteration(self, alg: Algorithm, iteration: int) -> None:
        """Apply what depends on the learning iteration, before its rollout (PPO's constructor calls it with 0; a
        resumed run continues at its iteration)."""

    # ------------------------------------------------------------------ collection
    def action_std_scale(self) -> torch.Tensor | None:
        """A per-env factor ``k`` ``[N, 1]`` on the actor's std for this rollout's actions (None: the policy's std).

        PPO samples ``a ~ N(mu, (k sigma)^2)``, stores ``k`` and evaluates the ratio's log-probabilities with the same
        ``k sigma`` (Gaussian actors only); factors of several extensions multiply.
        """
        return None

    def intrinsic_reward(self, obs: TensorDict, sync: bool = False) -> torch.Tensor | None:
        """A reward ``[N]`` added to the env's reward of this step (``obs``: the step's new observations), or None.

        ``sync``: distributed run (statistics may pool over ranks).
        """
        return None

    # ------------------------------------------------------------------ the loss
    def augment_mini_batch(self, batch: Batch) -> Batch:
        """The mini-batch PPO's surrogate and value losses are taken on (returns a new one; ``batch`` unchanged).

        Rows added after the original ``B`` enter those two losses; the KL of the adaptive learning rate and the
        entropy bonus stay on the first ``B`` rows.
        """
        return batch

    def extra_loss(self, alg: Algorithm, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """``(term, logged)``: a scalar added to PPO's loss (with the gradient it carries) and values to log under
        :attr:`loss_names`; or None. ``batch`` is the mini-batch as stored (not augmented)."""
        return None

    def after_step(self, batch: Batch, sync: bool = False) -> dict[str, float]:
        """Called after PPO's optimiser step on each mini-batch (``batch`` as stored): train the extension's own
        networks here. Returns values to log under :attr:`loss_names`."""
        return {}

    @torch.no_grad()
    def update_normalization(self, obs: TensorDict, sync: bool = False) -> None:
        """Merge the rollout's observations (``[T, N]``) into the extension's normalisers, once per update."""

    # ------------------------------------------------------------------ modes, persistence, distribution
    def train_mode(self) -> None:
        """Switch to training behaviour (called by ``PPO.train_mode``)."""

    def eval_mode(self) -> None:
        """Switch to evaluation behaviour (called by ``PPO.eval_mode``)."""

    def save(self) -> dict[str, Any]:
        """Entries for the checkpoint dict (their keys are the checkpoint's keys)."""
        return {}

    def load(self, state: Mapping[str, Any]) -> None:
        """Restore from a checkpoint dict (the one :meth:`save` contributed to; absent keys are skipped)."""

    def rank_state_dict(self) -> dict[str, Any]:
        """This rank's own per-env state for a checkpoint (:mod:`rlcore.runners.run_state`), e.g. running values kept
        for each env of this rank; restored only together with the env's state. Empty: none."""
        return {}

    def load_rank_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`rank_state_dict`'s output."""

    def broadcast_modules(self) -> list[nn.Module]:
        """Modules whose parameters and buffers rank 0 copies to every rank at start: the extension itself when
        it is an ``nn.Module``."""
        return [self] if isinstance(self, nn.Module) else []


__all__ = ["Algorithm", "Extension"]
