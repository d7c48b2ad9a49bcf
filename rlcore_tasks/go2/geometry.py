"""Quaternion and angle helpers of the Go2 task (quaternions are (w, x, y, z), batched ``[N, 4]``)."""

from __future__ import annotations

import math

import torch


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate world vectors ``v [N, 3]`` into the frame of unit quaternions ``q [N, 4]`` (w, x, y, z)."""
    w, xyz = q[:, :1], q[:, 1:]
    t = 2.0 * torch.cross(xyz, v, dim=1)
    return v - w * t + torch.cross(xyz, t, dim=1)


def yaw_of(q: torch.Tensor) -> torch.Tensor:
    """Heading angle of quaternions ``[N, 4]`` (w, x, y, z)."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def wrap_to_pi(a: torch.Tensor) -> torch.Tensor:
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


__all__ = ["quat_rotate_inverse", "wrap_to_pi", "yaw_of"]
