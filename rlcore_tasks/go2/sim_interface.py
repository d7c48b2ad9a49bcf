"""The simulator interface of the Go2 task: what the MDP (:mod:`rlcore_tasks.go2.env`) needs from a physics backend.

:class:`Simulator` is one :class:`typing.Protocol` that a CPU backend (:class:`rlcore_tasks.go2.sim.Go2Sim`, MuJoCo's
threaded ``mujoco.rollout``) and a GPU backend (:class:`rlcore_tasks.go2.sim_warp.WarpSim`, MuJoCo Warp) both satisfy. Everything
the MDP reads or writes crosses it as torch tensors ``[N, ...]`` (N = ``num_envs``), ``float32`` unless stated,
on the task's ``device``; how a backend stores its state (float64 numpy on the CPU, batched GPU arrays) is its
own business. Joint quantities are in :data:`~rlcore_tasks.go2.randomization.JOINT_NAMES` order (FL, FR, RL, RR x hip,
thigh, calf), feet in ``LEGS`` order (FL, FR, RL, RR).

State views (``root_pos`` ... ``base_contact_force``) are current after every mutating call (:meth:`step`,
:meth:`reset`, :meth:`push`, :meth:`load_state_dict`); a backend may rebind them to new tensors at those calls,
so read them again afterwards rather than keeping a reference. The MDP never mutates them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

from rlcore_tasks.go2.randomization import Variant


@runtime_checkable
class Simulator(Protocol):
    """N Go2 robots stepped together, seen through torch tensors.

    Constants:
        num_envs: N.
        device: the torch device of every tensor below.
        decimation: physics steps per control step (:meth:`step`).
        joint_range: ``[12, 2]`` joint position limits (lower, upper) [rad].
        torque_limit: ``[12]`` actuator torque limits [N m] (the PD torque is clipped to +-these).

    State views, refreshed by every mutating call:
        root_pos: ``[N, 3]`` base position, world frame [m].
        root_quat: ``[N, 4]`` base orientation, unit quaternion (w, x, y, z), base to world.
        root_lin_vel: ``[N, 3]`` base linear velocity, *world* frame [m/s].
        root_ang_vel: ``[N, 3]`` base angular velocity, *base* frame [rad/s].
        joint_pos: ``[N, 12]`` joint angles [rad].
        joint_vel: ``[N, 12]`` joint velocities [rad/s].
        joint_torque: ``[N, 12]`` actuator torques applied at the last physics step [N m].
        foot_forces: ``[N, 4]`` foot contact normal forces [N] (touch sensors) at the last physics step.
        collision_forces: ``[N, 8]`` contact forces on thighs then calves (FL, FR, RL, RR each) [N].
        base_contact_force: ``[N]`` contact force on the trunk [N].
        unstable: ``[N]`` bool, envs whose physics failed during the last :meth:`step` (non-finite state,
            exploding speed, solver reset); they keep their pre-step state (or a safe initial state), so every
            view stays finite, and their sensor readings are zero.

    Model variants (domain randomisation):
        physical: the pool of ``K`` :class:`~rlcore_tasks.go2.randomization.Variant` s the envs are assigned to.
        num_variants: ``K``.
        env_variant: ``[N]`` int64, the variant each env simulates (its physics and its actuation latency).
    """

    num_envs: int
    device: torch.device
    decimation: int
    joint_range: torch.Tensor
    torque_limit: torch.Tensor
    root_pos: torch.Tensor
    root_quat: torch.Tensor
    root_lin_vel: torch.Tensor
    root_ang_vel: torch.Tensor
    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    joint_torque: torch.Tensor
    foot_forces: torch.Tensor
    collision_forces: torch.Tensor
    base_contact_force: torch.Tensor
    unstable: torch.Tensor
    physical: list[Variant]
    env_variant: torch.Tensor

    @property
    def num_variants(self) -> int: ...

    def step(self, joint_targets: torch.Tensor) -> None:
        """Advance every env by ``decimation`` physics steps under the PD law towards ``joint_targets [N, 12]``
        [rad]: ``torque = clip(kp (target - q) - kd qdot, -torque_limit, torque_limit)`` at every physics step,
        with each env's variant gains (``kp``, ``kd`` of the config times its kp/kd scales and motor strength) and
        its variant's actuation latency (whole physics steps). Sets ``unstable`` and refreshes the views."""
        ...

    def reset(self, env_ids: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Put envs ``env_ids [k]`` (int64) into the state ``qpos [k, 19]`` (base position 3, quaternion
        w, x, y, z 4, joints 12) and ``qvel [k, 18]`` (base linear velocity, world frame 3, base angular velocity,
        base frame 3, joints 12), with zero sensor readings; other envs are untouched."""
        ...

    def push(self, env_ids: torch.Tensor, lin_vel_xy: torch.Tensor) -> None:
        """Set the world-frame planar base velocity of envs ``env_ids [k]`` to ``lin_vel_xy [k, 2]`` [m/s]."""
        ...

    def set_variants(self, env_ids: torch.Tensor, variants: torch.Tensor) -> None:
        """Envs ``env_ids [k]`` simulate variants ``variants [k]`` (indices into ``physical``) from now on,
        with those variants' latency; their pending (delayed) targets are dropped."""
        ...

    def set_physical_variants(self, physical: list[Variant]) -> None:
        """Replace the variant pool; every env then simulates variant 0."""
        ...

    def variant_features(self) -> torch.Tensor:
        """``[K, 17]`` the raw quantities of :data:`~rlcore_tasks.go2.randomization.PHYSICAL_TERMS` of every variant
        (:func:`~rlcore_tasks.go2.randomization.physical_features`, the backend's nominal robot giving the defaults)."""
        ...

    def heights(self, xy: torch.Tensor) -> torch.Tensor:
        """Ground height [m] under world points ``xy [..., 2]``: a tensor of shape ``[...]``."""
        ...

    def solver_options(self) -> dict:
        """The physics settings a deployment needs, as plain Python values: ``torque_limits`` (list of 12 floats,
        exact), ``solver`` (``integrator``, ``cone`` as MuJoCo enum names, ``iterations``, ``ls_iterations``,
        ``impratio``)."""
        ...

    def render(self, env_id: int, width: int, height: int, fast: bool) -> np.ndarray:
        """An RGB frame ``[height, width, 3]`` uint8 of env ``env_id`` from a camera tracking the robot (``fast``:
        no multisampling, shadows or reflections)."""
        ...

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Everything of the backend that decides its future given the targets (CPU tensors), for an exact resume:
        physics state, sensor readings, ``env_variant``, pending delayed targets."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s entries (other keys of ``state`` are ignored); refreshes the views."""
        ...

    def refresh(self) -> None:
        """Re-read the views from the backend's own storage after it was written outside this interface (tests and
        tools poking :class:`~rlcore_tasks.go2.sim.Go2Sim`'s numpy state); a backend with live views does nothing."""
        ...

    def close(self) -> None:
        """Release threads, contexts and device memory."""
        ...


__all__ = ["Simulator"]
