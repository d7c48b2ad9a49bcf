"""Resets and events of the Go2 task: what happens to an env at the end of its episode, and pushes.

A reset of ``env_ids`` (only those) records their episode statistics, moves their terrain level
(:mod:`rlcore_tasks.go2.curriculum`), assigns each a physical variant and fresh sensor biases, places the robot at its
terrain origin (random yaw, joints scaled around the default pose, small base velocities), draws new commands and
clears the per-episode buffers. Every random draw comes from the env's generator, in a fixed order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from rlcore_tasks.go2 import curriculum, scan

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env


def record_episodes(env: Go2Env, env_ids: torch.Tensor) -> None:
    """Move the episode sums of ``env_ids`` into the last-episode statistics (per second for rewards, per step for
    errors, as is for the commanded distance) and clear them; envs without a step in this episode keep theirs."""
    steps = env.episode_steps[env_ids]
    ran = steps > 0  # envs reset before their first step (construction, reset()) have no episode to report
    steps = steps.clamp(min=1).float()
    for key, total in env.episode_sums.items():
        per = steps if key.endswith("_error") else steps * env.dt if key != "commanded_distance" else None
        value = total[env_ids] / per if per is not None else total[env_ids]
        last = env._last_episode[key]
        last[env_ids] = torch.where(ran, value, last[env_ids])
        total[env_ids] = 0.0


def reset_envs(env: Go2Env, env_ids: torch.Tensor) -> None:
    """Reset only ``env_ids``: statistics, curriculum, physical variant, joint and base state, sensor biases,
    commands (through ``env._resample_commands``), buffers."""
    c, g, dev, k = env.cfg_task, env.generator, env.device, env_ids.numel()
    record_episodes(env, env_ids)
    curriculum.update_terrain_levels(env, env_ids)

    def uniform(lo: float, hi: float, *shape: int) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(k, *shape, generator=g, device=dev)

    progress = env.randomization_progress()
    variants = torch.randint(0, curriculum.allowed_variants(env, progress), (k,), generator=g, device=dev)
    env.sim.set_variants(env_ids, variants)

    origin = env.terrain.origins(env_ids)
    yaw = uniform(-math.pi, math.pi) if c.init.random_yaw else torch.zeros(k, device=dev)
    quat = torch.stack([torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], dim=1)
    pos = origin + torch.tensor([0.0, 0.0, c.init.base_height], device=dev)
    joints = env.default_dof_pos * uniform(*c.init.joint_pos_scale, 12)
    joints = torch.minimum(torch.maximum(joints, env.soft_dof_limits[:, 0]), env.soft_dof_limits[:, 1])
    lin = torch.cat([uniform(-c.init.base_lin_vel, c.init.base_lin_vel, 2), torch.zeros(k, 1, device=dev)], dim=1)
    ang = uniform(-c.init.base_ang_vel, c.init.base_ang_vel, 3)
    qpos = torch.cat([pos, quat, joints], dim=1)
    qvel = torch.cat([lin, ang, torch.zeros(k, 12, device=dev)], dim=1)
    dr = c.domain_rand
    env.imu_bias[env_ids] = 0.0
    env.joint_pos_bias[env_ids] = 0.0
    if dr.randomize_imu_bias:
        amp = torch.tensor([dr.imu_bias_ang_vel] * 3 + [dr.imu_bias_gravity] * 3, device=dev) * progress
        env.imu_bias[env_ids] = uniform(-1.0, 1.0, 6) * amp
    if dr.randomize_encoder_bias:
        env.joint_pos_bias[env_ids] = uniform(-1.0, 1.0, 12) * dr.encoder_bias * progress
    env.sim.reset(env_ids, qpos, qvel)
    env.spawn_xy[env_ids] = pos[:, :2]
    scan.reset(env, env_ids, torch.cat([pos[:, :2], yaw.unsqueeze(-1)], dim=-1), progress)

    env._resample_commands(env_ids)
    for buf in (env.actions, env.last_actions, env.last_dof_vel, env.feet_air_time, env.push_vel,
                env.base_lin_vel_mean):
        buf[env_ids] = 0.0
    env.last_contacts[env_ids] = False
    env.first_contact[env_ids] = False
    env.history_fresh[env_ids] = True
    env.episode_length_buf[env_ids] = 0
    env.episode_steps[env_ids] = 0


def push_robots(env: Go2Env) -> None:
    """Every ``push_interval_s`` of its episode an env's base gets a random planar velocity.

    Pushes follow each env's own episode clock, so (with random initial episode lengths) they are spread
    over time instead of hitting every robot on the same step.
    """
    dr = env.cfg_task.domain_rand
    env.push_vel *= 0.95  # the privileged record of a push fades over about a second
    if not dr.push_robots:
        return
    interval = max(1, int(round(dr.push_interval_s / env.dt)))
    due = ((env.episode_length_buf % interval) == 0) & (env.episode_length_buf > 0)
    env_ids = due.nonzero(as_tuple=False).squeeze(-1)
    if env_ids.numel() == 0:
        return
    v = (torch.rand(env_ids.numel(), 2, generator=env.generator, device=env.device) * 2 - 1) * dr.max_push_vel_xy
    env.sim.push(env_ids, v)
    env.push_vel[env_ids] = v
    env._refresh_state()


__all__ = ["push_robots", "record_episodes", "reset_envs"]
