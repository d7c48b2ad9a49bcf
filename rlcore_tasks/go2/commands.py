"""Velocity commands of the Go2 task: ``env.commands [N, 3]`` (vx, vy in the base frame, yaw rate).

Commands are drawn uniformly from ``commands.lin_vel_x`` / ``lin_vel_y`` / ``ang_vel_yaw`` at every reset and
every ``commands.resampling_time`` seconds of an episode; planar commands under ``zero_below`` are zeroed. With
``heading_command`` a fraction ``heading_fraction`` of the envs follow a sampled heading instead: their yaw-rate
command is ``heading_stiffness`` times the heading error, clipped to ``ang_vel_yaw``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rlcore_tasks.go2.geometry import wrap_to_pi, yaw_of

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env


def resample(env: Go2Env, env_ids: torch.Tensor) -> None:
    """Draw new commands (and heading targets) for ``env_ids`` from the env's generator."""
    c, g, dev, k = env.cfg_task.commands, env.generator, env.device, env_ids.numel()
    if k == 0:
        return

    def uniform(r: list[float]) -> torch.Tensor:
        return r[0] + (r[1] - r[0]) * torch.rand(k, generator=g, device=dev)

    cmd = torch.stack([uniform(c.lin_vel_x), uniform(c.lin_vel_y), uniform(c.ang_vel_yaw)], dim=1)
    cmd[:, :2] *= (torch.norm(cmd[:, :2], dim=1, keepdim=True) > c.zero_below)
    env.commands[env_ids] = cmd
    env.heading_target[env_ids] = uniform(c.heading)
    if c.heading_fraction < 1.0:  # no draw otherwise: the default keeps its random stream
        env.heading_envs[env_ids] = torch.rand(k, generator=g, device=dev) < c.heading_fraction


def due_on_timer(env: Go2Env) -> torch.Tensor:
    """The envs whose episode clock has reached a multiple of ``commands.resampling_time`` (ids ``[n]``)."""
    period = max(1, int(round(env.cfg_task.commands.resampling_time / env.dt)))
    due = ((env.episode_length_buf % period) == 0) & (env.episode_length_buf > 0)
    return due.nonzero(as_tuple=False).squeeze(-1)


def update_heading(env: Go2Env) -> None:
    """Heading envs: the yaw-rate command that turns the base towards its heading target."""
    c = env.cfg_task.commands
    if c.heading_command:
        error = wrap_to_pi(env.heading_target - yaw_of(env.base_quat))
        yaw_rate = (c.heading_stiffness * error).clamp(c.ang_vel_yaw[0], c.ang_vel_yaw[1])
        env.commands[:, 2] = torch.where(env.heading_envs, yaw_rate, env.commands[:, 2])


def integral_loop(cfg) -> dict:
    """The exported policy's default integral loop on the command (``rlcore_tasks.go2.command_integral``):
    ``{"gain": [1/s], "limit": [m/s], "band": [m/s], "yaw_gain": [1/s], "yaw_limit": [rad/s], "yaw_band": [rad/s]}``
    from ``commands.integral_gain`` / ``integral_limit`` / ``integral_band`` and their ``integral_yaw_*`` twins
    (gain 0: none)."""
    c = cfg.commands
    return {"gain": float(c.integral_gain), "limit": float(c.integral_limit), "band": float(c.integral_band),
            "yaw_gain": float(c.integral_yaw_gain), "yaw_limit": float(c.integral_yaw_limit),
            "yaw_band": float(c.integral_yaw_band)}


__all__ = ["due_on_timer", "integral_loop", "resample", "update_heading"]
