"""Optional PPO extensions configured by dicts: RND curiosity (``rnd_cfg``) and symmetry (``symmetry_cfg``)."""

from rlcore.extensions.rnd import WEIGHT_SCHEDULE_MODES, RandomNetworkDistillation, resolve_rnd_config
from rlcore.extensions.symmetry import Symmetry, resolve_function, resolve_symmetry_config

__all__ = ["WEIGHT_SCHEDULE_MODES", "RandomNetworkDistillation", "Symmetry", "resolve_function",
           "resolve_rnd_config", "resolve_symmetry_config"]
