"""An exploration schedule for PPO: a ceiling on the actor's std and a per-env std factor, over learning iterations.

Configured by the algorithm's ``exploration_cfg`` (:class:`~rlcore.config.schema.ExplorationCfg`; task=go2
sets it in ``conf/task/go2.yaml``); the factory builds the schedule and hands it to PPO as an extension. Both parts
are functions of the learning iteration alone, so a resumed run continues them exactly.

- **Std ceiling** (``std_max_schedule``, ``[[iteration, std_max], ...]``, piecewise linear): before each rollout
  the actor's Gaussian std is clamped to at most ``std_max(iteration)`` (none before the first point).
- **Per-env std factor** (``low_noise_fraction``, ``low_noise_std_scale``, ``low_noise_start``): from iteration
  ``low_noise_start`` on, env ``i`` acts with ``pi_i(a|s) = N(mu(s), (k_i sigma)^2)``, ``k_i = low_noise_std_scale``
  in the last ``round(low_noise_fraction * N)`` envs and 1 elsewhere.

Why the factor: a policy trained only under its exploration noise is deployed without it, and the two behave
differently (on Go2 the noise damps the gait, so the deterministic mean action overshoots its velocity command).
Envs that act with a smaller std put deployment-like states (smooth action history, the mean action's own gait) into
every rollout, and their rewards grade the near-deterministic policy.

What PPO does with ``k`` (:meth:`Extension.action_std_scale`): it samples with ``k sigma``, stores ``k`` with the
transition, and takes the log-probabilities of the ratio ``pi_k(a|s) / pi_k,old(a|s)`` with it, so the clipped
objective is PPO's for each env's own behaviour policy. The KL of the adaptive learning rate and the entropy bonus
are the policy's own (``k = 1``): the learning-rate schedule does not change with the setting, and the entropy's
gradient is the same for any ``k``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from rlcore.errors import ConfigError
from rlcore.extensions.base import Algorithm, Extension
from rlcore.modules import GaussianDistribution
from rlcore.utils.schedule import check_schedule, piecewise_linear

LEGACY_KEYS = ("low_noise_fraction", "low_noise_std_scale", "low_noise_start", "std_max_schedule")
"""The schedule's settings, which older rlcore configs (and the train_cfg of their checkpoints) held directly in the
algorithm's section; :func:`pop_exploration_cfg` moves them into ``exploration_cfg``."""


class ExplorationSchedule(Extension):
    """The std ceiling and the per-env std factor of the module docstring, set by :meth:`set_iteration`.

    Args:
        std_max_schedule: ``[[iteration, std_max], ...]`` (iterations increasing), piecewise linear between the
            points: no ceiling before the first, the last value after the last (``[[300, 0.15]]``: from iteration
            300 the std is at most 0.15). None or empty: no ceiling.
        low_noise_fraction: fraction of the envs (the last ones) that act with the std times
            ``low_noise_std_scale``; 0: every env explores with the policy's std.
        low_noise_std_scale: the factor on the std in those envs, in (0, 1].
        low_noise_start: the first learning iteration at which ``low_noise_fraction`` applies.
    """

    name: ClassVar[str] = "exploration"

    def __init__(
        self,
        std_max_schedule: Sequence[Sequence[float]] | None = None,
        low_noise_fraction: float = 0.0,
        low_noise_std_scale: float = 0.25,
        low_noise_start: int = 0,
    ) -> None:
        self.low_noise_fraction, self.low_noise_std_scale = float(low_noise_fraction), float(low_noise_std_scale)
        if not 0.0 <= self.low_noise_fraction <= 1.0:
            raise ConfigError(f"low_noise_fraction must be in [0, 1], got {self.low_noise_fraction}.")
        if not 0.0 < self.low_noise_std_scale <= 1.0:
            raise ConfigError(f"low_noise_std_scale must be in (0, 1], got {self.low_noise_std_scale}.")
        self.low_noise_start = int(low_noise_start)
        self.std_max_schedule = check_schedule(std_max_schedule, "std_max_schedule")
        self.noise_scale: torch.Tensor | None = None
        """The per-env std factor ``k`` ``[N, 1]`` of the current rollout (None: the policy's std everywhere)."""

    def set_iteration(self, alg: Algorithm, iteration: int) -> None:
        """Before the rollout of learning iteration ``iteration``: cap the actor's std at ``std_max(iteration)`` and
        choose the per-env factor (PPO's constructor calls this at iteration 0, so a setting the actor cannot take
        fails there)."""
        per_env = self._per_env_scale(alg)
        if self.std_max_schedule:
            _require_gaussian(alg.actor, "std_max_schedule")
            alg.actor.distribution.set_std_max(piecewise_linear(self.std_max_schedule, iteration))
        self.noise_scale = per_env if iteration >= self.low_noise_start else None

    def action_std_scale(self) -> torch.Tensor | None:
        return self.noise_scale

    def _per_env_scale(self, alg: Algorithm) -> torch.Tensor | None:
        """``k`` ``[N, 1]``: ``low_noise_std_scale`` in the last ``round(fraction * N)`` envs, else 1; None when no
        env is scaled."""
        num_envs = alg.storage.num_envs
        count = round(self.low_noise_fraction * num_envs)
        if count == 0 or self.low_noise_std_scale == 1.0:
            return None
        _require_gaussian(alg.actor, "low_noise_fraction")
        scale = torch.ones(num_envs, 1, device=alg.device)
        scale[num_envs - count:] = self.low_noise_std_scale
        return scale


def pop_exploration_cfg(alg_cfg: dict) -> dict | None:
    """Remove the exploration schedule's settings from an algorithm config (``alg_cfg``, changed in place) and return
    them: ``exploration_cfg`` merged with the older flat keys (:data:`LEGACY_KEYS`, e.g. a checkpoint's train_cfg
    from before the schedule had a section of its own). None when neither is given."""
    cfg = alg_cfg.pop("exploration_cfg", None)
    legacy = {key: alg_cfg.pop(key) for key in LEGACY_KEYS if key in alg_cfg}
    if cfg is None and not legacy:
        return None
    cfg = dict(cfg or {})
    both = sorted(set(cfg) & set(legacy))
    if both:
        raise ConfigError(f"algorithm: {', '.join(both)} given both in exploration_cfg and directly; keep "
                          f"exploration_cfg.{both[0]} only.")
    return {**legacy, **cfg}


def build_exploration_schedule(cfg: Mapping[str, Any] | None) -> list[ExplorationSchedule]:
    """The schedule of ``cfg`` (``exploration_cfg``) as a list of extensions for ``PPO(extensions=...)``."""
    return [] if cfg is None else [ExplorationSchedule(**cfg)]


def _require_gaussian(actor: Any, setting: str) -> None:
    """Refuse ``setting`` (which scales or caps the std) for an actor whose distribution is not Gaussian."""
    if not isinstance(actor.distribution, GaussianDistribution):
        raise ConfigError(f"{setting} needs a Gaussian action distribution; the actor's is "
                          f"{type(actor.distribution).__name__}. Leave {setting} at its default or use a Gaussian.")


__all__ = ["LEGACY_KEYS", "ExplorationSchedule", "build_exploration_schedule", "pop_exploration_cfg"]
