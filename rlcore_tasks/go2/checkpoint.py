"""The Go2 env's state in a checkpoint (``env_state``): everything that decides the task's future given the
actions, as tensors and plain values (``torch.load(weights_only=True)`` reads it), for an exact resume."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rlcore.env import ConfigError
from rlcore_tasks.go2.curriculum import check_state, variant_state

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env

#: The env's per-env state tensors, saved under their attribute names.
STATE_TENSORS = ("episode_length_buf", "episode_steps", "actions", "last_actions", "last_dof_vel", "commands",
                 "heading_target", "heading_envs", "feet_air_time", "first_contact", "last_contacts", "push_vel",
                 "base_lin_vel_mean", "terminated", "spawn_xy",
                 "imu_bias", "joint_pos_bias", "policy_history", "last_policy_obs", "history_fresh",
                 "scan_offset", "scan_lag", "scan_poses")
HISTORY_TENSORS = ("policy_history", "last_policy_obs", "history_fresh")
# State tensors added after states were first saved, and the value an older state implies for them: every env
# under heading control (before heading_fraction), every robot's running mean velocity from rest.
LATER_STATE_FILL: dict[str, float] = {"heading_envs": True, "base_lin_vel_mean": 0.0}


def state_dict(env: Go2Env) -> dict:
    """``env``'s state: its state tensors, the simulator's, the robot pool, terrain levels, episode statistics,
    the generator and the step counter."""
    out = {name: getattr(env, name).detach().clone() for name in env.STATE_TENSORS}
    out.update(env.sim.state_dict())  # sim_state, sim_sensordata, env_variant, the latency pipeline
    # The pool of physical variants is drawn from the seed at construction: keep it, so a resume (whatever
    # its seed) simulates the same robots.
    out["physical_variants"] = [variant_state(v) for v in env.sim.physical]
    out["terrain_levels"] = env.terrain.levels.clone()
    out["episode_sums"] = {k: v.clone() for k, v in env.episode_sums.items()}
    out["last_episode"] = {k: v.clone() for k, v in env._last_episode.items()}
    out["generator_state"] = env.generator.get_state()
    out["common_step_counter"] = env.common_step_counter
    out["task"] = type(env).__name__
    out["num_envs"] = env.num_envs
    return out


def load_state_dict(env: Go2Env, state: dict) -> None:
    """Restore :func:`state_dict`'s output into ``env``; refuses a state from another task or env count."""
    check_state(env, state, same_num_envs=True)
    for name in env.STATE_TENSORS:
        if name not in state and name in env.HISTORY_TENSORS:  # a state saved before the history existed
            env.history_fresh.fill_(True)
            continue
        if name not in state and name in env.LATER_STATE_FILL:  # a state saved before this tensor existed
            getattr(env, name).fill_(env.LATER_STATE_FILL[name])
            continue
        value = torch.as_tensor(state[name]).to(env.device).clone()
        if name == "policy_history" and value.shape != env.policy_history.shape:
            raise ConfigError(f"env state holds {value.shape[1]} history frames; this env keeps "
                              f"go2.obs.history_length={env.policy_history.shape[1]}")
        setattr(env, name, value)
    if "physical_variants" in state:
        env.use_robot_pool(state["physical_variants"])
    env.sim.load_state_dict(state)  # physics state, sensors, each env's variant, the latency pipeline
    env.terrain.levels = state["terrain_levels"].to(env.device).clone()
    # The statistics of the terms this env computes: a reward term added since the checkpoint (a resume that
    # changes the reward weights) starts from zero this episode, one dropped since is forgotten.
    for key in env.episode_sums:
        if key in state["episode_sums"]:
            env.episode_sums[key] = state["episode_sums"][key].to(env.device).clone()
            env._last_episode[key] = state["last_episode"][key].to(env.device).clone()
        else:
            env.episode_sums[key].zero_()
            env._last_episode[key].fill_(float("nan"))
    env.generator.set_state(torch.as_tensor(state["generator_state"]).cpu())
    env.common_step_counter = int(state["common_step_counter"])
    env._refresh_state()


__all__ = ["HISTORY_TENSORS", "LATER_STATE_FILL", "STATE_TENSORS", "load_state_dict", "state_dict"]
