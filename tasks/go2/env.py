"""Unitree Go2 velocity tracking on MuJoCo: the ``VecEnv`` of ``task=go2`` and ``task=go2_rough``.

Physics sits behind :class:`~tasks.go2.sim_interface.Simulator`, a protocol in torch tensors ``[N, ...]`` on
the task device: state views (base pose and velocity, joints, actuator torques, contact forces), ``step``
towards PD targets, ``reset`` of selected envs, ``push``, model variants, ground ``heights``, ``unstable`` flags.
This module uses only those members (``render`` and ``deployment_interface`` through the protocol's ``render``
and ``solver_options``). The backend is :attr:`Go2Env.sim_class`: :class:`~tasks.go2.sim.Go2Sim` (MuJoCo's
threaded rollout on the CPU, all envs in one C call per control step) by default; a GPU backend (MuJoCo Warp)
would be another class with the same members. Everything else, the MDP, is vectorised torch over the state
tensors:

- commands ``[N, 3]`` (vx, vy in the base frame, yaw rate), resampled on a timer; heading mode turns a
  sampled heading into a yaw-rate command; small planar commands are zeroed;
- rewards: named terms of :mod:`tasks.go2.rewards` with config weights;
- terminations: base contact or tilt (terminal), the episode time limit (time-out);
- observation groups ``policy [N, 45]``, ``privileged [N, 47]``, ``base_lin_vel [N, 3]`` (a state estimator's
  target), ``height_scan [N, 1, H, W]`` and, with
  ``obs.history_length = L > 0``, ``policy_history [N, L * 45]`` (the policy frames of the last L steps);
- resets of finished envs only, terrain curriculum, domain randomisation (:mod:`tasks.go2.randomization`:
  a physical variant per episode, per-episode sensor biases) and pushes;
- physics failures (``Simulator.unstable``): the env's episode ends (terminated, reward 0), it is reset, and
  ``extras["log"]["/physics_failures"]`` counts them per step.

State tensors the reward terms read: ``base_pos``, ``base_quat`` (w, x, y, z), ``base_lin_vel`` and
``base_ang_vel`` (base frame), ``projected_gravity``, ``base_height`` (above the terrain), ``dof_pos``,
``dof_vel``, ``last_dof_vel``, ``torques``, ``foot_forces``, ``collision_forces``, ``actions``,
``last_actions``, ``commands``, ``feet_air_time``, ``first_contact``, ``terminated``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import torch
from tensordict import TensorDict

from rlcore.env import ConfigError, VecEnv
from rlcore.utils.schedule import check_schedule, piecewise_linear
from tasks.go2.config import Go2Cfg, make_config
from tasks.go2.randomization import PHYSICAL_TERMS, Variant
from tasks.go2.rewards import REWARD_TERMS
from tasks.go2.sim import JOINT_NAMES, Go2Sim
from tasks.go2.sim_interface import Simulator
from tasks.go2.terrain import Terrain, scan_points


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


class Go2Env(VecEnv):
    """``num_envs`` Go2 robots learning to follow velocity commands.

    Args:
        num_envs: number of environments N.
        device: torch device of observations, rewards, the MDP state and the simulator's tensors ("cpu" or
            "cuda"); :class:`~tasks.go2.sim.Go2Sim` computes on the CPU and converts at its boundary.
        seed: seeds the task's private generators (resets, commands, noise, terrain levels, variants).
        **overrides: nested settings merged into :class:`~tasks.go2.config.Go2Cfg` (unknown keys are errors).
    """

    #: The simulator backend, called as ``sim_class(cfg, num_envs, terrain, rng, device)``; it must satisfy
    #: :class:`~tasks.go2.sim_interface.Simulator`.
    sim_class: type[Simulator] = Go2Sim
    #: Width of the ``policy`` group (one frame).
    POLICY_SIZE = 45
    #: Per-episode sensor biases in the privileged group: (name, size, scale, what); value = bias * scale.
    BIAS_TERMS = (("ang_vel_bias", 3, 20.0, "gyro bias added to base_ang_vel [rad/s]"),
                  ("gravity_bias", 3, 50.0, "bias added to projected_gravity"),
                  ("joint_pos_bias", 12, 50.0, "encoder offsets added to joint_pos [rad]"))

    def __init__(self, num_envs: int = 1024, device: str | torch.device = "cpu", seed: int | None = 0,
                 **overrides) -> None:
        self.cfg_task: Go2Cfg = make_config(overrides)
        c = self.cfg_task
        if c.obs.history_length < 0:
            raise ConfigError(f"go2.obs.history_length: {c.obs.history_length} frames; use 0 (no history) or more")
        if not 0.0 <= c.commands.heading_fraction <= 1.0:
            raise ConfigError(f"go2.commands.heading_fraction: {c.commands.heading_fraction} must lie in [0, 1]")
        self.num_envs = n = int(num_envs)
        self.num_actions = 12
        self.device = torch.device(device)
        self.dt = c.sim.dt * c.sim.decimation
        self.step_dt = self.dt  # seconds per env step (VecEnv contract; RND scales its bonus by it)
        self.max_episode_length = int(math.ceil(c.episode_length_s / self.dt))
        self.cfg = {"num_envs": n, "seed": seed, **dataclasses.asdict(c)}
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else int(seed))

        self.terrain = Terrain(c.terrain, n, self.device, self.generator)
        self.sim: Simulator = self.sim_class(c, n, self.terrain, np.random.default_rng(0 if seed is None else int(seed)),
                                             self.device)
        if c.rewards.mean_vel_tau <= 0:
            raise ConfigError(f"go2.rewards.mean_vel_tau: {c.rewards.mean_vel_tau} must be > 0 (the time constant of "
                              f"the running mean velocity, seconds)")
        self.weight_schedule = self._check_weight_schedule(c.rewards.weight_schedule)
        weights = {**c.rewards.weights, **{name: c.rewards.weights.get(name, 0.0) for name in self.weight_schedule}}
        self.reward_terms = [(name, REWARD_TERMS[name], w * self.dt) for name, w in weights.items()
                             if w != 0 or name in self.weight_schedule]
        self._init_constants()
        self._init_buffers()
        self._reset_envs(torch.arange(n, device=self.device))
        self._refresh_state()
        self.last_dof_vel = self.dof_vel.clone()

    @staticmethod
    def _check_weight_schedule(schedule: dict) -> dict[str, list[tuple[int, float]]]:
        """``rewards.weight_schedule`` as ``{term: [(env_step, weight), ...]}``; an unknown term is named."""
        unknown = sorted(set(schedule) - set(REWARD_TERMS))
        if unknown:
            raise ConfigError(f"go2.rewards.weight_schedule: unknown reward term(s) {', '.join(unknown)}; valid: "
                              f"{', '.join(REWARD_TERMS)}")
        return {name: check_schedule(points, f"go2.rewards.weight_schedule.{name}", unit="env step", positive=False)
                for name, points in schedule.items() if points}

    def reward_weight(self, name: str) -> float:
        """Term ``name``'s weight per second now: ``rewards.weights``, or its ``weight_schedule`` at the env's step
        counter."""
        points = self.weight_schedule.get(name)
        scheduled = piecewise_linear(points, self.common_step_counter) if points else None
        return float(self.cfg_task.rewards.weights.get(name, 0.0) if scheduled is None else scheduled)

    def _init_constants(self) -> None:
        """Tensors fixed by the config and the robot model: default pose, soft joint limits, torque limits, the
        variants' parameters, the height-scan grid and the command scale."""
        c, dev = self.cfg_task, self.device

        def t(x) -> torch.Tensor:
            return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=dev)

        self.default_dof_pos = t(c.control.default_joint_pos)
        rng = self.sim.joint_range.to(dev)  # [12, 2]
        mid, half = rng.mean(dim=1), (rng[:, 1] - rng[:, 0]) / 2 * c.rewards.soft_dof_pos_limit
        self.soft_dof_limits = torch.stack([mid - half, mid + half], dim=1)  # [12, 2]
        self.torque_limit = self.sim.torque_limit.to(dev)
        self.update_variant_params()
        self._scan_local = scan_points(c.obs.scan_x, c.obs.scan_y, c.obs.scan_resolution).to(dev)  # [H, W, 2]
        self.command_scale = t(c.obs.command_scale)

    def _init_buffers(self) -> None:
        """The per-env MDP state ``[N, ...]`` (zeros: :meth:`_reset_envs` then starts every episode) and the
        episode statistics."""
        c, n, dev = self.cfg_task, self.num_envs, self.device
        z = lambda *shape: torch.zeros(n, *shape, device=dev)  # noqa: E731
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        # Steps actually taken in the current episode. Unlike episode_length_buf (which runners may randomise
        # at start so that time-outs spread out) it counts what the episode sums hold.
        self.episode_steps = torch.zeros(n, dtype=torch.long, device=dev)
        self.actions, self.last_actions = z(12), z(12)
        self.last_dof_vel = z(12)
        self.commands, self.heading_target = z(3), z()
        self.heading_envs = torch.ones(n, dtype=torch.bool, device=dev)  # yaw rate from the heading target
        self.feet_air_time, self.first_contact = z(4), torch.zeros(n, 4, dtype=torch.bool, device=dev)
        self.last_contacts = torch.zeros(n, 4, dtype=torch.bool, device=dev)
        self.push_vel = z(2)
        self.base_lin_vel_mean = z(2)  # planar base velocity, moving average over rewards.mean_vel_tau
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.imu_bias, self.joint_pos_bias = z(6), z(12)  # per episode: gyro (3), gravity (3); encoders (12)
        self._physics_failures = torch.zeros((), dtype=torch.long, device=dev)  # a tensor: no sync per step
        # Observation history: the policy frames of the last history_length steps, newest first; the frame last
        # returned (pushed at the next step); envs whose history restarts from their next frame (new episodes).
        self.policy_history = z(c.obs.history_length, self.POLICY_SIZE)
        self.last_policy_obs = z(self.POLICY_SIZE)
        self.history_fresh = torch.ones(n, dtype=torch.bool, device=dev)
        self.spawn_xy = z(2)
        self.episode_sums = {name: z() for name, _, _ in self.reward_terms}
        self.episode_sums["lin_vel_error"], self.episode_sums["ang_vel_error"] = z(), z()
        self.episode_sums["commanded_distance"] = z()
        self._last_episode = {key: torch.full((n,), float("nan"), device=dev) for key in self.episode_sums}
        self.common_step_counter = 0

    def update_variant_params(self) -> None:
        """Tabulate the physical parameters of the sim's variants, ``variant_params [K, 20]``: ground friction,
        added base mass, motor strength, then the raw quantities of :data:`~tasks.go2.randomization.PHYSICAL_TERMS`
        (call again after replacing the sim's variants)."""
        rows = [[1.0 if v.ground_friction is None else v.ground_friction, v.base_added_mass, v.motor_strength]
                for v in self.sim.physical]
        head = torch.tensor(rows, dtype=torch.float32, device=self.device)
        self.variant_params = torch.cat([head, self.sim.variant_features().to(self.device)], dim=1)
        scale = [s for _, size, s, _, _ in PHYSICAL_TERMS for _ in range(size)]
        offset = [o for _, size, _, o, _ in PHYSICAL_TERMS for _ in range(size)]
        self._physical_scale = torch.tensor(scale, dtype=torch.float32, device=self.device)
        self._physical_offset = torch.tensor(offset, dtype=torch.float32, device=self.device)
        self._bias_scale = torch.tensor([s for _, size, s, _ in self.BIAS_TERMS for _ in range(size)],
                                        dtype=torch.float32, device=self.device)

    @property
    def physics_failures(self) -> int:
        """Unstable env steps since construction (envs whose physics failed, summed over steps)."""
        return int(self._physics_failures)

    def randomization_progress(self) -> float:
        """How far the domain-randomisation curriculum is, in [0, 1] (1 without a curriculum)."""
        steps = self.cfg_task.domain_rand.curriculum_steps
        return 1.0 if steps <= 0 else min(1.0, self.common_step_counter / steps)

    # ------------------------------------------------------------------ state from the simulator
    def _refresh_state(self) -> None:
        """Derive the MDP's state tensors from the simulator's views (call after every simulator mutation)."""
        s = self.sim
        self.base_pos = s.root_pos
        self.base_quat = s.root_quat
        self.dof_pos = s.joint_pos
        self.base_lin_vel = quat_rotate_inverse(self.base_quat, s.root_lin_vel)
        self.base_ang_vel = s.root_ang_vel
        self.dof_vel = s.joint_vel
        gravity = torch.tensor([0.0, 0.0, -1.0], device=self.device).expand(self.num_envs, 3)
        self.projected_gravity = quat_rotate_inverse(self.base_quat, gravity)
        self.base_height = self.base_pos[:, 2] - s.heights(self.base_pos[:, :2])
        self.torques = s.joint_torque
        self.foot_forces = s.foot_forces
        self.collision_forces = s.collision_forces
        self.base_contact_force = s.base_contact_force

    # ------------------------------------------------------------------ VecEnv API
    def get_observations(self) -> TensorDict:
        """Current observation groups, ``TensorDict[N]``: ``policy``, ``privileged``, ``height_scan``."""
        return self._observe()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply ``actions [N, 12]`` (joint-target offsets in units of ``action_scale``) for one control step.

        Persistent buffers are updated in place, never rebound, so that stepping under ``torch.inference_mode``
        (as runners do) leaves them ordinary tensors that a later reset or test may still modify.
        """
        c = self.cfg_task
        self.actions.copy_(actions.to(self.device, torch.float32).clamp(-c.control.clip_actions, c.control.clip_actions))
        targets = self.default_dof_pos + c.control.action_scale * self.actions
        self.sim.step(targets.detach())
        failed = self.sim.unstable  # these envs kept their pre-step state
        self._physics_failures += failed.sum()
        self._refresh_state()
        self.episode_length_buf += 1
        self.episode_steps += 1
        self.common_step_counter += 1
        self.base_lin_vel_mean += min(1.0, self.dt / c.rewards.mean_vel_tau) * (self.base_lin_vel[:, :2]
                                                                              - self.base_lin_vel_mean)

        # Feet: contact (with the previous step, to smooth touch-sensor flicker) and air time.
        contact = self.foot_forces > c.rewards.contact_threshold
        contact_filt = contact | self.last_contacts
        self.last_contacts.copy_(contact)
        self.first_contact.copy_((self.feet_air_time > 0.0) & contact_filt)
        self.feet_air_time += self.dt

        # Terminal states and time-outs.
        tilt_limit = -math.cos(c.termination.max_tilt)
        terminated = self.projected_gravity[:, 2] > tilt_limit
        terminated |= self.base_height < c.termination.min_base_height
        if c.termination.base_contact:
            terminated |= self.base_contact_force > c.rewards.contact_threshold
        terminated |= failed
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        self.terminated.copy_(terminated)
        dones = terminated | time_outs

        rewards = self._compute_rewards().masked_fill(failed, 0.0)
        self.feet_air_time *= ~contact_filt
        self._track_metrics()
        self._push_history()
        final_obs = self._observe()

        env_ids = dones.nonzero(as_tuple=False).squeeze(-1)
        if env_ids.numel() > 0:
            self._reset_envs(env_ids)
            self._refresh_state()
        self._resample_commands_on_timer()
        self._update_heading_commands()
        self._push_robots()

        self.last_actions.copy_(self.actions)
        self.last_dof_vel.copy_(self.dof_vel)
        obs = self._observe()
        log = self._log()
        log["/physics_failures"] = failed.sum().float()
        if c.domain_rand.curriculum_steps > 0:
            log["/randomization_progress"] = torch.tensor(self.randomization_progress())
        extras = {"time_outs": time_outs, "final_observations": final_obs, "log": log}
        return obs, rewards, dones, extras

    def reset(self) -> TensorDict:
        """Reset every env; return the observations."""
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        self._refresh_state()
        return self._observe()

    # ------------------------------------------------------------------ MDP pieces
    def _compute_rewards(self) -> torch.Tensor:
        total = torch.zeros(self.num_envs, device=self.device)
        termination = None
        for name, term, weight in self.reward_terms:
            if name in self.weight_schedule:
                weight = self.reward_weight(name) * self.dt
            value = term(self) * weight
            self.episode_sums[name] += value
            if name == "termination":
                termination = value
            else:
                total += value
        if self.cfg_task.rewards.only_positive_rewards:
            total.clamp_(min=0.0)
        if termination is not None:  # added after the clip so that dying always costs
            total += termination
        return total

    def _track_metrics(self) -> None:
        self.episode_sums["lin_vel_error"] += torch.norm(self.commands[:, :2] - self.base_lin_vel[:, :2], dim=1)
        self.episode_sums["ang_vel_error"] += torch.abs(self.commands[:, 2] - self.base_ang_vel[:, 2])
        self.episode_sums["commanded_distance"] += torch.norm(self.commands[:, :2], dim=1) * self.dt

    def _log(self) -> dict:
        log = {f"/reward/{name}": torch.nanmean(self._last_episode[name]) for name, _, _ in self.reward_terms}
        log["/metrics/lin_vel_error"] = torch.nanmean(self._last_episode["lin_vel_error"])
        log["/metrics/ang_vel_error"] = torch.nanmean(self._last_episode["ang_vel_error"])
        log["/metrics/lin_vel_error_now"] = torch.norm(self.commands[:, :2] - self.base_lin_vel[:, :2], dim=1).mean()
        if not self.terrain.is_flat:
            log["/terrain_level"] = self.terrain.mean_level()
        for name in self.weight_schedule:
            log[f"/reward_weight/{name}"] = torch.tensor(self.reward_weight(name))
        return log

    def _reset_envs(self, env_ids: torch.Tensor) -> None:
        """Reset only ``env_ids``: curriculum, physical variant, joint and base state, commands, buffers."""
        c, g, dev, k = self.cfg_task, self.generator, self.device, env_ids.numel()
        steps = self.episode_steps[env_ids]
        ran = steps > 0  # envs reset before their first step (construction, reset()) have no episode to report
        steps = steps.clamp(min=1).float()
        # Episode statistics (per second for rewards, per step for errors) before the buffers clear.
        for key, total in self.episode_sums.items():
            per = steps if key.endswith("_error") else steps * self.dt if key != "commanded_distance" else None
            value = total[env_ids] / per if per is not None else total[env_ids]
            last = self._last_episode[key]
            last[env_ids] = torch.where(ran, value, last[env_ids])
            total[env_ids] = 0.0
        if hasattr(self, "base_pos"):
            walked = torch.norm(self.base_pos[env_ids, :2] - self.spawn_xy[env_ids], dim=1)
            commanded = self._last_episode["commanded_distance"][env_ids].nan_to_num(0.0)
            self.terrain.update_curriculum(env_ids, walked, commanded)

        def uniform(lo: float, hi: float, *shape: int) -> torch.Tensor:
            return lo + (hi - lo) * torch.rand(k, *shape, generator=g, device=dev)

        progress = self.randomization_progress()
        allowed = self.sim.num_variants
        if c.domain_rand.curriculum_steps > 0:  # the graded pool's first (mildest) variants only, early on
            allowed = min(allowed, max(1, math.ceil(allowed * progress)))
        variants = torch.randint(0, allowed, (k,), generator=g, device=dev)
        self.sim.set_variants(env_ids, variants)

        origin = self.terrain.origins(env_ids)
        yaw = uniform(-math.pi, math.pi) if c.init.random_yaw else torch.zeros(k, device=dev)
        quat = torch.stack([torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], dim=1)
        pos = origin + torch.tensor([0.0, 0.0, c.init.base_height], device=dev)
        joints = self.default_dof_pos * uniform(*c.init.joint_pos_scale, 12)
        joints = torch.minimum(torch.maximum(joints, self.soft_dof_limits[:, 0]), self.soft_dof_limits[:, 1])
        lin = torch.cat([uniform(-c.init.base_lin_vel, c.init.base_lin_vel, 2), torch.zeros(k, 1, device=dev)], dim=1)
        ang = uniform(-c.init.base_ang_vel, c.init.base_ang_vel, 3)
        qpos = torch.cat([pos, quat, joints], dim=1)
        qvel = torch.cat([lin, ang, torch.zeros(k, 12, device=dev)], dim=1)
        dr = c.domain_rand
        self.imu_bias[env_ids] = 0.0
        self.joint_pos_bias[env_ids] = 0.0
        if dr.randomize_imu_bias:
            amp = torch.tensor([dr.imu_bias_ang_vel] * 3 + [dr.imu_bias_gravity] * 3, device=dev) * progress
            self.imu_bias[env_ids] = uniform(-1.0, 1.0, 6) * amp
        if dr.randomize_encoder_bias:
            self.joint_pos_bias[env_ids] = uniform(-1.0, 1.0, 12) * dr.encoder_bias * progress
        self.sim.reset(env_ids, qpos, qvel)
        self.spawn_xy[env_ids] = pos[:, :2]

        self._resample_commands(env_ids)
        for buf in (self.actions, self.last_actions, self.last_dof_vel, self.feet_air_time, self.push_vel,
                    self.base_lin_vel_mean):
            buf[env_ids] = 0.0
        self.last_contacts[env_ids] = False
        self.first_contact[env_ids] = False
        self.history_fresh[env_ids] = True
        self.episode_length_buf[env_ids] = 0
        self.episode_steps[env_ids] = 0

    def _resample_commands(self, env_ids: torch.Tensor) -> None:
        c, g, dev, k = self.cfg_task.commands, self.generator, self.device, env_ids.numel()
        if k == 0:
            return

        def uniform(r: list[float]) -> torch.Tensor:
            return r[0] + (r[1] - r[0]) * torch.rand(k, generator=g, device=dev)

        cmd = torch.stack([uniform(c.lin_vel_x), uniform(c.lin_vel_y), uniform(c.ang_vel_yaw)], dim=1)
        cmd[:, :2] *= (torch.norm(cmd[:, :2], dim=1, keepdim=True) > c.zero_below)
        self.commands[env_ids] = cmd
        self.heading_target[env_ids] = uniform(c.heading)
        if c.heading_fraction < 1.0:  # no draw otherwise: the default keeps its random stream
            self.heading_envs[env_ids] = torch.rand(k, generator=g, device=dev) < c.heading_fraction

    def _resample_commands_on_timer(self) -> None:
        period = max(1, int(round(self.cfg_task.commands.resampling_time / self.dt)))
        due = ((self.episode_length_buf % period) == 0) & (self.episode_length_buf > 0)
        self._resample_commands(due.nonzero(as_tuple=False).squeeze(-1))

    def _update_heading_commands(self) -> None:
        c = self.cfg_task.commands
        if c.heading_command:
            error = wrap_to_pi(self.heading_target - yaw_of(self.base_quat))
            yaw_rate = (c.heading_stiffness * error).clamp(c.ang_vel_yaw[0], c.ang_vel_yaw[1])
            self.commands[:, 2] = torch.where(self.heading_envs, yaw_rate, self.commands[:, 2])

    def _push_robots(self) -> None:
        """Every ``push_interval_s`` of its episode an env's base gets a random planar velocity.

        Pushes follow each env's own episode clock, so (with random initial episode lengths) they are spread
        over time instead of hitting every robot on the same step.
        """
        dr = self.cfg_task.domain_rand
        self.push_vel *= 0.95  # the privileged record of a push fades over about a second
        if not dr.push_robots:
            return
        interval = max(1, int(round(dr.push_interval_s / self.dt)))
        due = ((self.episode_length_buf % interval) == 0) & (self.episode_length_buf > 0)
        env_ids = due.nonzero(as_tuple=False).squeeze(-1)
        if env_ids.numel() == 0:
            return
        v = (torch.rand(env_ids.numel(), 2, generator=self.generator, device=self.device) * 2 - 1) * dr.max_push_vel_xy
        self.sim.push(env_ids, v)
        self.push_vel[env_ids] = v
        self._refresh_state()

    # ------------------------------------------------------------------ observations
    def _noise(self, x: torch.Tensor, amplitude: float) -> torch.Tensor:
        o = self.cfg_task.obs
        if not o.add_noise or amplitude == 0.0:
            return x
        return x + (torch.rand(x.shape, generator=self.generator, device=self.device) * 2 - 1) * amplitude * o.noise_level

    def height_scan_points(self) -> torch.Tensor:
        """World xy of every scan point, ``[N, H, W, 2]`` (grid in the base's yaw frame)."""
        yaw = yaw_of(self.base_quat)
        cos, sin = torch.cos(yaw)[:, None, None], torch.sin(yaw)[:, None, None]
        lx, ly = self._scan_local[..., 0], self._scan_local[..., 1]
        x = self.base_pos[:, 0, None, None] + cos * lx - sin * ly
        y = self.base_pos[:, 1, None, None] + sin * lx + cos * ly
        return torch.stack([x, y], dim=-1)

    def _observe(self) -> TensorDict:
        o = self.cfg_task.obs
        # Sensor biases are part of the observation corruption: off with the noise (clean observations).
        imu_bias, joint_bias = (self.imu_bias, self.joint_pos_bias) if o.add_noise else (0.0 * self.imu_bias,
                                                                                         0.0 * self.joint_pos_bias)
        policy = torch.cat([
            self._noise((self.base_ang_vel + imu_bias[:, :3]) * o.ang_vel_scale, o.noise_ang_vel * o.ang_vel_scale),
            self._noise(self.projected_gravity + imu_bias[:, 3:], o.noise_gravity),
            self.commands * self.command_scale,
            self._noise((self.dof_pos + joint_bias - self.default_dof_pos) * o.dof_pos_scale,
                        o.noise_dof_pos * o.dof_pos_scale),
            self._noise(self.dof_vel * o.dof_vel_scale, o.noise_dof_vel * o.dof_vel_scale),
            self.actions,
        ], dim=1).clamp(-o.clip, o.clip)
        variant = self.variant_params[self.sim.env_variant]  # [N, 20]
        privileged = torch.cat([
            self.base_lin_vel * o.lin_vel_scale,
            variant[:, :3],  # ground friction, added base mass, motor strength
            self.foot_forces / 100.0,
            self.push_vel,
            (variant[:, 3:] - self._physical_offset) * self._physical_scale,
            torch.cat([imu_bias, joint_bias], dim=1) * self._bias_scale,
        ], dim=1)
        if self.terrain.is_flat:  # every scan point lies at height 0: skip the grid (same values, bit for bit)
            terrain = torch.zeros(1, *self._scan_local.shape[:2], device=self.device)  # [1, H, W], broadcast
        else:
            terrain = self.sim.heights(self.height_scan_points())  # [N, H, W]
        rel = (self.base_pos[:, 2, None, None] - terrain - self.cfg_task.rewards.base_height_target).clamp(-1.0, 1.0)
        scan = self._noise(rel * o.height_scale, o.noise_height * o.height_scale).unsqueeze(1)
        # base_lin_vel: the target of a state estimator (estimator_cfg), which a real robot does not measure.
        groups = {"policy": policy, "privileged": privileged, "height_scan": scan,
                  "base_lin_vel": self.base_lin_vel * o.lin_vel_scale}
        self.last_policy_obs.copy_(policy)
        if o.history_length > 0:
            if self.history_fresh.any():  # a new episode's history is its first frame, repeated
                fresh = self.history_fresh
                self.policy_history[fresh] = policy[fresh].unsqueeze(1).expand(-1, o.history_length, -1)
                self.history_fresh.zero_()
            groups["policy_history"] = self.policy_history.flatten(1).clone()
        else:
            self.history_fresh.zero_()
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def _push_history(self) -> None:
        """Shift the observation history by one step: the frame returned last becomes the newest entry."""
        if self.cfg_task.obs.history_length > 0:
            self.policy_history.copy_(torch.cat([self.last_policy_obs.unsqueeze(1), self.policy_history[:, :-1]], dim=1))

    # ------------------------------------------------------------------ deployment
    def command_integral(self) -> dict:
        """The exported policy's default integral loop on the command (``rlcore.models.command_integral``):
        ``{"gain": [1/s], "limit": [m/s], "band": [m/s]}`` from ``commands.integral_gain`` / ``integral_limit`` /
        ``integral_band`` (gain 0: none)."""
        c = self.cfg_task.commands
        return {"gain": float(c.integral_gain), "limit": float(c.integral_limit), "band": float(c.integral_band)}

    def deployment_interface(self) -> dict:
        """How to run a policy of this task on a Go2, as plain JSON-able data (optional ``VecEnv`` method).

        ONNX export writes every entry into the model's ``metadata_props`` (:mod:`rlcore.utils.export`), so a
        deployment program, and ``rlcore.robustness``, need only the ``.onnx`` file. Joint quantities are in
        ``joint_names`` order (FL, FR, RL, RR x hip, thigh, calf: the order of qpos, qvel and actions).
        ``observation_groups`` lists what each group's vector is made of, in order: term ``name``, its
        ``start:stop`` within the group, and ``value = (quantity - offset) * scale`` (``offset`` only for
        ``joint_pos``), then the whole group clipped to ``+-clip``; ``noise`` is the uniform noise amplitude
        added at every step during training and ``bias`` (policy terms) the amplitude of a uniform offset drawn per
        episode (both in observation units).
        """
        c, physics = self.cfg_task, self.sim.solver_options()
        policy = self._policy_interface()
        groups = {"policy": policy, "privileged": self._privileged_interface()}
        if c.obs.history_length > 0:
            groups["policy_history"] = self._history_interface(policy, c.obs.history_length)
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
            "observation_groups": {**groups, "height_scan": self._height_scan_interface(),
                                   "base_lin_vel": self._base_lin_vel_interface()},
        }

    def _noise_scale(self) -> float:
        """The factor on every noise amplitude: ``noise_level``, or 0 with noise off."""
        o = self.cfg_task.obs
        return o.noise_level if o.add_noise else 0.0

    def _policy_interface(self) -> dict:
        """The ``policy`` group's description: its terms, scales, noise, the default pose subtracted from the joint
        angles, and the per-episode sensor bias amplitudes (observation units, like the noise)."""
        c, o = self.cfg_task, self.cfg_task.obs
        policy = _group_interface([
            ("base_ang_vel", 3, o.ang_vel_scale, o.noise_ang_vel * o.ang_vel_scale,
             "base angular velocity, base frame [rad/s]"),
            ("projected_gravity", 3, 1.0, o.noise_gravity, "unit gravity vector in the base frame"),
            ("velocity_commands", 3, list(o.command_scale), 0.0,
             "commanded vx, vy [m/s] (base frame), yaw rate [rad/s]"),
            ("joint_pos", 12, o.dof_pos_scale, o.noise_dof_pos * o.dof_pos_scale,
             "joint angles [rad] minus default_joint_pos"),
            ("joint_vel", 12, o.dof_vel_scale, o.noise_dof_vel * o.dof_vel_scale, "joint velocities [rad/s]"),
            ("last_actions", 12, 1.0, 0.0, "the policy's previous output, after clipping to action_clip"),
        ], float(o.clip), self._noise_scale())
        policy["terms"][3]["offset"] = list(c.control.default_joint_pos)
        dr, on = c.domain_rand, float(o.add_noise)  # per-episode bias amplitudes (observation units), as noise
        bias = {"base_ang_vel": dr.imu_bias_ang_vel * o.ang_vel_scale * dr.randomize_imu_bias,
                "projected_gravity": dr.imu_bias_gravity * dr.randomize_imu_bias,
                "joint_pos": dr.encoder_bias * o.dof_pos_scale * dr.randomize_encoder_bias}
        for term in policy["terms"]:
            term["bias"] = float(bias.get(term["name"], 0.0) * on)
        return policy

    def _privileged_interface(self) -> dict:
        """The ``privileged`` group's description (no noise): state, variant parameters and sensor biases."""
        o = self.cfg_task.obs
        privileged = _group_interface([
            ("base_lin_vel", 3, o.lin_vel_scale, 0.0, "base linear velocity, base frame [m/s]"),
            ("ground_friction", 1, 1.0, 0.0, "sliding friction of the ground"),
            ("added_base_mass", 1, 1.0, 0.0, "mass added to the base [kg]"),
            ("motor_strength", 1, 1.0, 0.0, "scale of kp and kd"),
            ("foot_forces", 4, 0.01, 0.0, "foot contact normal forces [N], FL, FR, RL, RR"),
            ("push_velocity", 2, 1.0, 0.0, "last push's planar velocity [m/s], fading"),
            *((name, size, scale, 0.0, what) for name, size, scale, _, what in PHYSICAL_TERMS),
            *((name, size, scale, 0.0, what) for name, size, scale, what in self.BIAS_TERMS),
        ], None, self._noise_scale())
        for term in privileged["terms"]:
            offset = next((o for name, _, _, o, _ in PHYSICAL_TERMS if name == term["name"]), 0.0)
            if offset:
                term["offset"] = offset
        return privileged

    def _base_lin_vel_interface(self) -> dict:
        """The ``base_lin_vel`` group's description: the true base velocity (a state estimator's target)."""
        return _group_interface([("base_lin_vel", 3, self.cfg_task.obs.lin_vel_scale, 0.0,
                                  "base linear velocity, base frame [m/s] (privileged: an estimator's target)")],
                                None, self._noise_scale())

    def _height_scan_interface(self) -> dict:
        """The ``height_scan`` group's description: a ``[1, rows, cols]`` grid of clipped heights."""
        c, o = self.cfg_task, self.cfg_task.obs
        rows, cols = self._scan_local.shape[:2]
        return {"shape": [1, int(rows), int(cols)], "scale": o.height_scale, "clip": None,
                "noise": o.noise_height * o.height_scale * self._noise_scale(),
                "quantity": (f"clip(base height above the terrain point - {c.rewards.base_height_target}, -1, 1) "
                             f"[m] on a grid x {list(o.scan_x)}, y {list(o.scan_y)}, step {o.scan_resolution} "
                             "in the base's yaw frame")}

    @staticmethod
    def _history_interface(policy: dict, frames: int) -> dict:
        """The ``policy_history`` group's description: ``frames`` copies of the policy group's terms, newest first
        (term ``joint_vel@t-2`` is the joint_vel term of the frame the policy saw two steps ago)."""
        width = policy["size"]
        terms = [{**term, "name": f"{term['name']}@t-{k}", "start": (k - 1) * width + term["start"],
                  "stop": (k - 1) * width + term["stop"]} for k in range(1, frames + 1) for term in policy["terms"]]
        return {"size": frames * width, "clip": policy["clip"], "history_of": "policy", "frames": frames,
                "order": "newest first: frame k (1..frames) is the policy group the policy was given k steps ago",
                "reset": "at an episode's first step every frame is that step's policy group", "terms": terms}

    # ------------------------------------------------------------------ rendering, checkpointing
    def render(self, width: int = 640, height: int = 480, env_id: int = 0) -> np.ndarray:
        """An RGB frame ``[H, W, 3]`` uint8 of env ``env_id`` from a camera following the robot.

        Needs an OpenGL context: on a machine without a display set ``MUJOCO_GL=egl`` (or ``osmesa``)
        before the first ``import mujoco``. ``go2.sim.render_quality = "fast"``: no multisampling, shadows or
        reflections.
        """
        return self.sim.render(env_id, width, height, fast=self.cfg_task.sim.render_quality == "fast")

    STATE_TENSORS = ("episode_length_buf", "episode_steps", "actions", "last_actions", "last_dof_vel", "commands", "heading_target",
                     "heading_envs", "feet_air_time", "first_contact", "last_contacts", "push_vel", "base_lin_vel_mean",
                     "terminated", "spawn_xy",
                     "imu_bias", "joint_pos_bias", "policy_history", "last_policy_obs", "history_fresh")
    HISTORY_TENSORS = ("policy_history", "last_policy_obs", "history_fresh")
    # State tensors added after states were first saved, and the value an older state implies for them: every env
    # under heading control (before heading_fraction), every robot's running mean velocity from rest.
    LATER_STATE_FILL: ClassVar[dict[str, float]] = {"heading_envs": True, "base_lin_vel_mean": 0.0}

    def state_dict(self) -> dict:
        """Everything that decides the task's future given the actions, for an exact resume (tensors only)."""
        out = {name: getattr(self, name).detach().clone() for name in self.STATE_TENSORS}
        out.update(self.sim.state_dict())  # sim_state, sim_sensordata, env_variant, the latency pipeline
        # The pool of physical variants is drawn from the seed at construction: keep it, so a resume (whatever
        # its seed) simulates the same robots.
        out["physical_variants"] = [_variant_state(v) for v in self.sim.physical]
        out["terrain_levels"] = self.terrain.levels.clone()
        out["episode_sums"] = {k: v.clone() for k, v in self.episode_sums.items()}
        out["last_episode"] = {k: v.clone() for k, v in self._last_episode.items()}
        out["generator_state"] = self.generator.get_state()
        out["common_step_counter"] = self.common_step_counter
        out["task"] = type(self).__name__
        out["num_envs"] = self.num_envs
        return out

    def _check_state(self, state: dict, same_num_envs: bool) -> None:
        """Refuse an env state saved by another task (or, with ``same_num_envs``, with another env count)."""
        if state.get("task") != type(self).__name__ or (same_num_envs and int(state.get("num_envs", -1)) != self.num_envs):
            raise ConfigError(f"env state is for task {state.get('task')} with num_envs={state.get('num_envs')}; "
                              f"this is {type(self).__name__} with num_envs={self.num_envs}")

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output; refuses a state from another task or env count."""
        self._check_state(state, same_num_envs=True)
        for name in self.STATE_TENSORS:
            if name not in state and name in self.HISTORY_TENSORS:  # a state saved before the history existed
                self.history_fresh.fill_(True)
                continue
            if name not in state and name in self.LATER_STATE_FILL:  # a state saved before this tensor existed
                getattr(self, name).fill_(self.LATER_STATE_FILL[name])
                continue
            value = torch.as_tensor(state[name]).to(self.device).clone()
            if name == "policy_history" and value.shape != self.policy_history.shape:
                raise ConfigError(f"env state holds {value.shape[1]} history frames; this env keeps "
                                  f"go2.obs.history_length={self.policy_history.shape[1]}")
            setattr(self, name, value)
        if "physical_variants" in state:
            self.use_robot_pool(state["physical_variants"])
        self.sim.load_state_dict(state)  # physics state, sensors, each env's variant, the latency pipeline
        self.terrain.levels = state["terrain_levels"].to(self.device).clone()
        # The statistics of the terms this env computes: a reward term added since the checkpoint (a resume that
        # changes the reward weights) starts from zero this episode, one dropped since is forgotten.
        for key in self.episode_sums:
            if key in state["episode_sums"]:
                self.episode_sums[key] = state["episode_sums"][key].to(self.device).clone()
                self._last_episode[key] = state["last_episode"][key].to(self.device).clone()
            else:
                self.episode_sums[key].zero_()
                self._last_episode[key].fill_(float("nan"))
        self.generator.set_state(torch.as_tensor(state["generator_state"]).cpu())
        self.common_step_counter = int(state["common_step_counter"])
        self._refresh_state()

    def continue_curriculum(self, state: dict) -> bool:
        """Start this env's curricula where a saved run left them (``state``: a checkpoint's ``env_state``) and
        reset every env; returns whether anything changed (nothing does for a state saved at step 0).

        A distillation student is trained on the robots its teacher ended on: the domain-randomisation progress
        (the step counter, so the whole robot pool is in play) and, on rough terrain, levels drawn from the
        teacher's level distribution. Without it the student's env restarts the curriculum on near-nominal robots
        and spends its first ``domain_rand.curriculum_steps`` steps where the deployed policy is least tested.
        The robot pool itself stays this env's own (drawn from its seed); :meth:`use_robot_pool` adopts a saved one.
        """
        self._check_state(state, same_num_envs=False)
        counter = int(state["common_step_counter"])
        saved_levels = torch.as_tensor(state["terrain_levels"]).to(self.device)
        moved_levels = not self.terrain.is_flat and saved_levels.numel() > 0 and bool(saved_levels.any())
        if counter == self.common_step_counter and not moved_levels:
            return False
        self.common_step_counter = counter
        if moved_levels:
            pick = torch.randint(0, saved_levels.numel(), (self.num_envs,), generator=self.generator,
                                 device=self.device)
            self.terrain.levels = saved_levels[pick].clamp(0, self.terrain.num_levels - 1).long()
        self.reset()
        return True

    def use_robot_pool(self, physical_variants: list[dict]) -> None:
        """Replace the pool of physical variants with a saved one (``state_dict()["physical_variants"]``, e.g. of a
        checkpoint), so an env built elsewhere drives the very robots a run was trained on. Envs keep their variant
        index until their next reset."""
        physical = [_variant_from_state(d) for d in physical_variants]
        if physical != self.sim.physical:
            self.sim.set_physical_variants(physical)
            self.update_variant_params()

    def curriculum_state(self) -> dict:
        """Where this env's curricula stand now, for another env of the task to draw its robots from the same
        distribution (:meth:`set_curriculum`; an evaluation env follows its training env this way): the step
        counter (domain-randomisation progress and ``rewards.weight_schedule``), the terrain levels and the robot
        pool."""
        return {"task": type(self).__name__, "num_envs": self.num_envs,
                "common_step_counter": self.common_step_counter,
                "terrain_levels": self.terrain.levels.clone(),
                "physical_variants": [_variant_state(v) for v in self.sim.physical]}

    def set_curriculum(self, state: dict) -> None:
        """Adopt another env's :meth:`curriculum_state` (of the same task, any env count): its step counter and robot
        pool, and, on rough terrain, levels drawn from its level distribution with this env's generator (so the
        draw is fixed given this env's generator state). Every env draws from it at its next reset (:meth:`reset`
        resets all); unlike :meth:`continue_curriculum` nothing is reset here."""
        self._check_state(state, same_num_envs=False)
        self.use_robot_pool(state["physical_variants"])
        self.common_step_counter = int(state["common_step_counter"])
        levels = torch.as_tensor(state["terrain_levels"]).to(self.device)
        if not self.terrain.is_flat and levels.numel() > 0:
            pick = torch.randint(0, levels.numel(), (self.num_envs,), generator=self.generator, device=self.device)
            self.terrain.levels = levels[pick].clamp(0, self.terrain.num_levels - 1).long()

    def close(self) -> None:
        self.sim.close()


def _group_interface(terms: list[tuple], clip: float | None, noise: float) -> dict:
    """A 1D group's description from ``(name, size, scale, noise amplitude, quantity)`` terms, in order: each term's
    ``start:stop`` within the group, its scale and its noise (amplitude x ``noise``, the config's noise factor)."""
    out, start = [], 0
    for name, size, scale, amplitude, what in terms:
        out.append({"name": name, "start": start, "stop": start + size, "scale": scale,
                    "noise": amplitude * noise, "quantity": what})
        start += size
    return {"size": start, "clip": clip, "terms": out}


def _variant_state(variant: Variant) -> dict:
    """A :class:`Variant` as plain Python values (``torch.load(weights_only=True)`` reads them back)."""
    def plain(v):
        if isinstance(v, (tuple, list, np.ndarray)):
            return [plain(x) for x in v]
        return v.item() if isinstance(v, np.generic) else v
    return {k: plain(v) for k, v in dataclasses.asdict(variant).items()}


def _variant_from_state(d: dict) -> Variant:
    return Variant(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


__all__ = ["JOINT_NAMES", "Go2Env", "quat_rotate_inverse", "wrap_to_pi", "yaw_of"]
