"""Physical variants of the Go2: what a model may differ in, how to draw one, and how to build its MjModel.

One home for the concept, shared by training-time domain randomisation (:class:`~rlcore_tasks.go2.sim.Go2Sim` draws a
pool of :class:`Variant` s from :class:`~rlcore_tasks.go2.config.DomainRandCfg`) and the fixed robustness grid of
``rlcore.robustness`` (:mod:`rlcore_tasks.go2.variants`):

- :class:`Variant`: passive joint damping, Coulomb friction and armature; foot contact softness (solref, solimp)
  and dimension; per-link leg mass, base payload and centre-of-mass offset; kp, kd and motor-strength factors;
  actuation latency; ground friction. ``None`` / neutral values keep the task's nominal robot.
- :func:`apply_variant`: a copy of the compiled nominal model with the variant written into its arrays, then
  ``mj_setConst`` (the compiler's derived constants: subtree masses, inverse weights, ...), so it equals
  compiling the edited MJCF (tests check that) at a fraction of the cost, on flat or rough terrain alike.
- :func:`sample_variant`: one draw from the config's ranges.
- :data:`PHYSICAL_TERMS` / :func:`physical_features`: the variant's parameters as privileged observations.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import mujoco
import numpy as np

from rlcore_tasks.go2.config import DomainRandCfg

LEGS = ("FL", "FR", "RL", "RR")
JOINT_NAMES = tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf"))
#: Bodies whose mass and inertia ``leg_mass_scale`` scales (hip, thigh, calf and foot of each leg), in this order.
LEG_BODIES = tuple(f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh", "calf", "foot"))
#: The foot collision spheres.
FOOT_GEOMS = tuple(f"{leg}_foot" for leg in LEGS)
#: MuJoCo's default contact parameters (the task's nominal feet).
DEFAULT_SOLREF = (0.02, 1.0)
DEFAULT_SOLIMP = (0.9, 0.95, 0.001)
#: The softest feet drawn: MuJoCo Menagerie's Go2 foot solimp (0.015, 1, 0.022; docs/go2_facts.md section 4) with the
#: wider 0.03 transition of the robustness grid's "soft_feet" variant.
SOFT_SOLIMP = (0.015, 1.0, 0.03)
#: solmix of a foot whose contact parameters are set: the contact then takes the foot's solref/solimp (MuJoCo
#: averages the two geoms' parameters by solmix weight), like MuJoCo Menagerie's priority-1 feet, while the
#: friction stays the larger of foot and ground (the ground's, which the ground-friction draw sets).
FOOT_SOLMIX = 1.0e9


@dataclass(frozen=True)
class Variant:
    """One physical variant of the Go2; ``None`` / neutral values keep the task's nominal model.

    Attributes:
        name: short label (table rows, ``variants=`` selection).
        joint_damping: passive damping of the 12 leg joints [N m s / rad] (task: 0).
        joint_frictionloss: Coulomb friction of the 12 leg joints [N m] (task: 0).
        joint_armature: reflected rotor inertia of the 12 leg joints [kg m^2] (task: 0.01).
        foot_solref: contact ``(timeconst [s], dampratio)`` of the foot spheres (task: MuJoCo's default).
        foot_solimp: contact impedance ``(dmin, dmax, width)`` of the foot spheres (task: MuJoCo's default).
        foot_condim: contact dimension of the foot spheres (task: 3; 6 adds torsional and rolling friction).
        leg_mass_scale: factor on the mass and inertia of every leg body, or one factor per body of
            :data:`LEG_BODIES` (16).
        base_added_mass: mass added to the base [kg] (a payload at its centre of mass).
        base_com_offset: shift of the base's centre of mass [m] (base frame).
        kp_scale: factor on the PD stiffness kp.
        kd_scale: factor on the PD damping kd.
        motor_strength: factor on both kp and kd (the whole PD torque before the torque limit).
        latency_s: delay between the policy's target and the actuators [s]; a whole number of physics steps.
        ground_friction: sliding friction of the ground (task: 1.0).
    """

    name: str
    joint_damping: float | None = None
    joint_frictionloss: float | None = None
    joint_armature: float | None = None
    foot_solref: tuple[float, float] | None = None
    foot_solimp: tuple[float, float, float] | None = None
    foot_condim: int | None = None
    leg_mass_scale: float | tuple[float, ...] = 1.0
    base_added_mass: float = 0.0
    base_com_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    kp_scale: float = 1.0
    kd_scale: float = 1.0
    motor_strength: float = 1.0
    latency_s: float = 0.0
    ground_friction: float | None = None

    def leg_scales(self) -> np.ndarray:
        """``[16]`` mass factors of :data:`LEG_BODIES`."""
        scales = np.broadcast_to(np.asarray(self.leg_mass_scale, dtype=np.float64), (len(LEG_BODIES),))
        return scales.copy()


def latency_steps(variant: Variant, physics_dt: float) -> int:
    """The variant's latency in physics steps; a latency that is not a whole number of steps is an error."""
    steps = variant.latency_s / physics_dt
    if steps < 0 or not math.isclose(steps, round(steps), abs_tol=1e-6):
        raise ValueError(f"variant {variant.name}: latency {variant.latency_s} s is not a whole number of "
                         f"{physics_dt} s physics steps")
    return int(round(steps))


def apply_variant(nominal: mujoco.MjModel, variant: Variant, kp: float, kd: float) -> mujoco.MjModel:
    """A copy of the compiled task model ``nominal`` that simulates ``variant`` (``nominal`` is left untouched).

    PD gains become ``kp * kp_scale * motor_strength`` and ``kd * kd_scale * motor_strength``.
    """
    m = copy.deepcopy(nominal)
    v = variant
    dofs = np.array([m.jnt_dofadr[m.joint(j).id] for j in JOINT_NAMES])
    if v.joint_damping is not None:
        m.dof_damping[dofs] = v.joint_damping
    if v.joint_frictionloss is not None:
        m.dof_frictionloss[dofs] = v.joint_frictionloss
    if v.joint_armature is not None:
        m.dof_armature[dofs] = v.joint_armature
    feet = np.array([m.geom(g).id for g in FOOT_GEOMS])
    if v.foot_solref is not None:
        m.geom_solref[feet] = v.foot_solref
        m.geom_solmix[feet] = FOOT_SOLMIX
    if v.foot_solimp is not None:
        m.geom_solimp[feet, :3] = v.foot_solimp
        m.geom_solmix[feet] = FOOT_SOLMIX
    if v.foot_condim is not None:
        m.geom_condim[feet] = v.foot_condim
    legs = np.array([m.body(b).id for b in LEG_BODIES])
    scales = v.leg_scales()
    m.body_mass[legs] *= scales  # a uniformly denser link: mass and inertia scale together, the CoM stays
    m.body_inertia[legs] *= scales[:, None]
    base = m.body("base").id
    m.body_mass[base] += v.base_added_mass
    m.body_ipos[base] += np.asarray(v.base_com_offset, dtype=np.float64)
    if v.ground_friction is not None:
        m.geom_friction[m.geom("ground").id, 0] = v.ground_friction
    # position actuators: force = gain * ctrl + bias1 * q + bias2 * qdot
    m.actuator_gainprm[:, 0] = kp * v.kp_scale * v.motor_strength
    m.actuator_biasprm[:, 1] = -kp * v.kp_scale * v.motor_strength
    m.actuator_biasprm[:, 2] = -kd * v.kd_scale * v.motor_strength
    mujoco.mj_setConst(m, mujoco.MjData(m))  # what the compiler derives from masses, inertias and armature
    return m


def sample_variant(dr: DomainRandCfg, rng: np.random.Generator, physics_dt: float, name: str = "",
                   strength: float = 1.0, nominal: mujoco.MjModel | None = None, loaded: bool = False) -> Variant:
    """One draw from ``dr``'s ranges (a disabled randomisation keeps the nominal value). Latency is drawn in whole
    physics steps, uniformly from those within ``dr.latency_range_s``.

    ``strength`` in [0, 1] moves every drawn value towards the nominal robot's (``nominal``, the task's compiled
    model, is then needed): ``nominal + strength * (draw - nominal)``; latency in whole steps rounded; condim 6
    kept with probability ``strength``. 0 is the nominal robot, 1 the full ranges (a curriculum's pool).

    ``loaded``: a *loaded* robot (``DomainRandCfg.loaded_fraction``): each parameter that makes the robot slower or
    weaker is drawn from the harsh half of its range (the upper half of joint damping, frictionloss, armature,
    latency, leg and base mass and foot softness; the lower half of kp and motor strength) and its feet have
    condim 6; ground friction, kd and the CoM shift are drawn as usual. The same random numbers are taken as
    for an ordinary draw, so a seed still fixes the pool.
    """
    s = float(strength)
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"strength {s}: must lie in [0, 1]")
    if s < 1.0 and nominal is None:
        raise ValueError("sample_variant: a strength under 1 needs the nominal model")
    nom = _nominal_values(nominal)
    draw = _Draw(rng, s, loaded)
    up, down = (HARSH_HIGH, HARSH_LOW) if loaded else (0, 0)  # which half of a range a loaded robot draws from
    # The order of the draws below fixes what a seed means (the pool a run trains on): keep it.
    softness = draw.uniform(dr.randomize_foot_contact, dr.foot_softness_range, None, 0.0, up)
    solimp = None if softness is None else tuple(d + softness * (x - d) for d, x in zip(DEFAULT_SOLIMP, SOFT_SOLIMP))
    timeconst = draw.uniform(dr.randomize_foot_contact, dr.foot_solref_timeconst_range, None, nom["timeconst"], up)
    condim = None
    if dr.randomize_foot_condim:
        condim = int(rng.choice(dr.foot_condim_choices))
        condim = max(dr.foot_condim_choices) if loaded else condim
        condim = condim if rng.random() < s else nom["condim"]
    latency = _draw_latency(dr, rng, s, physics_dt, loaded) if dr.randomize_latency else 0.0
    legs = (tuple(draw.toward(x, 1.0) for x in rng.uniform(*_half(dr.leg_mass_scale_range, up), len(LEG_BODIES)))
            if dr.randomize_leg_mass else 1.0)
    com = (tuple(draw.toward(rng.uniform(-r, r), 0.0) for r in dr.base_com_offset_range)
           if dr.randomize_base_com else (0.0, 0.0, 0.0))
    return Variant(
        name=name,
        joint_damping=draw.uniform(dr.randomize_joint_damping, dr.joint_damping_range, None, nom["damping"], up),
        joint_frictionloss=draw.uniform(dr.randomize_joint_frictionloss, dr.joint_frictionloss_range, None,
                                        nom["frictionloss"], up),
        joint_armature=draw.uniform(dr.randomize_armature, dr.armature_range, None, nom["armature"], up),
        foot_solref=None if timeconst is None else (timeconst, DEFAULT_SOLREF[1]),
        foot_solimp=solimp,
        foot_condim=condim,
        leg_mass_scale=legs,
        base_added_mass=draw.uniform(dr.randomize_base_mass, dr.added_mass_range, 0.0, 0.0, up),
        base_com_offset=com,
        kp_scale=draw.uniform(dr.randomize_pd_gains, dr.kp_scale_range, 1.0, 1.0, down),
        kd_scale=draw.uniform(dr.randomize_pd_gains, dr.kd_scale_range, 1.0, 1.0),
        motor_strength=draw.uniform(dr.randomize_motor_strength, dr.motor_strength_range, 1.0, 1.0, down),
        latency_s=latency,
        ground_friction=draw.uniform(dr.randomize_friction, dr.friction_range, None, nom["friction"]),
    )


def _nominal_values(nominal: mujoco.MjModel | None) -> dict:
    """The nominal robot's values that :func:`sample_variant` moves draws towards (joint 0 and foot 0 stand for
    all: the task sets them alike); zeros and condim 3 without a model (strength 1 never uses them)."""
    if nominal is None:
        return dict.fromkeys(("damping", "frictionloss", "armature", "timeconst", "friction"), 0.0) | {"condim": 3}
    dof = nominal.jnt_dofadr[nominal.joint(JOINT_NAMES[0]).id]
    foot = nominal.geom(FOOT_GEOMS[0]).id
    return {"damping": nominal.dof_damping[dof], "frictionloss": nominal.dof_frictionloss[dof],
            "armature": nominal.dof_armature[dof], "timeconst": nominal.geom_solref[foot, 0],
            "condim": int(nominal.geom_condim[foot]), "friction": nominal.geom_friction[nominal.geom("ground").id, 0]}


HARSH_HIGH, HARSH_LOW = 1, -1
"""Which half of its range a loaded robot draws a parameter from: the upper (``HARSH_HIGH``) or the lower."""


def _half(lo_hi: list[float], harsh: int) -> tuple[float, float]:
    """The upper (``harsh`` = 1) or lower (-1) half of the range ``[lo, hi]``; the whole range for 0."""
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    mid = 0.5 * (lo + hi)
    return (mid, hi) if harsh > 0 else (lo, mid) if harsh < 0 else (lo, hi)


@dataclass
class _Draw:
    """Uniform draws from ``rng`` scaled by the curriculum ``strength``: ``nominal + strength * (draw - nominal)``."""

    rng: np.random.Generator
    strength: float
    loaded: bool = False

    def toward(self, value: float, nominal_value: float) -> float:
        """``value`` moved towards ``nominal_value`` by the strength (exactly ``value`` at full strength)."""
        s = self.strength
        return float(value) if s == 1.0 else float(nominal_value + s * (value - nominal_value))

    def uniform(self, on: bool, lo_hi: list[float], neutral, nominal_value: float, harsh: int = 0):
        """A draw from ``lo_hi`` (its harsh half when ``harsh`` is not 0: :func:`_half`) moved toward the nominal
        value when ``on``, else ``neutral`` (no draw taken)."""
        return self.toward(self.rng.uniform(*_half(lo_hi, harsh)), nominal_value) if on else neutral


def _draw_latency(dr: DomainRandCfg, rng: np.random.Generator, strength: float, physics_dt: float,
                  loaded: bool = False) -> float:
    """A latency [s] in whole physics steps, uniform over the steps inside ``dr.latency_range_s`` (the upper half
    of them for a loaded robot), scaled by the strength and rounded to a whole step."""
    first = math.ceil(dr.latency_range_s[0] / physics_dt - 1e-6)
    last = math.floor(dr.latency_range_s[1] / physics_dt + 1e-6)
    if loaded:
        first = (first + last + 1) // 2
    return round(strength * int(rng.integers(first, last + 1))) * physics_dt


#: Privileged observation terms of a variant's physical parameters, in :func:`physical_features`' order:
#: (name, size, scale, offset, what). Observation value = (quantity - offset) * scale, so each lies in about
#: [-1, 1] over the default ranges whatever the config (fixed constants: the meaning of a trained critic's input
#: does not change with the ranges).
PHYSICAL_TERMS: tuple[tuple[str, int, float, float, str], ...] = (
    ("kp_scale", 1, 4.0, 1.0, "factor on kp (beside motor_strength)"),
    ("kd_scale", 1, 4.0, 1.0, "factor on kd (beside motor_strength)"),
    ("joint_damping", 1, 1.0 / 3.0, 0.0, "passive joint damping [N m s/rad]"),
    ("joint_frictionloss", 1, 2.5, 0.0, "joint Coulomb friction [N m]"),
    ("joint_armature", 1, 100.0, 0.01, "joint armature [kg m^2]"),
    ("latency", 1, 50.0, 0.0, "actuation latency [s]"),
    ("foot_solref_timeconst", 1, 50.0, 0.02, "foot contact solref time constant [s]"),
    ("foot_solimp_dmin", 1, 1.0, 0.9, "foot contact solimp dmin"),
    ("foot_solimp_width", 1, 33.0, 0.001, "foot contact solimp width [m]"),
    ("foot_condim6", 1, 1.0, 0.0, "1 if the feet have condim 6 (torsional and rolling friction), else 0"),
    ("leg_mass_scale", 4, 4.0, 1.0, "mass factor of each leg (FL, FR, RL, RR), over its hip, thigh, calf, foot"),
    ("base_com_offset", 3, 20.0, 0.0, "shift of the base's centre of mass [m], base frame"),
)


def physical_features(variant: Variant, nominal: mujoco.MjModel) -> np.ndarray:
    """The raw quantities of :data:`PHYSICAL_TERMS` for ``variant`` (``[17]``; ``nominal`` gives the defaults)."""
    v = variant
    dof = nominal.jnt_dofadr[nominal.joint(JOINT_NAMES[0]).id]
    foot = nominal.geom(FOOT_GEOMS[0]).id
    solref = v.foot_solref or tuple(nominal.geom_solref[foot])
    solimp = v.foot_solimp or tuple(nominal.geom_solimp[foot, :3])
    condim = v.foot_condim if v.foot_condim is not None else int(nominal.geom_condim[foot])
    masses = np.array([nominal.body_mass[nominal.body(b).id] for b in LEG_BODIES]).reshape(4, 4)
    leg_scale = (masses * v.leg_scales().reshape(4, 4)).sum(axis=1) / masses.sum(axis=1)
    return np.array([
        v.kp_scale, v.kd_scale,
        nominal.dof_damping[dof] if v.joint_damping is None else v.joint_damping,
        nominal.dof_frictionloss[dof] if v.joint_frictionloss is None else v.joint_frictionloss,
        nominal.dof_armature[dof] if v.joint_armature is None else v.joint_armature,
        v.latency_s, solref[0], solimp[0], solimp[2], float(condim == 6),
        *leg_scale, *v.base_com_offset,
    ], dtype=np.float64)
