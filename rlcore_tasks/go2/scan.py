"""The height scan's errors: how a real elevation map differs from the terrain (training only).

A robot's elevation map (from a depth camera or lidar, fused over time) is not the terrain. With
``domain_rand.randomize_height_scan`` and ``obs.add_noise`` on (rough terrain only), the ``height_scan`` group
reads the terrain with three of its errors, on top of the per-cell noise of ``obs.noise_height``:

- a **vertical offset** per episode, ``U(-scan_offset, scan_offset)`` [m] times the randomisation progress (the
  map drifting against the base height estimate);
- a **lag**: the scan grid is placed at the base pose (x, y, yaw) of ``k`` control steps ago, ``k`` drawn per
  episode from ``0..scan_max_lag`` (the map is registered to where the robot was), while the heights are still
  measured from the base's current height;
- **missing cells**: each cell, at each step, is missing with probability ``scan_missing_fraction`` and reads the
  deployment metadata's ``missing_value`` (0: ground at the nominal base height below the base).

Nothing here is applied at deployment: the exported metadata lists these as training-only perturbations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rlcore_tasks.go2.geometry import yaw_of

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env

#: What a missing cell reads in the observation (after offset, clip and scale).
MISSING_VALUE = 0.0


def active(env: Go2Env) -> bool:
    """Whether the scan errors apply: rough terrain, ``randomize_height_scan`` and ``obs.add_noise``."""
    return (not env.terrain.is_flat and env.cfg_task.domain_rand.randomize_height_scan
            and env.cfg_task.obs.add_noise)


def init_state(env: Go2Env) -> None:
    """The per-env error state: ``scan_offset [N]`` [m], ``scan_lag [N]`` (steps) and ``scan_poses [L + 1, N, 3]``
    (x, y, yaw of the last L + 1 steps, newest first)."""
    n, dev = env.num_envs, env.device
    env.scan_offset = torch.zeros(n, device=dev)
    env.scan_lag = torch.zeros(n, dtype=torch.long, device=dev)
    env.scan_poses = torch.zeros(env.cfg_task.domain_rand.scan_max_lag + 1, n, 3, device=dev)


def base_pose(env: Go2Env) -> torch.Tensor:
    """The base's planar pose (x, y, yaw), ``[N, 3]``."""
    return torch.cat([env.base_pos[:, :2], yaw_of(env.base_quat).unsqueeze(-1)], dim=-1)  # [N, 3]


def reset(env: Go2Env, env_ids: torch.Tensor, pose: torch.Tensor, progress: float) -> None:
    """Fill the pose history of ``env_ids`` with their spawn ``pose [k, 3]`` (x, y, yaw) and, when the errors are
    :func:`active`, draw the episode's offset and lag."""
    dr, g, k = env.cfg_task.domain_rand, env.generator, env_ids.numel()
    if k == 0:
        return
    env.scan_poses[:, env_ids] = pose.unsqueeze(0)
    if not active(env):  # no draw: the task's random stream is what it was without the scan's errors
        return
    env.scan_offset[env_ids] = (torch.rand(k, generator=g, device=env.device) * 2 - 1) * dr.scan_offset * progress
    env.scan_lag[env_ids] = torch.randint(0, dr.scan_max_lag + 1, (k,), generator=g, device=env.device)


def push_pose(env: Go2Env) -> None:
    """Record this step's base pose (once per control step, after the physics step)."""
    if env.scan_poses.shape[0] > 1:
        env.scan_poses.copy_(torch.cat([base_pose(env).unsqueeze(0), env.scan_poses[:-1]], dim=0))
    else:
        env.scan_poses[0] = base_pose(env)


def world_points(env: Go2Env, local: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """World xy ``[N, H, W, 2]`` of the scan grid ``local [H, W, 2]`` (base yaw frame) placed at ``pose [N, 3]``."""
    cos, sin = torch.cos(pose[:, 2])[:, None, None], torch.sin(pose[:, 2])[:, None, None]
    lx, ly = local[..., 0], local[..., 1]
    x = pose[:, 0, None, None] + cos * lx - sin * ly
    y = pose[:, 1, None, None] + sin * lx + cos * ly
    return torch.stack([x, y], dim=-1)


def height_above_terrain(env: Go2Env) -> torch.Tensor:
    """The base's height above every scan point, ``[N, H, W]`` [m], with the offset and lag when :func:`active`."""
    if env.terrain.is_flat:  # every scan point lies at height 0: skip the grid (same values, bit for bit)
        terrain = torch.zeros(1, *env._scan_local.shape[:2], device=env.device)  # [1, H, W], broadcast
        return env.base_pos[:, 2, None, None] - terrain
    if not active(env):
        return env.base_pos[:, 2, None, None] - env.sim.heights(env.height_scan_points())
    lagged = env.scan_poses[env.scan_lag, torch.arange(env.num_envs, device=env.device)]  # [N, 3]
    terrain = env.sim.heights(world_points(env, env._scan_local, lagged))
    return env.base_pos[:, 2, None, None] - terrain + env.scan_offset[:, None, None]


def missing(env: Go2Env) -> torch.Tensor:
    """Which cells are missing this step, ``[N, H, W]`` bool (none unless :func:`active`)."""
    shape = (env.num_envs, *env._scan_local.shape[:2])
    if not active(env) or env.cfg_task.domain_rand.scan_missing_fraction <= 0.0:
        return torch.zeros(shape, dtype=torch.bool, device=env.device)
    return torch.rand(shape, generator=env.generator, device=env.device) < env.cfg_task.domain_rand.scan_missing_fraction
