"""Splitting rollouts into episodes (trajectories) and back, for recurrent models.

A rollout is stored time-major as ``[T, N, ...]`` (``T`` steps of ``N`` environments). Recurrent models are trained on
*trajectories*: each environment's sequence is cut after every ``done``, and every piece is zero-padded to length
``T``. Trajectories are ordered env-major: all trajectories of env 0 in time order, then those of env 1, and so on.

Example (``T = 6``, ``N = 2``, time runs left to right, ``|`` marks a cut after a done)::

    env 0: a1 a2 a3 a4 | a5 a6           padded (transposed):  a1 a2 a3 a4 0  0    masks:  1 1 1 1 0 0
    env 1: b1 b2 | b3 b4 b5 | b6                               a5 a6 0  0  0  0            1 1 0 0 0 0
                                                               b1 b2 0  0  0  0            1 1 0 0 0 0
                                                               b3 b4 b5 0  0  0            1 1 1 0 0 0
                                                               b6 0  0  0  0  0            1 0 0 0 0 0

Both functions are vectorised (no Python loop over environments or steps) and differentiable with respect to the
data, so they can be used inside the forward pass of a model during updates.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

__all__ = ["split_and_pad_trajectories", "trajectory_starts", "unpad_trajectories"]


def trajectory_starts(dones: torch.Tensor) -> torch.Tensor:
    """Mark the steps at which a trajectory starts.

    A done at step ``t`` means the episode ended *after* step ``t``, so a new trajectory starts at ``t + 1``. The first
    step of the rollout always starts a trajectory.

    Args:
        dones: Done flags ``[T, N]`` or ``[T, N, 1]`` (bool, or 0/1 of any numeric dtype).

    Returns:
        Bool tensor ``[T, N]``, True where a trajectory starts.
    """
    dones = dones.reshape(dones.shape[0], dones.shape[1]).bool()
    starts = torch.empty_like(dones)
    starts[0] = True
    starts[1:] = dones[:-1]
    return starts


def _padding_index(dones: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Compute where each step goes in the padded layout.

    Args:
        dones: Done flags ``[T, N]`` or ``[T, N, 1]``.

    Returns:
        ``flat_index [N * T]``: for every step in env-major order (env 0 steps 0..T-1, env 1 ...), its position in the
        padded tensor flattened to ``[T * num_traj]``; and ``num_traj``.
    """
    starts = trajectory_starts(dones).t().reshape(-1)  # [N * T], env-major
    traj_id = torch.cumsum(starts, dim=0) - 1  # [N * T], trajectory of every step
    start_pos = starts.nonzero().squeeze(-1)  # [num_traj], env-major position of every trajectory start
    num_traj = start_pos.numel()
    time_in_traj = torch.arange(starts.numel(), device=starts.device) - start_pos[traj_id]  # [N * T]
    return time_in_traj * num_traj + traj_id, num_traj


def split_and_pad_trajectories(
    tensor: torch.Tensor | TensorDictBase, dones: torch.Tensor
) -> tuple[torch.Tensor | TensorDictBase, torch.Tensor]:
    """Split every environment's sequence at its dones and zero-pad the pieces to length ``T``.

    Args:
        tensor: Data ``[T, N, ...]``, a tensor or a TensorDict with batch size ``[T, N]``.
        dones: Done flags ``[T, N]`` or ``[T, N, 1]`` (bool or 0/1). A done at step ``t`` ends the trajectory after
            step ``t``; the flags of the last step are irrelevant.

    Returns:
        ``padded [T, num_traj, ...]`` (same type as ``tensor``, trajectories in env-major order, zeros after each
        trajectory's end) and ``masks [T, num_traj]`` (bool, True on valid steps).
    """
    num_steps, num_envs = tensor.shape[0], tensor.shape[1]
    flat_index, num_traj = _padding_index(dones)

    def pad(value: torch.Tensor) -> torch.Tensor:
        feature_shape = value.shape[2:]
        env_major = value.transpose(0, 1).reshape(num_envs * num_steps, *feature_shape)
        padded = value.new_zeros(num_steps * num_traj, *feature_shape).index_copy(0, flat_index, env_major)
        return padded.view(num_steps, num_traj, *feature_shape)

    if isinstance(tensor, TensorDictBase):
        padded = tensor.apply(pad, batch_size=[num_steps, num_traj])
    else:
        padded = pad(tensor)
    masks = torch.zeros(num_steps * num_traj, dtype=torch.bool, device=flat_index.device)
    masks.index_fill_(0, flat_index, True)
    return padded, masks.view(num_steps, num_traj)


def unpad_trajectories(
    trajectories: torch.Tensor | TensorDictBase, masks: torch.Tensor
) -> torch.Tensor | TensorDictBase:
    """Inverse of :func:`split_and_pad_trajectories`: put the valid steps back in the ``[T, N]`` layout.

    Args:
        trajectories: Padded data ``[T, num_traj, ...]`` (tensor or TensorDict with batch size ``[T, num_traj]``), e.g. the
            output ``[T, num_traj, H]`` of a recurrent network run on padded trajectories.
        masks: Valid-step masks ``[T, num_traj]`` as returned by :func:`split_and_pad_trajectories`.

    Returns:
        Data ``[T, N, ...]`` (contiguous), of the same type as ``trajectories``.
    """
    num_steps, num_traj = masks.shape
    # (trajectory, time) of every valid step in env-major order; since the trajectories of an env are contiguous and
    # each covers consecutive steps, row n * T + t belongs to env n at time t.
    traj, time = masks.t().nonzero().unbind(-1)
    num_envs = traj.numel() // num_steps
    # Reorder to time-major so that a single gather yields a contiguous [T, N] result.
    flat_index = (time * num_traj + traj).view(num_envs, num_steps).t().reshape(-1)

    def unpad(value: torch.Tensor) -> torch.Tensor:
        feature_shape = value.shape[2:]
        flat = value.reshape(num_steps * num_traj, *feature_shape)
        return flat.index_select(0, flat_index).view(num_steps, num_envs, *feature_shape)

    if isinstance(trajectories, TensorDictBase):
        return trajectories.apply(unpad, batch_size=[num_steps, num_envs])
    return unpad(trajectories)
