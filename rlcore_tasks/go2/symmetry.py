"""Left/right mirror of the Go2 task (reflection y -> -y) for PPO's symmetry extension.

Under the reflection a left leg becomes a right leg (FL <-> FR, RL <-> RR); hip (abduction) angles change
sign, thigh and calf angles do not. Vectors lose their y component's sign (linear velocity, gravity,
pushes, the base's CoM offset and the gravity bias), axial vectors keep only their y component's sign (angular
velocity and the gyro bias: wx -> -wx, wz -> -wz); per-leg quantities (foot forces, leg masses, encoder biases)
swap legs; robot-wide parameters (gains, joint damping, latency, contacts) stay.
``go2_mirror`` has the rsl_rl signature ``(env=None, obs=None, actions=None) -> (obs_aug, actions_aug)``
with ``[original, mirrored]`` stacked along the batch (``2B`` rows).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore.env import ConfigError

# Joint order FL, FR, RL, RR x (hip, thigh, calf): the mirror swaps FL/FR and RL/RR and negates hips.
JOINT_PERM = [3, 4, 5, 0, 1, 2, 9, 10, 11, 6, 7, 8]
JOINT_SIGN = [-1.0, 1.0, 1.0] * 4

# policy [45]: ang_vel(3) gravity(3) command(3) dof_pos(12) dof_vel(12) last_action(12)
_POLICY_PERM = [0, 1, 2, 3, 4, 5, 6, 7, 8] + [9 + i for i in JOINT_PERM] + [21 + i for i in JOINT_PERM] + [
    33 + i for i in JOINT_PERM]
_POLICY_SIGN = [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, -1.0] + JOINT_SIGN * 3
# privileged [47]: lin_vel(3) friction added_mass motor_strength foot_forces(4: FL FR RL RR) push_vel(2)
#   kp kd damping frictionloss armature latency solref dmin width condim6 (10 robot-wide scalars)
#   leg_mass_scale(4: FL FR RL RR) base_com_offset(3) ang_vel_bias(3) gravity_bias(3) joint_pos_bias(12)
_PRIV_PERM = ([0, 1, 2, 3, 4, 5, 7, 6, 9, 8, 10, 11] + list(range(12, 22)) + [23, 22, 25, 24] + [26, 27, 28]
              + [29, 30, 31] + [32, 33, 34] + [35 + i for i in JOINT_PERM])
_PRIV_SIGN = ([1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0] + [1.0] * 10 + [1.0] * 4
              + [1.0, -1.0, 1.0] + [-1.0, 1.0, -1.0] + [1.0, -1.0, 1.0] + JOINT_SIGN)


def _permute(x: torch.Tensor, perm: list[int], sign: list[float]) -> torch.Tensor:
    return x[..., perm] * torch.tensor(sign, dtype=x.dtype, device=x.device)


def mirror_actions(actions: torch.Tensor) -> torch.Tensor:
    """Mirror joint-target actions ``[B, 12]``."""
    return _permute(actions, JOINT_PERM, JOINT_SIGN)


def mirror_observations(obs: TensorDictBase) -> TensorDictBase:
    """Mirror every Go2 observation group of ``obs`` (``policy``, ``policy_history``, ``privileged``, ``base_lin_vel``,
    ``height_scan``)."""
    out = {}
    for key in obs.keys():
        value = obs[key]
        if key == "policy":
            out[key] = _permute(value, _POLICY_PERM, _POLICY_SIGN)
        elif key == "policy_history":  # frames of the policy group, each mirrored as one
            frames = value.unflatten(-1, (-1, len(_POLICY_PERM)))
            out[key] = _permute(frames, _POLICY_PERM, _POLICY_SIGN).flatten(-2)
        elif key == "privileged":
            out[key] = _permute(value, _PRIV_PERM, _PRIV_SIGN)
        elif key == "base_lin_vel":  # a vector: vy changes sign
            out[key] = _permute(value, [0, 1, 2], [1.0, -1.0, 1.0])
        elif key == "height_scan":
            out[key] = torch.flip(value, dims=[-2])  # rows run along y, symmetric about the base
        else:
            raise ConfigError(f"go2_mirror: no mirror for observation group '{key}'; "
                             "known groups: policy, policy_history, privileged, base_lin_vel, height_scan")
    return TensorDict(out, batch_size=obs.batch_size, device=obs.device)


def go2_mirror(env=None, obs: TensorDictBase | None = None, actions: torch.Tensor | None = None):
    """``(obs_aug TensorDict[2B], actions_aug [2B, 12])``, originals first; ``env`` is unused."""
    obs_aug = None if obs is None else torch.cat([obs, mirror_observations(obs)], dim=0)
    actions_aug = None if actions is None else torch.cat([actions, mirror_actions(actions)], dim=0)
    return obs_aug, actions_aug


__all__ = ["JOINT_PERM", "JOINT_SIGN", "go2_mirror", "mirror_actions", "mirror_observations"]
