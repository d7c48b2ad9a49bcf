"""Optional PPO extensions configured by dicts: RND curiosity (``rnd_cfg``) and symmetry (``symmetry_cfg``)."""

from rlcore.extensions.rnd import WEIGHT_SCHEDULE_MODES, RandomNetworkDistillation
from rlcore.extensions.symmetry import Symmetry, resolve_function, resolve_symmetry_config

__all__ = ["RandomNetworkDistillation", "Symmetry", "WEIGHT_SCHEDULE_MODES", "resolve_function",
           "resolve_symmetry_config"]
