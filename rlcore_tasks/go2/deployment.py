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
    """How to run a policy of ``env``'s task on a Go2 (interface version 2; every field is described in
    docs/deployment.md and checked by rlcore's JSON Schema).

    Joint quantities are in ``joint_names`` order (FL, FR, RL, RR x hip, thigh, calf: the order of qpos, qvel and
    actions). ``observation_groups`` (:func:`rlcore_tasks.go2.observations.interface`, generated from the same
    declaration as the env's observations) lists what each group's vector is made of. ``action_law``, ``spawn``
    and ``commands`` state as data what the deployer does with the actions, how an episode starts and what the
    command columns mean; each ``summary`` is for people, programs read the fields beside it.
    """
    c, physics = env.cfg_task, env.sim.solver_options()
    cmd, init = c.commands, c.init
    return {
        "robot": "unitree_go2",
        "joint_names": list(JOINT_NAMES),
        "default_joint_pos": list(c.control.default_joint_pos),
        "kp": [float(c.control.kp)] * 12,
        "kd": [float(c.control.kd)] * 12,
        "torque_limits": physics["torque_limits"],
        "action_scale": float(c.control.action_scale),
        "action_clip": float(c.control.clip_actions),
        "action_law": {"type": "joint_position_pd", "applied_every": "physics_step",
                       "summary": "target = default_joint_pos + action_scale * clip(action, -action_clip, "
                                  "action_clip), held for decimation physics steps; torque = clip(kp * (target - q) "
                                  "- kd * qdot, -torque_limits, torque_limits) at every physics step"},
        "physics_dt": float(c.sim.dt),
        "decimation": int(c.sim.decimation),
        "solver": physics["solver"],
        "spawn": {"base_height": float(init.base_height), "base_quat_wxyz": [1.0, 0.0, 0.0, 0.0],
                  "joint_pos": "default_joint_pos", "joint_vel": 0.0, "base_lin_vel": 0.0, "base_ang_vel": 0.0,
                  "previous_actions": 0.0,
                  "training_randomisation": {"joint_pos_scale": list(init.joint_pos_scale),
                                             "base_lin_vel": float(init.base_lin_vel),
                                             "base_ang_vel": float(init.base_ang_vel),
                                             "random_yaw": bool(init.random_yaw)}},
        "commands": {
            "columns": ["lin_vel_x", "lin_vel_y", "ang_vel_yaw"], "units": ["m/s", "m/s", "rad/s"],
            "frame": "base",
            "ranges": {"lin_vel_x": list(cmd.lin_vel_x), "lin_vel_y": list(cmd.lin_vel_y),
                       "ang_vel_yaw": list(cmd.ang_vel_yaw)},
            "zero_below": float(cmd.zero_below),
            "heading": {"in_training": bool(cmd.heading_command),
                        "fraction": float(cmd.heading_fraction) if cmd.heading_command else 0.0,
                        "gain": float(cmd.heading_stiffness), "range": list(cmd.heading)},
            "resampling_time": float(cmd.resampling_time),
            "episode_length": float(c.episode_length_s),
            "summary": "vx, vy: the base's planar velocity in its own frame (x forward, y left); ang_vel_yaw: its "
                       "yaw rate. Training drew each uniformly from ranges at every reset and every resampling_time "
                       "seconds; planar commands with a norm under zero_below were set to 0 (send 0 rather than a "
                       "smaller speed). A share heading.fraction of them turned towards a heading instead: "
                       "ang_vel_yaw = clip(heading.gain * wrap_to_pi(heading - yaw), ranges.ang_vel_yaw); the "
                       "others held the drawn yaw rate, as a joystick does.",
        },
        "observation_groups": observations.interface(env.observation_groups(), c),
    }


__all__ = ["deployment_interface"]
