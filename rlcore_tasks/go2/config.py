"""Every setting of the Go2 task, as nested dataclasses with legged_gym-like defaults.

The Hydra task file (``conf/task/go2.yaml``) passes a nested dict of overrides; :func:`make_config`
merges it into these defaults and rejects an unknown key or a wrongly-typed value with its key path
(``go2.rewards.weights.feet_air_tme: unknown key; valid: ...``), so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlcore.env import ConfigError


@dataclass
class SimCfg:
    dt: float = 0.005  # physics step [s] (200 Hz)
    decimation: int = 4  # physics steps per control step (50 Hz control)
    # 10 solver iterations: the fewest with no physics failure over the randomisation range (joint damping up to
    # 3 with 4 iterations lets an unconverged contact impulse spin joints past 100 rad/s; bench/physics_settings.py
    # measures it: 10-20 % fewer raw steps/s than 4 iterations; implicitfast, elliptic cones and dt 2.5 ms do not help).
    solver_iterations: int = 10
    solver_ls_iterations: int = 6
    integrator: str = "euler"  # euler | implicitfast | implicit | rk4 (MuJoCo's option/integrator)
    cone: str = "pyramidal"  # pyramidal | elliptic friction cone
    # Friction-to-normal impedance ratio: a high one makes friction nearly hard (as in MuJoCo Menagerie's Go2):
    # with the default of 1 the soft pyramidal friction lets standing feet creep outward (the splits).
    impratio: float = 100.0
    threads: int | None = None  # MuJoCo rollout threads (None: all available cores)
    # The physics engine (rlcore_tasks/go2/sim_interface.py): "rollout" (MuJoCo's threaded rollout on the CPU, float64)
    # or "warp" (MuJoCo Warp on the task's device, float32; pip install 'rlcore[warp]'; docs/go2.md: "Backends").
    backend: str = "rollout"
    # MuJoCo Warp's buffers per world: contacts and constraint rows (None: MuJoCo Warp's defaults for the model);
    # raise them where it warns of an overflow (rough terrain with many contacts).
    warp_nconmax: int | None = None
    warp_njmax: int | None = None
    # Frames of render() (videos): "fast" draws without multisampling or reflections (floor, sky and the robot's
    # shadow as in "full"), ~50 ms a 640x480 frame in software OpenGL (a CPU machine; 17 ms before the shadow and the
    # floor's texture were drawn) against ~110 ms for "full" (4x multisampling), which keeps runner.video_interval
    # cheap; a GPU draws "full" at no cost.
    render_quality: str = "fast"


@dataclass
class ControlCfg:
    kp: float = 20.0  # PD stiffness [N m / rad]
    kd: float = 0.5  # PD damping [N m s / rad]
    action_scale: float = 0.25  # joint target = default + action_scale * action
    clip_actions: float = 100.0
    # Default standing pose (unitree_rl_gym go2): hip, thigh, calf per leg FL, FR, RL, RR.
    default_joint_pos: list[float] = field(
        default_factory=lambda: [0.1, 0.8, -1.5, -0.1, 0.8, -1.5, 0.1, 1.0, -1.5, -0.1, 1.0, -1.5]
    )


@dataclass
class InitCfg:
    base_height: float = 0.34  # spawn height of the base [m]: feet just above the ground in the default pose
    joint_pos_scale: list[float] = field(default_factory=lambda: [0.8, 1.2])  # default pose x U(lo, hi)
    base_lin_vel: float = 0.5  # |vx|, |vy| <= this at reset [m/s]
    base_ang_vel: float = 0.5  # |wx|, |wy|, |wz| <= this at reset [rad/s]
    random_yaw: bool = True


@dataclass
class CommandsCfg:
    resampling_time: float = 10.0  # [s]
    heading_command: bool = True  # yaw rate from a heading error instead of sampled directly
    heading_stiffness: float = 0.5  # yaw rate = clip(stiffness * heading error, ang_vel_yaw range)
    # With heading_command: the fraction of resampled commands that follow a heading target; the others hold their
    # sampled yaw rate until the next resample. Under heading control a yaw rate near the range's end lasts only
    # while the heading error is large (it decays as the robot turns), so turning at a held rate (a probe command
    # of rlcore.robustness, and what a joystick asks) is rare in training. Isaac Lab: rel_heading_envs.
    # Measured (seed 1, task=go2, 370 iterations, 2026-12-04): 0.5 made the robustness grid worse: nominal_err
    # 0.077-0.098 over checkpoints 300-369 against 0.067-0.077 for heading control re-run the same day. task=go2 sets
    # 0.75 since 2026-12-07 (conf/task/go2.yaml; docs/results/2026-12-07-go2-yaw-commands.md: with the yaw axis of
    # the integral loop every variant then reaches 0.92-1.04 of a held yaw command).
    heading_fraction: float = 1.0
    lin_vel_x: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    lin_vel_y: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    ang_vel_yaw: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    heading: list[float] = field(default_factory=lambda: [-3.14159, 3.14159])
    zero_below: float = 0.2  # xy commands with a norm under this become 0 (standing still is a skill too)
    # The exported policy's integral loop on the planar command (rlcore_tasks.go2.command_integral; training does not
    # use it): the policy is shown cmd + u, u += integral_gain * dt * (cmd - its own velocity estimate), |u| <=
    # integral_limit, so a robot that differs from the training pool's average still reaches the command. 0: the
    # policy alone. Measured (rlcore.robustness, task=go2 teachers of seeds 1 / 2, iteration 369, README: "Integral
    # action in the exported graph"): with feet_air_time_target 0.2 (the default) nominal / mean / worst 0.085 / 0.080
    # / 0.107 and 0.054 / 0.060 / 0.094 alone, 0.047 / 0.055 / 0.078 and 0.038 / 0.045 / 0.069 with gain 2 and limit
    # 0.15, no falls (limit 0.3: a fall on seed 1's worst plausible robot); gain 4 and more: falls on harsh robots.
    integral_gain: float = 2.0  # [1/s]
    integral_limit: float = 0.15  # [m/s] per axis
    # [m/s] an axis integrates only while |cmd - estimate| < integral_band (integral separation, the loop's anti-windup;
    # 0: always). Measured: README, "Integral action in the exported graph".
    integral_band: float = 0.2
    # The same loop on the yaw-rate command, closed on the gyro (the policy's base_ang_vel z): cmd_yaw - gyro_z is
    # integrated (|u_yaw| <= integral_yaw_limit, only while under integral_yaw_band), so a robot that turns slower or
    # faster than commanded is trimmed onto it. 0: the planar loop only. Measured (rlcore.robustness, task=go2 seed 1,
    # iteration 369; docs/results/2026-12-07-go2-yaw-commands.md): reached/commanded yaw rate over the held yaw cases
    # nominal 1.02-1.05 and 0.66 at worst without it, 1.00 and 0.84 with gain 2 and limit / band 0.3, 1.00 and 0.92
    # with limit / band 0.5; no falls, also under action noise 0.05 on the harshest robots.
    integral_yaw_gain: float = 2.0  # [1/s]
    integral_yaw_limit: float = 0.5  # [rad/s]
    integral_yaw_band: float = 0.5  # [rad/s]


@dataclass
class RewardsCfg:
    # Each term is a named function in rlcore_tasks/go2/rewards.py; weight 0 disables it. Weights are per
    # second: the task multiplies them by the control period, as legged_gym does.
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "tracking_lin_vel": 1.0,
            "tracking_lin_vel_fine": 0.0,
            "tracking_lin_vel_mean": 0.0,
            "tracking_lin_vel_abs": 0.0,
            "lin_vel_sway": 0.0,
            "tracking_ang_vel": 0.5,
            "lin_vel_z": -2.0,
            "ang_vel_xy": -0.05,
            "orientation": -1.0,
            "base_height": -10.0,
            "torques": -1.0e-4,
            "dof_vel": 0.0,
            "dof_acc": -2.5e-7,
            "action_rate": -0.01,
            "feet_air_time": 1.0,
            "collision": -1.0,
            "dof_pos_limits": -2.0,
            "termination": 0.0,
        }
    )
    # Weights that change during training: {term: [[env_step, weight], ...]}, piecewise linear in the env's step
    # counter (env steps as in domain_rand.curriculum_steps; one learning iteration is runner.num_steps_per_env = 24
    # of them), the weight above before the first point, the last value after the last. E.g.
    # {tracking_lin_vel_fine: [[2400, 0.0], [4800, 1.0]]} phases the narrow tracking term in over iterations
    # 100-200. A resumed run continues the schedule (the counter is part of the env state).
    weight_schedule: dict[str, list[list[float]]] = field(default_factory=dict)
    tracking_sigma: float = 0.25
    tracking_sigma_fine: float = 0.05  # kernel of tracking_lin_vel_fine [m^2/s^2]
    # tracking_lin_vel_mean compares the command with the base velocity averaged over about a gait cycle (an
    # exponential moving average, time constant mean_vel_tau): it grades the velocity a robot reaches, not the
    # sway of each step about it, so its kernel can be narrow. Weight 0 (off): at 1.0 (task=go2 seed 1) the reached
    # velocity was no closer (README: "Sway and bias") and the robot stopped turning right in place.
    tracking_sigma_mean: float = 0.01  # [m^2/s^2]
    mean_vel_tau: float = 0.5  # [s]
    # tracking_lin_vel_abs (weight 0, off) penalises the planar error itself, whose slope does not vanish near 0. At
    # -1.0 (task=go2 seed 1, 370 iterations) the training robots were tracked closer (bench/noise_gap.py --robots
    # training: pool-mean error 0.018 against 0.040) but the nominal robot worse (nominal_err 0.078 against 0.062).
    base_height_target: float = 0.30
    soft_dof_pos_limit: float = 0.9  # fraction of the joint range before the limit penalty starts
    feet_air_time_target: float = 0.3  # [s] (legged_gym: 0.5; shorter steps suit the small Go2 and learn faster)
    # The air-time term pays only while the robot is asked to move: a planar command over 0.1 m/s (legged_gym) or,
    # with this on, a yaw-rate command over 0.1 rad/s too. Off, a turn in place earns nothing for stepping, and a
    # policy can settle on standing still under a held turn (rlcore.robustness: "not followed"). Measured (task=go2,
    # 370 iterations): seed 2 turns both ways and ends at nominal_err 0.072 (default 0.079), seed 1 gets worse
    # (0.081 against 0.067, falls at some checkpoints), so the default stays off (README: 'From training to a
    # deployable policy').
    feet_air_time_on_turns: bool = False
    contact_threshold: float = 1.0  # [N] normal force that counts as contact
    only_positive_rewards: bool = True  # clip the total at 0 (legged_gym): avoids learning to die early


@dataclass
class TerminationCfg:
    base_contact: bool = True
    max_tilt: float = 1.0  # [rad] roll or pitch magnitude that ends an episode
    min_base_height: float = 0.12  # [m] above the terrain under the base


@dataclass
class ObsCfg:
    lin_vel_scale: float = 2.0
    ang_vel_scale: float = 0.25
    dof_pos_scale: float = 1.0
    dof_vel_scale: float = 0.05
    command_scale: list[float] = field(default_factory=lambda: [2.0, 2.0, 0.25])
    height_scale: float = 5.0
    clip: float = 100.0
    add_noise: bool = True
    noise_level: float = 1.0
    # Uniform noise amplitudes, in physical units before scaling.
    noise_ang_vel: float = 0.2
    noise_gravity: float = 0.05
    noise_dof_pos: float = 0.01
    noise_dof_vel: float = 1.5
    noise_height: float = 0.1
    # Frames of the ``policy`` group kept in the ``policy_history`` group ([N, history_length * 45], newest first:
    # the frames the policy saw at the previous history_length steps; a new episode starts with its first frame
    # repeated). 0: no such group. A blind actor that reads it can tell from its recent motion how this robot
    # responds (damping, latency, gains) and how fast it is going, which one frame does not show.
    history_length: int = 0
    # height_scan grid around the base (x forward, y left, in the yaw frame)
    scan_x: list[float] = field(default_factory=lambda: [-0.8, 0.8])
    scan_y: list[float] = field(default_factory=lambda: [-0.5, 0.5])
    scan_resolution: float = 0.1


@dataclass
class DomainRandCfg:
    """What the robot may differ in from the nominal model, each on/off with its range.

    Physical parameters are drawn per *variant*: ``num_variants`` compiled MuJoCo models made once at start-up
    (:func:`rlcore_tasks.go2.randomization.sample_variant`); every env is assigned a random variant at each reset, so
    it simulates one robot per episode. Sensor biases are drawn per env at each reset. Sources of the ranges:
    ``docs/go2_facts.md`` (MuJoCo Menagerie's Go2 = MG, unitree_rl_gym = RG, legged_gym), Isaac Lab's velocity task,
    and the robustness grid of ``rlcore.robustness`` (rlcore_tasks/go2/variants.py), which every range covers.
    """

    num_variants: int = 64  # physical variants (MjModel copies) envs are assigned to at reset
    # Curriculum over this many env steps (0: none). The pool is then graded: variant i is drawn at strength
    # (i + 1) / num_variants (0 = the nominal robot, 1 = the full ranges below; the last variants reach the
    # extremes), and a reset picks among the first ceil(num_variants * progress) variants, progress = env steps /
    # curriculum_steps; sensor biases grow with progress too. A fresh policy first learns to walk on near-nominal
    # robots (the full ranges from the start roughly halve the early tracking progress, bench/time_to_walk.py);
    # after the curriculum every variant is in play, half of them milder than the full ranges.
    curriculum_steps: int = 2400
    # Fraction of the pool (its last variants: with the curriculum, the strongest) drawn as *loaded* robots: every
    # parameter that makes the robot slower or weaker from the harsh half of its range at once (more joint
    # damping, friction, armature and latency, heavier legs and base, softer condim-6 feet, lower kp and motor
    # strength; rlcore_tasks.go2.randomization.sample_variant). Independent draws almost never combine them (all at once:
    # about 1 draw in 500), yet such a robot (rlcore.robustness's worst_plausible) is where blind policies fall.
    loaded_fraction: float = 0.0
    # Fraction of the pool (its first variants: with the curriculum, those a run starts on) that are the nominal robot
    # itself. A blind policy tracks the pool's average robot; the nominal one (no joint damping or friction, light
    # legs) is the pool's light corner, where it overshoots its commands (rlcore.robustness's nominal_err) unless
    # such robots are common enough in training to be told apart. Measured at 0.25 (task=go2, 370 iterations): seed 1
    # nominal_err 0.048 (default 0.062), seed 2 0.088 with a fall (default 0.068), so it is off (README).
    nominal_fraction: float = 0.0
    # Ground friction (sliding). legged_gym / RG: [0.5, 1.25]; widened to the grid's 0.4.
    randomize_friction: bool = True
    friction_range: list[float] = field(default_factory=lambda: [0.4, 1.25])
    # Payload at the base's CoM [kg]. legged_gym: [-1, 1]; the grid's +3 kg (20 % of the 15 kg robot).
    randomize_base_mass: bool = True
    added_mass_range: list[float] = field(default_factory=lambda: [-1.0, 3.0])
    # Base CoM shift per axis, +-range [m]. Isaac Lab velocity task (base_com): x, y +-0.05, z +-0.01.
    randomize_base_com: bool = True
    base_com_offset_range: list[float] = field(default_factory=lambda: [0.05, 0.05, 0.01])
    # Mass (and inertia) factor of each leg link, drawn per link. Isaac Lab: 0.8-1.2 scale on bodies; the
    # grid's legs +25 % (MG's calf with foot is 24 % heavier than RG's calf + foot: docs/go2_facts.md section 2).
    randomize_leg_mass: bool = True
    leg_mass_scale_range: list[float] = field(default_factory=lambda: [0.85, 1.3])
    # Factor on kp and kd together (legged_gym-style motor strength).
    randomize_motor_strength: bool = True
    motor_strength_range: list[float] = field(default_factory=lambda: [0.9, 1.1])
    # Separate factors on kp and on kd (Isaac Lab randomize_actuator_gains style); the grid's kp +-25 %.
    randomize_pd_gains: bool = True
    kp_scale_range: list[float] = field(default_factory=lambda: [0.75, 1.25])
    kd_scale_range: list[float] = field(default_factory=lambda: [0.75, 1.25])
    # Passive joint damping [N m s/rad]. MG: 2; RG / the task: 0; the grid: up to 3.
    randomize_joint_damping: bool = True
    joint_damping_range: list[float] = field(default_factory=lambda: [0.0, 3.0])
    # Joint Coulomb friction [N m]. MG: 0.2; MG-mjx / RG: 0; the grid: up to 0.4.
    randomize_joint_frictionloss: bool = True
    joint_frictionloss_range: list[float] = field(default_factory=lambda: [0.0, 0.4])
    # Reflected rotor inertia [kg m^2]. MG: 0.01 (the task's nominal); RG: 0; a factor of 2 either way.
    randomize_armature: bool = True
    armature_range: list[float] = field(default_factory=lambda: [0.005, 0.02])
    # Actuation latency [s], drawn in whole physics steps. The grid: 10 and 20 ms; real Go2 stacks report
    # 10-20 ms from observation to torque.
    randomize_latency: bool = True
    latency_range_s: list[float] = field(default_factory=lambda: [0.0, 0.02])
    # Foot contact softness: solimp from MuJoCo's default (0.9, 0.95, 0.001) at softness 0 to MG's soft foot
    # (0.015, 1, 0.03 with the grid's width) at 1; solref time constant from MuJoCo's 0.02 s up.
    randomize_foot_contact: bool = True
    foot_softness_range: list[float] = field(default_factory=lambda: [0.0, 1.0])
    foot_solref_timeconst_range: list[float] = field(default_factory=lambda: [0.02, 0.03])
    # Foot contact dimension: 3 (the task) or 6 (MG: torsional and rolling friction), drawn with equal odds.
    randomize_foot_condim: bool = True
    foot_condim_choices: list[int] = field(default_factory=lambda: [3, 6])
    # Per-episode sensor biases (constant within an episode, redrawn at reset; uniform +-amplitude), on top of
    # the per-step noise of ObsCfg and, like it, applied only with obs.add_noise: gyro bias [rad/s] (MEMS gyro
    # after calibration), gravity-vector bias (IMU mounting tilt, ~1 degree), joint encoder offsets [rad].
    randomize_imu_bias: bool = True
    imu_bias_ang_vel: float = 0.05
    imu_bias_gravity: float = 0.02
    randomize_encoder_bias: bool = True
    encoder_bias: float = 0.02
    # Height-scan errors of a real elevation map (rlcore_tasks/go2/scan.py; rough terrain, with obs.add_noise like
    # the sensor biases; the per-cell, per-step noise is obs.noise_height): a per-episode vertical offset U(-a, a)
    # [m] (the map drifting against the base height; grows with the randomisation progress like the biases); cells
    # missing at each step with this probability, fed as the missing-cell value (0: ground at the nominal base
    # height, the deployment metadata's missing_value); and a lag: the map is the one seen from the pose of k
    # control steps ago, k drawn per episode from 0..scan_max_lag.
    randomize_height_scan: bool = True
    scan_offset: float = 0.03
    scan_missing_fraction: float = 0.05
    scan_max_lag: int = 2
    push_robots: bool = True
    push_interval_s: float = 15.0
    max_push_vel_xy: float = 1.0


@dataclass
class TerrainCfg:
    """The ground: a plane, legged_gym-style rough terrain with a level curriculum, or one fixed test course.

    ``rough`` is a grid of square tiles, ``num_levels`` rows of difficulty along x by ``num_cols`` columns along y
    whose kinds follow ``proportions`` (:data:`rlcore_tasks.go2.terrain.TILE_KINDS`). Difficulty d = level /
    (num_levels - 1) sets each kind's size linearly from its easiest to its hardest value below: slope angle
    0..``max_slope_deg``; stair step ``min_step_height``..``max_step_height``; obstacle height
    ``min_obstacle_height``..``max_obstacle_height``; bump amplitude up to ``max_roughness``. Every tile keeps a flat
    spawn platform at its centre. Generation is numpy only, seeded by ``seed``: the same settings give the same
    field, bit for bit. ``course`` is one straight evaluation course of ``bench/rough_eval.py`` (see
    :func:`rlcore_tasks.go2.terrain.course_heights`).
    """

    type: str = "flat"  # flat | rough | course
    # rough: a grid of tiles, one row per difficulty level, columns cycling through the kinds below.
    tile_size: float = 8.0  # [m]
    num_levels: int = 10
    num_cols: int = 10
    horizontal_scale: float = 0.1  # [m] per height-field cell
    # Share of the columns per kind (normalised). Columns of "slope", "rough_slope" alternate between a hill (walk
    # out from the spawn platform: downhill) and a pit (uphill); stairs_up climbs and stairs_down descends walking
    # out from the platform.
    proportions: dict[str, float] = field(
        default_factory=lambda: {"slope": 0.2, "rough_slope": 0.1, "stairs_up": 0.2, "stairs_down": 0.2,
                                 "random": 0.1, "discrete": 0.2}
    )
    max_slope_deg: float = 25.0  # slope angle at the hardest level [deg] (0 at level 0)
    max_roughness: float = 0.06  # [m] amplitude of the random bumps at the hardest level
    min_step_height: float = 0.05  # [m] stair step at level 0
    max_step_height: float = 0.18  # [m] stair step at the hardest level
    step_width: float = 0.3  # [m]
    min_obstacle_height: float = 0.03  # [m] discrete obstacles (raised or sunk boxes) at level 0
    max_obstacle_height: float = 0.15  # [m] ... at the hardest level
    obstacle_size: list[float] = field(default_factory=lambda: [0.4, 1.0])  # box side range [m]
    num_obstacles: int = 24  # per tile
    platform_size: float = 2.0  # side of the flat spawn platform at each tile centre [m]
    # flat ground (height 0) around the grid [m], so that a robot walking off an edge tile still has ground under it
    # and its scan reads the ground MuJoCo collides with; tile (level, col) spans x = border + level * tile_size...
    border_size: float = 3.0
    curriculum: bool = True
    max_init_level: int = 3
    seed: int = 0
    # course: "flat", "rough", "stairs_up_<h>cm", "stairs_down_<h>cm" or "slope_<a>deg" (e.g. stairs_up_13cm)
    course: str = "flat"


@dataclass
class Go2Cfg:
    episode_length_s: float = 20.0
    sim: SimCfg = field(default_factory=SimCfg)
    control: ControlCfg = field(default_factory=ControlCfg)
    init: InitCfg = field(default_factory=InitCfg)
    commands: CommandsCfg = field(default_factory=CommandsCfg)
    rewards: RewardsCfg = field(default_factory=RewardsCfg)
    termination: TerminationCfg = field(default_factory=TerminationCfg)
    obs: ObsCfg = field(default_factory=ObsCfg)
    domain_rand: DomainRandCfg = field(default_factory=DomainRandCfg)
    terrain: TerrainCfg = field(default_factory=TerrainCfg)


def _coerce(value: Any, default: Any, path: str) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        if isinstance(default, int) and not float(value).is_integer():
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return type(default)(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if isinstance(default, list):
        if not isinstance(value, (list, tuple)) or len(value) != len(default):
            raise ConfigError(f"{path}: expected a list of {len(default)} numbers, got {value!r}")
        return [_coerce(v, d, f"{path}[{i}]") for i, (v, d) in enumerate(zip(value, default))]
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        if not default:  # a free-form mapping (rewards.weight_schedule): its user checks the entries
            return dict(value)
        unknown = set(value) - set(default)
        if unknown:
            raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; valid: {sorted(default)}")
        return {**default, **{k: _coerce(v, default[k], f"{path}.{k}") for k, v in value.items()}}
    return value  # None-able settings (threads) take what they are given


def _merge(obj: Any, overrides: dict, path: str) -> Any:
    names = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in overrides.items():
        if key not in names:
            raise ConfigError(f"{path}.{key}: unknown key; valid: {sorted(names)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}.{key}: expected a mapping, got {value!r}")
            _merge(current, value, f"{path}.{key}")
        elif current is None:
            setattr(obj, key, value)
        else:
            setattr(obj, key, _coerce(value, current, f"{path}.{key}"))
    return obj


def no_randomization() -> dict:
    """``domain_rand`` overrides that turn every randomisation (and the pushes and the curriculum) off: the nominal
    robot."""
    return {**{f.name: False for f in dataclasses.fields(DomainRandCfg) if f.name.startswith("randomize_")},
            "push_robots": False, "curriculum_steps": 0}


def held_commands() -> dict:
    """``commands`` overrides that keep each env's command as it is set (no heading control, no resampling): for
    closed loops that write ``env.commands`` themselves (robustness grid, benchmarks)."""
    return {"heading_command": False, "resampling_time": 1.0e9}


def make_config(overrides: dict | None = None) -> Go2Cfg:
    """Defaults merged with a nested dict of ``overrides`` (checked key by key)."""
    return _merge(Go2Cfg(), dict(overrides or {}), "go2")
