"""Reward terms of the Go2 task: one function per term, each ``term(env) -> [N]`` float32.

A term reads the task's state tensors (``env.base_lin_vel`` etc., listed in ``Go2Env``) and returns an
unweighted value; the config names each term with a weight (per second, multiplied by the control
period ``dt``), so adding a term is a function here and a line in the config. Penalties are written as
positive quantities and take negative weights.
"""

from __future__ import annotations

from typing import Callable

import torch


def _planar_velocity_error_sq(env) -> torch.Tensor:
    """|v_xy_cmd - v_xy|^2 ``[N]``: base-frame planar velocity against the command."""
    return torch.sum(torch.square(env.commands[:, :2] - env.base_lin_vel[:, :2]), dim=1)


def tracking_lin_vel(env) -> torch.Tensor:
    """exp(-|v_xy_cmd - v_xy|^2 / sigma): base-frame planar velocity against the command."""
    return torch.exp(-_planar_velocity_error_sq(env) / env.cfg_task.rewards.tracking_sigma)


def tracking_lin_vel_fine(env) -> torch.Tensor:
    """exp(-|v_xy_cmd - v_xy|^2 / sigma_fine): the planar tracking term again with a narrow kernel. Near zero while
    the robot is far off (early training is driven by the wide term alone); once it walks, it keeps paying for the
    last few cm/s that the wide kernel hardly distinguishes (exp(-0.06^2 / 0.25) = 0.986)."""
    return torch.exp(-_planar_velocity_error_sq(env) / env.cfg_task.rewards.tracking_sigma_fine)


def tracking_lin_vel_mean(env) -> torch.Tensor:
    """exp(-|v_xy_cmd - mean(v_xy)|^2 / sigma_mean): the command against ``env.base_lin_vel_mean`` ``[N, 2]``, the
    base-frame planar velocity averaged over the last ~``rewards.mean_vel_tau`` seconds. The per-step terms pay
    little for a steady bias of a few cm/s under the gait's own sway (exp(-0.04^2 / 0.25) = 0.994); averaged, the
    sway is gone and a narrow kernel grades the velocity the robot actually holds."""
    err = torch.sum(torch.square(env.commands[:, :2] - env.base_lin_vel_mean), dim=1)
    return torch.exp(-err / env.cfg_task.rewards.tracking_sigma_mean)


def tracking_lin_vel_abs(env) -> torch.Tensor:
    """|v_xy_cmd - v_xy| [m/s] (a penalty: negative weight): the planar error itself, the quantity that
    ``rlcore.robustness`` averages. Its slope does not vanish near zero, unlike the Gaussian kernels', so it keeps
    pulling on the last few cm/s of bias and sway once the robot walks, while the wide kernel drives learning early."""
    return torch.sqrt(_planar_velocity_error_sq(env) + 1e-8)  # a 1e-4 m/s floor under the root


def lin_vel_sway(env) -> torch.Tensor:
    """|v_xy - mean(v_xy)|^2 (a penalty): the planar velocity's swing about ``env.base_lin_vel_mean``, its average
    over the last ~``rewards.mean_vel_tau`` seconds: the gait's sway at the step frequency, which the per-step
    tracking error counts on top of any bias."""
    return torch.sum(torch.square(env.base_lin_vel[:, :2] - env.base_lin_vel_mean), dim=1)


def tracking_ang_vel(env) -> torch.Tensor:
    """exp(-(w_z_cmd - w_z)^2 / sigma): yaw rate against the command."""
    err = torch.square(env.commands[:, 2] - env.base_ang_vel[:, 2])
    return torch.exp(-err / env.cfg_task.rewards.tracking_sigma)


def lin_vel_z(env) -> torch.Tensor:
    """v_z^2: vertical bouncing of the base."""
    return torch.square(env.base_lin_vel[:, 2])


def ang_vel_xy(env) -> torch.Tensor:
    """w_x^2 + w_y^2: roll and pitch rates."""
    return torch.sum(torch.square(env.base_ang_vel[:, :2]), dim=1)


def orientation(env) -> torch.Tensor:
    """g_x^2 + g_y^2 of the gravity direction in the base frame: 0 when the base is level."""
    return torch.sum(torch.square(env.projected_gravity[:, :2]), dim=1)


def base_height(env) -> torch.Tensor:
    """(h - h_target)^2 with h the base height above the terrain under it."""
    return torch.square(env.base_height - env.cfg_task.rewards.base_height_target)


def torques(env) -> torch.Tensor:
    """sum tau^2 of the applied joint torques."""
    return torch.sum(torch.square(env.torques), dim=1)


def dof_vel(env) -> torch.Tensor:
    """sum qdot^2."""
    return torch.sum(torch.square(env.dof_vel), dim=1)


def dof_acc(env) -> torch.Tensor:
    """sum ((qdot - qdot_prev) / dt)^2: joint accelerations over one control period."""
    return torch.sum(torch.square((env.last_dof_vel - env.dof_vel) / env.dt), dim=1)


def action_rate(env) -> torch.Tensor:
    """sum (a - a_prev)^2: action smoothness."""
    return torch.sum(torch.square(env.last_actions - env.actions), dim=1)


def feet_air_time(env) -> torch.Tensor:
    """sum over feet touching down now of (air time - target): rewards steps longer than the target.

    Zero when the command asks for no motion (planar command under 0.1 m/s and, with
    ``rewards.feet_air_time_on_turns``, a yaw rate under 0.1 rad/s), so standing still is not punished.
    ``env.first_contact`` and ``env.feet_air_time`` (air time accumulated up to this touch-down) are kept by the task.
    """
    rewards = env.cfg_task.rewards
    reward = torch.sum((env.feet_air_time - rewards.feet_air_time_target) * env.first_contact, dim=1)
    moving = torch.norm(env.commands[:, :2], dim=1) > 0.1
    if rewards.feet_air_time_on_turns:
        moving |= env.commands[:, 2].abs() > 0.1
    return reward * moving


def collision(env) -> torch.Tensor:
    """Number of thigh and calf zones touching the terrain."""
    return torch.sum((env.collision_forces > 0.1).float(), dim=1)


def dof_pos_limits(env) -> torch.Tensor:
    """How far the joints are past the soft limits (a fraction of the range around its middle) [rad]."""
    below = (env.soft_dof_limits[:, 0] - env.dof_pos).clamp(min=0.0)
    above = (env.dof_pos - env.soft_dof_limits[:, 1]).clamp(min=0.0)
    return torch.sum(below + above, dim=1)


def termination(env) -> torch.Tensor:
    """1 on a terminal state (not a time-out)."""
    return env.terminated.float()


REWARD_TERMS: dict[str, Callable] = {
    f.__name__: f
    for f in (tracking_lin_vel, tracking_lin_vel_fine, tracking_lin_vel_mean, tracking_lin_vel_abs,
              lin_vel_sway, tracking_ang_vel, lin_vel_z, ang_vel_xy, orientation, base_height, torques, dof_vel,
              dof_acc, action_rate, feet_air_time, collision, dof_pos_limits, termination)
}
