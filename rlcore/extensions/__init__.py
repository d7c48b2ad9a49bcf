"""Optional PPO extensions: RND curiosity (``rnd_cfg``) and symmetry (``symmetry_cfg``), both :class:`Extension`s,
the exploration schedule (:class:`ExplorationSchedule`, ``exploration_cfg``, built by the factory) and the supervised
loss of a model's state estimator (:class:`EstimatorLoss`, attached by PPO itself)."""

from rlcore.extensions.base import Extension
from rlcore.extensions.estimator import EstimatorLoss
from rlcore.extensions.exploration import ExplorationSchedule
from rlcore.extensions.rnd import WEIGHT_SCHEDULE_MODES, RandomNetworkDistillation, resolve_rnd_config
from rlcore.extensions.symmetry import Symmetry, resolve_function, resolve_symmetry_config

PPO_EXTENSIONS: dict[str, type[Extension]] = {
    "rnd_cfg": RandomNetworkDistillation,
    "symmetry_cfg": Symmetry,
}
"""PPO's config arguments (rsl_rl's names) and the extension each builds, in the order PPO runs them."""

__all__ = ["PPO_EXTENSIONS", "WEIGHT_SCHEDULE_MODES", "EstimatorLoss", "ExplorationSchedule", "Extension",
           "RandomNetworkDistillation", "Symmetry", "resolve_function", "resolve_rnd_config", "resolve_symmetry_config"]
