"""Unitree Go2 velocity tracking on MuJoCo: the ``VecEnv`` of ``task=go2`` and ``task=go2_rough``.

Physics sits behind :class:`~rlcore_tasks.go2.sim_interface.Simulator`, a protocol in torch tensors ``[N, ...]`` on
the task device: state views (base pose and velocity, joints, actuator torques, contact forces), ``step``
towards PD targets, ``reset`` of selected envs, ``push``, model variants, ground ``heights``, ``unstable`` flags.
This module and the MDP's pieces use only those members (``render`` and ``deployment_interface`` through the
protocol's ``render`` and ``solver_options``). The backend is config ``sim.backend`` (:func:`simulator_class`):
``rollout``, :class:`~rlcore_tasks.go2.sim.Go2Sim` (MuJoCo's threaded rollout on the CPU, all envs in one C call per
control step), the default, or ``warp``, :class:`~rlcore_tasks.go2.sim_warp.WarpSim` (MuJoCo Warp on the task's
device); :attr:`Go2Env.sim_class` overrides it. Everything else, the MDP, is
vectorised torch over the state tensors. This module is the MDP loop (:meth:`Go2Env.step`); its pieces live in
modules of their own:

- :mod:`rlcore_tasks.go2.commands`: commands ``[N, 3]`` (vx, vy in the base frame, yaw rate), resampled on a timer;
  heading mode turns a sampled heading into a yaw-rate command; small planar commands are zeroed;
- :mod:`rlcore_tasks.go2.rewards`: named reward terms with config weights;
- terminations (here): base contact or tilt (terminal), the episode time limit (time-out);
- :mod:`rlcore_tasks.go2.observations`: every observation term declared once, from which both the observation groups
  ``policy [N, 45]``, ``privileged [N, 47]``, ``base_lin_vel [N, 3]`` (a state estimator's target),
  ``height_scan [N, 1, H, W]`` and, with ``obs.history_length = L > 0``, ``policy_history [N, L * 45]`` (the policy
  frames of the last L steps) and the deployment metadata's layout are generated;
- :mod:`rlcore_tasks.go2.resets`: resets of finished envs only, with domain randomisation (:mod:`rlcore_tasks.go2.randomization`:
  a physical variant per episode, per-episode sensor biases), and pushes;
- :mod:`rlcore_tasks.go2.curriculum`: terrain levels, the domain-randomisation curriculum, reward weight schedules;
- physics failures (``Simulator.unstable``): the env's episode ends (terminated, reward 0), it is reset, and
  ``extras["log"]["/physics_failures"]`` counts them per step.

State tensors the reward terms read: ``base_pos``, ``base_quat`` (w, x, y, z), ``base_lin_vel`` and
``base_ang_vel`` (base frame), ``projected_gravity``, ``base_height`` (above the terrain), ``dof_pos``,
``dof_vel``, ``last_dof_vel``, ``torques``, ``foot_forces``, ``collision_forces``, ``actions``,
``last_actions``, ``commands``, ``feet_air_time``, ``first_contact``, ``terminated``.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import ClassVar

import numpy as np
import torch
from tensordict import TensorDict

from rlcore.env import ConfigError, VecEnv
from rlcore_tasks.go2 import checkpoint, commands, curriculum, deployment, observations, resets, scan
from rlcore_tasks.go2.config import Go2Cfg, make_config
from rlcore_tasks.go2.geometry import quat_rotate_inverse, wrap_to_pi, yaw_of
from rlcore_tasks.go2.rewards import REWARD_TERMS
from rlcore_tasks.go2.sim import JOINT_NAMES
from rlcore_tasks.go2.sim_interface import Simulator
from rlcore_tasks.go2.terrain import Terrain, scan_points

#: ``sim.backend`` choices: the module and class of each.
SIM_BACKENDS = {"rollout": ("rlcore_tasks.go2.sim", "Go2Sim"), "warp": ("rlcore_tasks.go2.sim_warp", "WarpSim")}


def simulator_class(backend: str) -> type[Simulator]:
    """The :class:`~rlcore_tasks.go2.sim_interface.Simulator` class of config ``sim.backend`` (imported on demand:
    the Warp backend's packages are an extra)."""
    if backend not in SIM_BACKENDS:
        raise ConfigError(f"go2.sim.backend: {backend!r}; use one of {sorted(SIM_BACKENDS)}")
    module, name = SIM_BACKENDS[backend]
    return getattr(importlib.import_module(module), name)


class Go2Env(VecEnv):
    """``num_envs`` Go2 robots learning to follow velocity commands.

    Args:
        num_envs: number of environments N.
        device: torch device of observations, rewards, the MDP state and the simulator's tensors ("cpu" or
            "cuda"); :class:`~rlcore_tasks.go2.sim.Go2Sim` computes on the CPU and converts at its boundary.
        seed: seeds the task's private generators (resets, commands, noise, terrain levels, variants).
        **overrides: nested settings merged into :class:`~rlcore_tasks.go2.config.Go2Cfg` (unknown keys are errors).
    """

    #: The simulator backend, called as ``sim_class(cfg, num_envs, terrain, rng, device)``; it must satisfy
    #: :class:`~rlcore_tasks.go2.sim_interface.Simulator`. ``None``: the config's ``sim.backend``.
    sim_class: type[Simulator] | None = None
    #: Width of the ``policy`` group (one frame), from :mod:`rlcore_tasks.go2.observations`.
    POLICY_SIZE = observations.POLICY_SIZE

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
        sim_class = self.sim_class or simulator_class(c.sim.backend)
        self.sim: Simulator = sim_class(c, n, self.terrain, np.random.default_rng(0 if seed is None else int(seed)),
                                             self.device)
        if c.rewards.mean_vel_tau <= 0:
            raise ConfigError(f"go2.rewards.mean_vel_tau: {c.rewards.mean_vel_tau} must be > 0 (the time constant of "
                              f"the running mean velocity, seconds)")
        self.weight_schedule = curriculum.check_weight_schedule(c.rewards.weight_schedule)
        weights = {**c.rewards.weights, **{name: c.rewards.weights.get(name, 0.0) for name in self.weight_schedule}}
        self.reward_terms = [(name, REWARD_TERMS[name], w * self.dt) for name, w in weights.items()
                             if w != 0 or name in self.weight_schedule]
        self._init_constants()
        self._init_buffers()
        self._reset_envs(torch.arange(n, device=self.device))
        self._refresh_state()
        self.last_dof_vel = self.dof_vel.clone()

    def reward_weight(self, name: str) -> float:
        """Term ``name``'s weight per second now: ``rewards.weights``, or its ``weight_schedule`` at the env's step
        counter."""
        return curriculum.reward_weight(self, name)

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
        scan.init_state(self)  # the height scan's errors (scan_offset, scan_lag, scan_poses)
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
        added base mass, motor strength, then the raw quantities of :data:`~rlcore_tasks.go2.randomization.PHYSICAL_TERMS`
        (call again after replacing the sim's variants)."""
        rows = [[1.0 if v.ground_friction is None else v.ground_friction, v.base_added_mass, v.motor_strength]
                for v in self.sim.physical]
        head = torch.tensor(rows, dtype=torch.float32, device=self.device)
        self.variant_params = torch.cat([head, self.sim.variant_features().to(self.device)], dim=1)

    @property
    def physics_failures(self) -> int:
        """Unstable env steps since construction (envs whose physics failed, summed over steps)."""
        return int(self._physics_failures)

    def randomization_progress(self) -> float:
        """How far the domain-randomisation curriculum is, in [0, 1] (1 without a curriculum)."""
        return curriculum.randomization_progress(self)

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
        scan.push_pose(self)
        final_obs = self._observe()

        env_ids = dones.nonzero(as_tuple=False).squeeze(-1)
        if env_ids.numel() > 0:
            self._reset_envs(env_ids)
            self._refresh_state()
        self._resample_commands(commands.due_on_timer(self))
        self._update_heading_commands()
        resets.push_robots(self)

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
        """Reset only ``env_ids`` (:func:`rlcore_tasks.go2.resets.reset_envs`; a subclass may change what a reset does)."""
        resets.reset_envs(self, env_ids)

    def _resample_commands(self, env_ids: torch.Tensor) -> None:
        commands.resample(self, env_ids)

    def _update_heading_commands(self) -> None:
        commands.update_heading(self)

    # ------------------------------------------------------------------ observations
    def observation_groups(self) -> dict[str, observations.ObsGroup]:
        """Every observation group as :mod:`rlcore_tasks.go2.observations` declares it for this env's config: the one
        source of both :meth:`get_observations` and the metadata's ``observation_groups``."""
        return observations.observation_groups(self.cfg_task)

    def height_scan_points(self) -> torch.Tensor:
        """World xy of every scan point, ``[N, H, W, 2]`` (grid in the base's yaw frame)."""
        return scan.world_points(self, self._scan_local, scan.base_pose(self))

    def _observe(self) -> TensorDict:
        o = self.cfg_task.obs
        groups = observations.observe(self, self.observation_groups())  # every group but the history
        policy = groups["policy"]
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
        """The exported policy's default integral loop on the command (``rlcore_tasks.go2.command_integral``):
        ``{"gain": [1/s], "limit": [m/s], "band": [m/s]}`` from ``commands.integral_gain`` / ``integral_limit`` /
        ``integral_band`` (gain 0: none)."""
        return commands.integral_loop(self.cfg_task)

    def export_module(self, policy, command_integral_gain: float | None = None,
                      command_integral_limit: float | None = None, command_integral_band: float | None = None,
                      command_integral_yaw_gain: float | None = None, command_integral_yaw_limit: float | None = None,
                      command_integral_yaw_band: float | None = None):
        """The graph to export for ``policy`` (optional method of the task protocol, :mod:`rlcore.env.task`): the
        policy with its integral loop on the command (:func:`rlcore_tasks.go2.command_integral.integral_for`; the
        task's default when the gain is None), or None for the policy alone."""
        from rlcore_tasks.go2.command_integral import integral_for

        return integral_for(policy, self, command_integral_gain, command_integral_limit, command_integral_band,
                            command_integral_yaw_gain, command_integral_yaw_limit, command_integral_yaw_band)

    def deployment_interface(self) -> dict:
        """How to run a policy of this task on a Go2, as plain JSON-able data (optional ``VecEnv`` method;
        :func:`rlcore_tasks.go2.deployment.deployment_interface`)."""
        return deployment.deployment_interface(self)

    # ------------------------------------------------------------------ rendering, checkpointing
    def render(self, width: int = 640, height: int = 480, env_id: int = 0) -> np.ndarray:
        """An RGB frame ``[H, W, 3]`` uint8 of env ``env_id`` from a camera following the robot.

        Needs an OpenGL context: on a machine without a display set ``MUJOCO_GL=egl`` (or ``osmesa``)
        before the first ``import mujoco``. ``go2.sim.render_quality = "fast"``: no multisampling or reflections
        (the floor, horizon and the robot's shadow stay: :func:`rlcore_tasks.go2.sim.add_scenery`)."""
        return self.sim.render(env_id, width, height, fast=self.cfg_task.sim.render_quality == "fast")

    STATE_TENSORS = checkpoint.STATE_TENSORS
    HISTORY_TENSORS = checkpoint.HISTORY_TENSORS
    LATER_STATE_FILL: ClassVar[dict[str, float]] = checkpoint.LATER_STATE_FILL

    def state_dict(self) -> dict:
        """Everything that decides the task's future given the actions, for an exact resume (tensors only;
        :func:`rlcore_tasks.go2.checkpoint.state_dict`)."""
        return checkpoint.state_dict(self)

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output; refuses a state from another task or env count."""
        checkpoint.load_state_dict(self, state)

    def continue_curriculum(self, state: dict) -> bool:
        """Start this env's curricula where a saved run left them (``state``: a checkpoint's ``env_state``) and
        reset every env; returns whether anything changed (nothing does for a state saved at step 0).

        A distillation student is trained on the robots its teacher ended on: the domain-randomisation progress
        (the step counter, so the whole robot pool is in play) and, on rough terrain, levels drawn from the
        teacher's level distribution. Without it the student's env restarts the curriculum on near-nominal robots
        and spends its first ``domain_rand.curriculum_steps`` steps where the deployed policy is least tested.
        The robot pool itself stays this env's own (drawn from its seed); :meth:`use_robot_pool` adopts a saved one.
        """
        return curriculum.continue_curriculum(self, state)

    def use_robot_pool(self, physical_variants: list[dict]) -> None:
        """Replace the pool of physical variants with a saved one (``state_dict()["physical_variants"]``, e.g. of a
        checkpoint), so an env built elsewhere drives the very robots a run was trained on. Envs keep their variant
        index until their next reset."""
        curriculum.use_robot_pool(self, physical_variants)

    def curriculum_state(self) -> dict:
        """Where this env's curricula stand now, for another env of the task to draw its robots from the same
        distribution (:meth:`set_curriculum`; an evaluation env follows its training env this way): the step
        counter (domain-randomisation progress and ``rewards.weight_schedule``), the terrain levels and the robot
        pool."""
        return curriculum.curriculum_state(self)

    def set_curriculum(self, state: dict) -> None:
        """Adopt another env's :meth:`curriculum_state` (of the same task, any env count): its step counter and robot
        pool, and, on rough terrain, levels drawn from its level distribution with this env's generator (so the
        draw is fixed given this env's generator state). Every env draws from it at its next reset (:meth:`reset`
        resets all); unlike :meth:`continue_curriculum` nothing is reset here."""
        curriculum.set_curriculum(self, state)

    def close(self) -> None:
        self.sim.close()


__all__ = ["JOINT_NAMES", "Go2Env", "quat_rotate_inverse", "wrap_to_pi", "yaw_of"]
