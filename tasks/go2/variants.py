"""Named physical variants of the Go2 (MjSpec edits of the task's scene) and delayed actuation.

A :class:`Variant` says how a model differs from the task's nominal robot: passive joint damping and Coulomb
friction, softer or 6-D foot contacts, heavier legs or base, weaker or stiffer PD gains, ground friction, and
an actuation latency. :func:`variant_model` compiles it from the task's own MJCF scene
(:func:`tasks.go2.sim.build_spec`); :class:`DelayedGo2Sim` applies each env's latency (whole physics steps)
and flags physics steps MuJoCo could not integrate. ``ROBUSTNESS_GRID`` is the fixed grid of
``python -m rlcore.robustness``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from rlcore.utils.export import obs_layout
from tasks.go2.config import Go2Cfg
from tasks.go2.env import Go2Env
from tasks.go2.sim import JOINT_NAMES, LEGS, Go2Sim, build_spec
from tasks.go2.terrain import Terrain

#: Bodies whose mass and inertia ``leg_mass_scale`` scales (hip, thigh, calf and foot of each leg).
LEG_BODIES = tuple(f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh", "calf", "foot"))
#: The foot collision spheres.
FOOT_GEOMS = tuple(f"{leg}_foot" for leg in LEGS)


@dataclass(frozen=True)
class Variant:
    """One physical variant of the Go2; ``None`` / neutral values keep the task's nominal model.

    Attributes:
        name: short label (table rows, ``variants=`` selection).
        joint_damping: passive damping of the 12 leg joints [N m s / rad] (task: 0).
        joint_frictionloss: Coulomb friction of the 12 leg joints [N m] (task: 0).
        foot_solimp: contact impedance ``(dmin, dmax, width)`` of the foot spheres (task: MuJoCo's default).
        foot_condim: contact dimension of the foot spheres (task: 3; 6 adds torsional and rolling friction).
        leg_mass_scale: factor on the mass and inertia of every leg body (a uniformly denser leg).
        base_added_mass: mass added to the base [kg] (a payload at its centre of mass).
        kp_scale: factor on the PD stiffness kp (kd unchanged).
        latency_s: delay between the policy's target and the actuators [s]; a whole number of physics steps.
        ground_friction: sliding friction of the ground (task: 1.0).
    """

    name: str
    joint_damping: float | None = None
    joint_frictionloss: float | None = None
    foot_solimp: tuple[float, float, float] | None = None
    foot_condim: int | None = None
    leg_mass_scale: float = 1.0
    base_added_mass: float = 0.0
    kp_scale: float = 1.0
    latency_s: float = 0.0
    ground_friction: float | None = None


SOFT_FEET = (0.015, 1.0, 0.03)

#: [m/s or rad/s] any qvel entry above this is a physics failure, not motion (Go2 joints: <= 30 rad/s).
MAX_SPEED = 100.0

#: The grid of ``rlcore.robustness``. "worst_plausible" combines what an independent model of the Go2 differs
#: in (MuJoCo Menagerie's joint damping 2 and friction 0.2, soft condim-6 feet, heavier legs) with a 10 ms
#: latency and a 3 kg payload.
ROBUSTNESS_GRID: tuple[Variant, ...] = (
    Variant("nominal"),
    Variant("damping_1", joint_damping=1.0),
    Variant("damping_2", joint_damping=2.0),
    Variant("damping_3", joint_damping=3.0),
    Variant("frictionloss_0.2", joint_frictionloss=0.2),
    Variant("frictionloss_0.4", joint_frictionloss=0.4),
    Variant("soft_feet", foot_solimp=SOFT_FEET),
    Variant("condim6_feet", foot_condim=6),
    Variant("legs_+25%", leg_mass_scale=1.25),
    Variant("kp_-25%", kp_scale=0.75),
    Variant("kp_+25%", kp_scale=1.25),
    Variant("latency_10ms", latency_s=0.010),
    Variant("latency_20ms", latency_s=0.020),
    Variant("base_+3kg", base_added_mass=3.0),
    Variant("ground_friction_0.4", ground_friction=0.4),
    Variant("ground_friction_1.2", ground_friction=1.2),
    Variant("worst_plausible", joint_damping=2.0, joint_frictionloss=0.2, foot_solimp=SOFT_FEET, foot_condim=6,
            leg_mass_scale=1.25, latency_s=0.010, base_added_mass=3.0),
)


def latency_steps(variant: Variant, physics_dt: float) -> int:
    """The variant's latency in physics steps; a latency that is not a whole number of steps is an error."""
    steps = variant.latency_s / physics_dt
    if steps < 0 or not math.isclose(steps, round(steps), abs_tol=1e-6):
        raise ValueError(f"variant {variant.name}: latency {variant.latency_s} s is not a whole number of "
                         f"{physics_dt} s physics steps")
    return int(round(steps))


def edit_spec(spec: mujoco.MjSpec, variant: Variant, kp: float, kd: float) -> mujoco.MjSpec:
    """Apply ``variant`` to the task's scene ``spec`` in place (PD gains set to ``kp * kp_scale``, ``kd``)."""
    v = variant
    for name in JOINT_NAMES:
        joint = spec.joint(name)
        if v.joint_damping is not None:
            joint.damping = [float(v.joint_damping), *list(joint.damping)[1:]]  # linear term of the damping
        if v.joint_frictionloss is not None:
            joint.frictionloss = float(v.joint_frictionloss)
    for name in FOOT_GEOMS:
        geom = spec.geom(name)
        if v.foot_solimp is not None:
            geom.solimp = [*v.foot_solimp, *list(geom.solimp)[3:]]  # (dmin, dmax, width); midpoint, power kept
        if v.foot_condim is not None:
            geom.condim = int(v.foot_condim)
    for name in LEG_BODIES:
        body = spec.body(name)
        body.mass *= v.leg_mass_scale
        if body.fullinertia[0] == body.fullinertia[0]:  # given as a full tensor (NaN when given as diagonal)
            body.fullinertia = [x * v.leg_mass_scale for x in body.fullinertia]
        else:
            body.inertia = [x * v.leg_mass_scale for x in body.inertia]
    spec.body("base").mass += v.base_added_mass
    if v.ground_friction is not None:
        ground = spec.geom("ground")
        ground.friction = [float(v.ground_friction), *list(ground.friction)[1:]]
    # position actuators: force = gain * ctrl + bias1 * q + bias2 * qdot
    for actuator in spec.actuators:
        actuator.gainprm[0] = kp * v.kp_scale
        actuator.biasprm[1] = -kp * v.kp_scale
        actuator.biasprm[2] = -kd
    return spec


def variant_model(cfg: Go2Cfg, terrain: Terrain, variant: Variant, kp: float, kd: float) -> mujoco.MjModel:
    """The task's scene (``cfg``'s physics settings, ``terrain``) with ``variant`` applied, compiled."""
    return edit_spec(build_spec(cfg, terrain), variant, kp, kd).compile()


class DelayedGo2Sim(Go2Sim):
    """:class:`~tasks.go2.sim.Go2Sim` whose PD targets reach the actuators late, per env, and that flags failures.

    With a latency of ``k`` physics steps, the target given at control step ``t`` is applied from physics step
    ``t * decimation + k`` on; until then the previous targets stay applied (an env's first target after it
    was (re)assigned a variant counts as given since ever).

    Attributes:
        latency: ``[N]`` int, each env's latency in physics steps (0: :class:`Go2Sim`'s behaviour).
        unstable: ``[N]`` bool, set by the last ``step`` where the physics failed at any of its physics steps:
            MuJoCo could not integrate (it then resets that env to the model's initial state, which shows as
            the clock jumping back), the state is not finite, or a speed exceeds ``MAX_SPEED`` (no Go2 moves
            that fast; the first sign of a diverging solver).
    """

    def __init__(self, cfg: Go2Cfg, num_envs: int, terrain: Terrain, rng: np.random.Generator) -> None:
        super().__init__(cfg, num_envs, terrain, rng)
        self.latency = np.zeros(num_envs, dtype=np.int64)
        self.unstable = np.zeros(num_envs, dtype=bool)
        self._history = np.zeros((num_envs, 1, self.model.nu))  # [N, H, 12]: targets of this and earlier steps
        self._fresh = np.ones(num_envs, dtype=bool)
        start = mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS)
        self._qvel_cols = slice(start, start + self.model.nv)

    def set_latency(self, env_ids: np.ndarray, steps: np.ndarray) -> None:
        """Give envs ``env_ids`` a latency of ``steps`` physics steps each."""
        self.latency[env_ids] = steps
        depth = 1 + int(np.ceil(self.latency.max() / self.decimation))
        if depth > self._history.shape[1]:
            pad = np.repeat(self._history[:, -1:], depth - self._history.shape[1], axis=1)
            self._history = np.concatenate([self._history, pad], axis=1)

    def set_variants(self, env_ids: np.ndarray, variants: np.ndarray) -> None:
        super().set_variants(env_ids, variants)
        self._fresh[env_ids] = True

    def delayed_targets(self, joint_targets: np.ndarray) -> np.ndarray:
        """Record this control step's targets ``[N, 12]``; return the targets per physics step ``[N, decimation, 12]``.

        Physics step ``j`` of this control step applies the target given ``ceil((latency - j) / decimation)``
        control steps ago (0: this one).
        """
        self._history = np.roll(self._history, 1, axis=1)
        self._history[:, 0] = joint_targets
        fresh = self._fresh
        if fresh.any():
            self._history[fresh] = joint_targets[fresh, None, :]
            self._fresh[:] = False
        j = np.arange(self.decimation)
        back = np.maximum(0, -((j[None, :] - self.latency[:, None]) // self.decimation))  # ceil((k - j) / D)
        return self._history[np.arange(self.num_envs)[:, None], back]

    def step(self, joint_targets: np.ndarray) -> None:
        clock = self.state[:, 0].copy()  # mjSTATE_FULLPHYSICS starts with the time
        super().step(self.delayed_targets(joint_targets))
        expected = clock + self.decimation * self.model.opt.timestep
        self.unstable = ~np.isclose(self.state[:, 0], expected, rtol=0, atol=1e-9)
        self.unstable |= ~np.isfinite(self._state_out).all(axis=(1, 2))
        speeds = np.abs(self._state_out[:, :, self._qvel_cols]).max(axis=(1, 2))
        self.unstable |= ~(speeds <= MAX_SPEED)


def describe(variant: Variant) -> str:
    """The variant's changes from the nominal model, e.g. ``joint_damping=2.0, latency_s=0.01``."""
    changed = [f"{f.name}={getattr(variant, f.name)}" for f in dataclasses.fields(variant)
               if f.name != "name" and getattr(variant, f.name) != f.default]
    return ", ".join(changed) or "the task's model"


# ============================================================================ an env of given variants
class Go2VariantEnv(Go2Env):
    """A :class:`~tasks.go2.env.Go2Env` whose envs simulate given :class:`Variant` s (one compiled model each,
    latency per env), for closed-loop checks of a policy on several robots at once.

    Build it with :meth:`from_interface` to reproduce the actuation and observations an exported policy was
    trained with; then :meth:`assign_variants`. The privileged group reports a variant's ground friction,
    added base mass and ``kp_scale`` (as motor strength).
    """

    sim_class = DelayedGo2Sim

    #: Interface entries that must be identical in the policy's file and in the env built from it.
    CHECKED = ("joint_names", "default_joint_pos", "kp", "kd", "torque_limits", "action_scale", "action_clip",
               "physics_dt", "decimation", "solver")

    @classmethod
    def from_interface(cls, meta: dict, num_envs: int, episode_s: float, threads: int | None = None,
                       solver_iterations: int | None = None, device: str = "cpu") -> Go2VariantEnv:
        """An env with the gains, timing, solver and observation scales of an exported policy's interface ``meta``
        (:func:`rlcore.utils.export.read_onnx_interface`) and none of the task's randomness: no observation
        noise, pushes or domain randomisation, the default pose at spawn, fixed commands, episodes of
        ``episode_s``. ``solver_iterations`` replaces the file's (e.g. a converged solver for stiff variants).

        Raises:
            ValueError: ``meta`` describes something this task does not compute (another robot, a different
                observation layout, non-uniform gains); the message says what differs.
        """
        overrides = overrides_from_interface(meta, episode_s, threads)
        if solver_iterations is not None:
            overrides["sim"]["solver_iterations"] = int(solver_iterations)
        env = cls(num_envs=num_envs, device=device, seed=0, **overrides)
        mine = env.deployment_interface()
        for key in cls.CHECKED:
            if key == "solver" and solver_iterations is not None:
                mine = {**mine, key: {**mine[key], "iterations": meta[key].get("iterations")}}
            if key in meta and meta[key] != mine[key]:
                env.close()
                raise ValueError(f"its {key} {meta[key]} is not what this rlcore's Go2 task does ({mine[key]})")
        fields = ("group", "name", "start", "stop", "scale", "offset")
        layout = obs_layout(list(meta["obs_groups"]), mine["observation_groups"]) or []
        theirs = [{k: t.get(k) for k in fields} for t in meta["obs_layout"]]
        ours = [{k: t.get(k) for k in fields} for t in layout]
        if theirs != ours:
            env.close()
            diff = next((f"{a} vs {b}" for a, b in zip(theirs, ours) if a != b), f"{len(theirs)} vs {len(ours)} terms")
            raise ValueError(f"its observation layout differs from what this rlcore's Go2 task computes (file vs task: "
                             f"{diff})")
        return env

    def assign_variants(self, variants: list[Variant], env_variant: np.ndarray) -> list[mujoco.MjModel]:
        """Env ``e`` simulates ``variants[env_variant[e]]`` from now on; returns the compiled models."""
        c = self.cfg_task
        models = [variant_model(c, self.terrain, v, c.control.kp, c.control.kd) for v in variants]
        ids = np.arange(self.num_envs)
        self.sim.variants = models
        self.sim.set_variants(ids, np.asarray(env_variant))
        self.sim.set_latency(ids, np.array([latency_steps(variants[i], c.sim.dt) for i in env_variant]))
        params = [[1.0 if v.ground_friction is None else v.ground_friction, v.base_added_mass, v.kp_scale]
                  for v in variants]
        self.variant_params = torch.tensor(params, dtype=torch.float32, device=self.device)
        return models


def _uniform(values: list, key: str) -> float:
    if len(set(values)) != 1:
        raise ValueError(f"its {key} differs between joints ({values}); this Go2 task has one {key} for all joints")
    return float(values[0])


def overrides_from_interface(meta: dict, episode_s: float, threads: int | None = None) -> dict:
    """Go2 config overrides (:func:`~tasks.go2.config.make_config`) that reproduce ``meta``'s actuation, timing
    and observation scales, with the task's randomness off (see :meth:`Go2VariantEnv.from_interface`)."""
    groups = meta["observation_groups"]
    terms = {t["name"]: t for g in ("policy", "privileged") for t in (groups.get(g) or {}).get("terms", [])}
    obs = {"ang_vel_scale": terms["base_ang_vel"]["scale"], "command_scale": terms["velocity_commands"]["scale"],
           "dof_pos_scale": terms["joint_pos"]["scale"], "dof_vel_scale": terms["joint_vel"]["scale"],
           "clip": groups["policy"]["clip"], "add_noise": False}
    if "base_lin_vel" in terms:
        obs["lin_vel_scale"] = terms["base_lin_vel"]["scale"]
    if "height_scan" in groups:
        obs["height_scale"] = groups["height_scan"]["scale"]
    solver = meta["solver"]
    return {
        "episode_length_s": float(episode_s),
        "sim": {"dt": meta["physics_dt"], "decimation": meta["decimation"], "solver_iterations": solver["iterations"],
                "solver_ls_iterations": solver["ls_iterations"], "threads": threads},
        "control": {"kp": _uniform(meta["kp"], "kp"), "kd": _uniform(meta["kd"], "kd"),
                    "action_scale": meta["action_scale"], "clip_actions": meta["action_clip"],
                    "default_joint_pos": meta["default_joint_pos"]},
        "init": {"joint_pos_scale": [1.0, 1.0], "base_lin_vel": 0.0, "base_ang_vel": 0.0, "random_yaw": False},
        "commands": {"heading_command": False, "resampling_time": 1.0e9},
        "obs": obs,
        "domain_rand": {"randomize_friction": False, "randomize_base_mass": False, "randomize_motor_strength": False,
                        "num_variants": 1, "push_robots": False},
    }
