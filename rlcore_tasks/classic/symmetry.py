"""Mirror (left/right reflection) functions of the classic tasks, for PPO's symmetry extension.

They follow the rsl_rl signature ``func(env=None, obs=None, actions=None) -> (obs_aug, actions_aug)``: each output
holds ``[original, mirrored]`` stacked along the batch dimension (``2 * B`` rows), or is None when the matching
input is None. Use one in a train config as::

    "symmetry_cfg": {"use_data_augmentation": True, "use_mirror_loss": True, "mirror_loss_coeff": 1.0,
                     "data_augmentation_func": "rlcore_tasks.classic.symmetry:cartpole_mirror"}
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore.env import ConfigError

#: Per-env widths of the cart-pole observation groups: the full state (x, x_dot, theta, theta_dot), or the
#: positions (x, theta) of a ``hide_velocity`` policy group.
_CARTPOLE_WIDTHS = (4, 2)


def _mirror_cartpole_obs(obs: TensorDictBase) -> TensorDictBase:
    """Reflect every cart-pole observation group: ``x -> -x``, ``theta -> -theta`` and so their rates.

    Every quantity of both layouts (``[x, x_dot, theta, theta_dot]`` and ``[x, theta]``) is odd under the
    reflection, so the whole group flips sign.
    """
    mirrored = {}
    for key in obs.keys():
        value = obs[key]
        if isinstance(value, TensorDictBase) or value.shape[-1] not in _CARTPOLE_WIDTHS:
            shape = tuple(value.shape[obs.batch_dims:]) if not isinstance(value, TensorDictBase) else "nested"
            raise ConfigError(f"cartpole_mirror: observation group '{key}' has per-env shape {shape}; expected a "
                             f"cart-pole state group of width 4 (x, x_dot, theta, theta_dot) or 2 (x, theta).")
        mirrored[key] = -value
    return TensorDict(mirrored, batch_size=obs.batch_size, device=obs.device)


def cartpole_mirror(
    env=None, obs: TensorDictBase | None = None, actions: torch.Tensor | None = None
) -> tuple[TensorDictBase | None, torch.Tensor | None]:
    """Cart-pole left/right mirror: ``(obs_aug TensorDict[2B], actions_aug [2B, 1])``, originals first.

    The reflection negates the cart position, the pole angle and their velocities (in the ``policy`` and
    ``critic`` groups, with or without hidden velocities) and the force (action). ``env`` is unused.
    """
    obs_aug = None
    if obs is not None:
        obs_aug = torch.cat([obs, _mirror_cartpole_obs(obs)], dim=0)
    actions_aug = None if actions is None else torch.cat([actions, -actions], dim=0)
    return obs_aug, actions_aug


__all__ = ["cartpole_mirror"]
