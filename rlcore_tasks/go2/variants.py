"""The robustness grid of named Go2 variants, and an env that simulates given variants.

What a variant is and how its model is built live in :mod:`rlcore_tasks.go2.randomization` (shared with the task's
domain randomisation; latency and physics-failure flags are :class:`~rlcore_tasks.go2.sim.Go2Sim`'s own). Here:
``ROBUSTNESS_GRID``, the fixed grid of ``python -m rlcore.robustness``; :func:`variant_model`, a variant compiled
for a task config; :class:`Go2VariantEnv`, a :class:`~rlcore_tasks.go2.env.Go2Env` built from an exported policy's
interface whose envs simulate chosen variants.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from rlcore.config.cli import merge_settings
from rlcore.deployment import obs_layout
from rlcore.env import ConfigError
from rlcore_tasks.go2.config import Go2Cfg, held_commands, no_randomization
from rlcore_tasks.go2.env import Go2Env
from rlcore_tasks.go2.randomization import FOOT_GEOMS, LEG_BODIES, SOFT_SOLIMP, Variant, apply_variant, latency_steps
from rlcore_tasks.go2.sim import MAX_SPEED, build_model
from rlcore_tasks.go2.terrain import Terrain

__all__ = ["FOOT_GEOMS", "LEG_BODIES", "MAX_SPEED", "ROBUSTNESS_GRID", "SOFT_FEET", "Go2VariantEnv", "Variant",
           "describe", "latency_steps", "overrides_from_interface", "variant_model"]

#: Soft feet: MuJoCo Menagerie's foot solimp with a wider transition (the contact takes the foot's parameters).
SOFT_FEET = SOFT_SOLIMP

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


def variant_model(cfg: Go2Cfg, terrain: Terrain, variant: Variant, kp: float, kd: float) -> mujoco.MjModel:
    """The task's scene (``cfg``'s physics settings, ``terrain``) with ``variant`` applied, compiled."""
    return apply_variant(build_model(cfg, terrain), variant, kp, kd)


def describe(variant: Variant) -> str:
    """The variant's changes from the nominal model, e.g. ``joint_damping=2.0, latency_s=0.01``."""
    changed = [f"{f.name}={getattr(variant, f.name)}" for f in dataclasses.fields(variant)
               if f.name != "name" and getattr(variant, f.name) != f.default]
    return ", ".join(changed) or "the task's model"


# ============================================================================ an env of given variants
class Go2VariantEnv(Go2Env):
    """A :class:`~rlcore_tasks.go2.env.Go2Env` whose envs simulate given :class:`Variant` s (one compiled model each,
    latency per env), for closed-loop checks of a policy on several robots at once.

    Build it with :meth:`from_interface` to reproduce the actuation and observations an exported policy was
    trained with; then :meth:`assign_variants`. The privileged group reports the variants' parameters as in
    training.
    """

    #: Interface entries that must be identical in the policy's file and in the env built from it.
    CHECKED = ("joint_names", "default_joint_pos", "kp", "kd", "torque_limits", "action_scale", "action_clip",
               "physics_dt", "decimation", "solver")

    @classmethod
    def from_interface(cls, meta: dict, num_envs: int, episode_s: float, threads: int | None = None,
                       solver_iterations: int | None = None, device: str = "cpu",
                       overrides: dict | None = None) -> Go2VariantEnv:
        """An env with the gains, timing, solver and observation scales of an exported policy's interface ``meta``
        (:func:`rlcore.deployment.read_onnx_interface`) and none of the task's randomness: no observation
        noise, pushes or domain randomisation, the default pose at spawn, fixed commands, episodes of
        ``episode_s``. ``solver_iterations`` replaces the file's (e.g. a converged solver for stiff variants);
        ``overrides``: task settings merged over those (``{"sim": {"backend": "warp"}}``: another physics backend).

        Raises:
            ConfigError: ``meta`` describes something this task does not compute (another robot, a different
                observation layout, non-uniform gains, a missing entry); the message says what differs.
        """
        try:
            settings = overrides_from_interface(meta, episode_s, threads)
        except KeyError as err:  # the file's interface lacks an entry this task needs
            raise ConfigError(f"its interface lacks {err}") from None
        if solver_iterations is not None:
            settings["sim"]["solver_iterations"] = int(solver_iterations)
        env = cls(num_envs=num_envs, device=device, seed=0, **merge_settings(settings, overrides or {}))
        mine = env.deployment_interface()
        for key in cls.CHECKED:
            if key == "solver" and solver_iterations is not None:
                mine = {**mine, key: {**mine[key], "iterations": meta[key].get("iterations")}}
            if key in meta and meta[key] != mine[key]:
                env.close()
                raise ConfigError(f"its {key} {meta[key]} is not what this rlcore's Go2 task does ({mine[key]})")
        fields = ("group", "name", "input_start", "input_stop", "scale", "offset")
        layout = obs_layout(list(meta["obs_groups"]), mine["observation_groups"]) or []
        theirs = [{k: t.get(k) for k in fields} for t in meta["obs_layout"]]
        ours = [{k: t.get(k) for k in fields} for t in layout]
        if theirs != ours:
            env.close()
            diff = next((f"{a} vs {b}" for a, b in zip(theirs, ours) if a != b), f"{len(theirs)} vs {len(ours)} terms")
            raise ConfigError(f"its observation layout differs from what this rlcore's Go2 task computes (file vs task: "
                             f"{diff})")
        return env

    def assign_variants(self, variants: list[Variant], env_variant: np.ndarray) -> list[mujoco.MjModel]:
        """Env ``e`` simulates ``variants[env_variant[e]]`` (its model and latency) from now on, resets included;
        returns the compiled models."""
        self.sim.set_physical_variants(variants)
        self.sim.set_variants(np.arange(self.num_envs), np.asarray(env_variant))
        self.update_variant_params()
        return self.sim.variants

    def _reset_envs(self, env_ids) -> None:
        """A reset keeps each env's assigned variant (the task would draw a new one)."""
        kept = self.sim.env_variant[env_ids].clone()
        super()._reset_envs(env_ids)
        self.sim.set_variants(env_ids, kept)


def _uniform(values: list, key: str) -> float:
    if len(set(values)) != 1:
        raise ConfigError(f"its {key} differs between joints ({values}); this Go2 task has one {key} for all joints")
    return float(values[0])


def overrides_from_interface(meta: dict, episode_s: float, threads: int | None = None) -> dict:
    """Go2 config overrides (:func:`~rlcore_tasks.go2.config.make_config`) that reproduce ``meta``'s actuation, timing,
    physics (every ``solver`` field, ``spawn.base_height``) and observation scales, with the task's randomness off
    (see :meth:`Go2VariantEnv.from_interface`). A field the file lacks (written before it existed) takes the task's
    default."""
    groups = meta["observation_groups"]
    terms = {t["name"]: t for g in ("policy", "privileged") for t in (groups.get(g) or {}).get("terms", [])}
    obs = {"ang_vel_scale": terms["base_ang_vel"]["scale"], "command_scale": terms["velocity_commands"]["scale"],
           "dof_pos_scale": terms["joint_pos"]["scale"], "dof_vel_scale": terms["joint_vel"]["scale"],
           "clip": groups["policy"]["clip"], "add_noise": False}
    if "base_lin_vel" in terms:
        obs["lin_vel_scale"] = terms["base_lin_vel"]["scale"]
    rewards = {}
    if "height_scan" in groups:
        scan = groups["height_scan"]
        obs["height_scale"] = scan["scale"]
        if "points" in scan:  # the scan's layout (files exported before it have the task's default grid)
            obs.update(scan_x=scan["points"]["x"], scan_y=scan["points"]["y"], scan_resolution=scan["points"]["resolution"])
            rewards["base_height_target"] = scan["measures"]["offset"]  # the scan's offset
    if "policy_history" in groups:
        obs["history_length"] = int(groups["policy_history"]["frames"])
    solver = meta["solver"]
    spawn = meta.get("spawn") or {}  # files before spawn was written: the task's default height
    spawn_height = {"base_height": float(spawn["base_height"])} if "base_height" in spawn else {}
    return {
        "episode_length_s": float(episode_s),
        "sim": {"dt": meta["physics_dt"], "decimation": meta["decimation"], "solver_iterations": solver["iterations"],
                "solver_ls_iterations": solver["ls_iterations"], "threads": threads,
                "integrator": str(solver.get("integrator", "mjINT_EULER")).removeprefix("mjINT_").lower(),
                "cone": str(solver.get("cone", "mjCONE_PYRAMIDAL")).removeprefix("mjCONE_").lower(),
                **({"impratio": float(solver["impratio"])} if "impratio" in solver else {})},
        "control": {"kp": _uniform(meta["kp"], "kp"), "kd": _uniform(meta["kd"], "kd"),
                    "action_scale": meta["action_scale"], "clip_actions": meta["action_clip"],
                    "default_joint_pos": meta["default_joint_pos"]},
        "init": {**spawn_height, "joint_pos_scale": [1.0, 1.0], "base_lin_vel": 0.0, "base_ang_vel": 0.0,
                 "random_yaw": False},
        "commands": held_commands(),
        "obs": obs,
        "rewards": rewards,
        "domain_rand": {**no_randomization(), "num_variants": 1},
    }
