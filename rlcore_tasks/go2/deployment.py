"""What a deployment program needs to run a Go2 policy: the task's actuation, timing, commands and observation
layout as plain JSON-able data. ONNX export writes every entry into the model's ``metadata_props``
(:mod:`rlcore.deployment`), so a deployment program, and ``rlcore.robustness``, need only the ``.onnx`` file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlcore_tasks.go2 import observations
from rlcore_tasks.go2.sim import JOINT_NAMES

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env


def deployment_interface(env: Go2Env) -> dict:
    """How to run a policy of ``env``'s task on a Go2.

    Joint quantities are in ``joint_names`` order (FL, FR, RL, RR x hip, thigh, calf: the order of qpos, qvel and
    actions). ``observation_groups`` (:func:`rlcore_tasks.go2.observations.interface`, generated from the same
    declaration as the env's observations) lists what each group's vector is made of, in order: term ``name``,
    its ``start:stop`` within the group, and ``value = (quantity - offset) * scale`` (``offset`` where a term has
    one), then the whole group clipped to ``+-clip``; ``noise`` is the uniform noise amplitude added at every step
    during training and ``bias`` (policy terms) the amplitude of a uniform offset drawn per episode (both in
    observation units).
    """
    c, physics = env.cfg_task, env.sim.solver_options()
    return {
        "robot": "unitree_go2",
        "joint_names": list(JOINT_NAMES),
        "default_joint_pos": list(c.control.default_joint_pos),
        "kp": [float(c.control.kp)] * 12,
        "kd": [float(c.control.kd)] * 12,
        "torque_limits": physics["torque_limits"],
        "action_scale": float(c.control.action_scale),
        "action_clip": float(c.control.clip_actions),
        "action_law": ("target = default_joint_pos + action_scale * clip(action, -action_clip, action_clip); "
                       "torque = clip(kp * (target - q) - kd * qdot, -torque_limits, torque_limits) at every "
                       "physics step"),
        "physics_dt": float(c.sim.dt),
        "decimation": int(c.sim.decimation),
        "solver": physics["solver"],
        "command_ranges": {"lin_vel_x": list(c.commands.lin_vel_x), "lin_vel_y": list(c.commands.lin_vel_y),
                           "ang_vel_yaw": list(c.commands.ang_vel_yaw), "heading": list(c.commands.heading),
                           "heading_command": bool(c.commands.heading_command),
                           "heading_fraction": float(c.commands.heading_fraction),
                           "zero_below": float(c.commands.zero_below)},
        "observation_groups": observations.interface(env.observation_groups(), c),
    }


__all__ = ["deployment_interface"]
