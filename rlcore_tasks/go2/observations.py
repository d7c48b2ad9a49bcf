"""The Go2 task's observations, declared once.

:func:`observation_groups` is the single description of every observation group: for each term its name,
width, the state it reads, what it is and its unit, and the transform ``value = clip(quantity + bias - offset)
* scale + noise`` (then the group's clip). Both users are generated from it, so they cannot drift apart:

- :func:`observe`: the env's observation vectors (:meth:`~rlcore_tasks.go2.env.Go2Env.get_observations`);
- :func:`interface`: the ``observation_groups`` entry of the deployment metadata that ONNX export writes
  (:meth:`~rlcore_tasks.go2.env.Go2Env.deployment_interface`).

A term's value, column by column:

1. ``quantity``: the state columns ``read`` names (an env state tensor, or one of :data:`SOURCES`);
2. plus ``bias``: a per-episode sensor bias (drawn at reset; part of the observation corruption, so zero with
   ``obs.add_noise`` off), ``bias_amplitude`` its range in the quantity's unit;
3. minus ``offset``, clipped to ``clip`` (before scaling), times ``scale`` (``divide``: computed as a division
   by ``1 / scale``, which is what the task has always computed for such a term, bit for bit);
4. plus uniform noise of amplitude ``noise`` (the quantity's unit) times ``scale`` times ``obs.noise_level``,
   drawn at every step with ``obs.add_noise``.

A group concatenates its terms in order and clips the result to ``+-clip``; a grid group (``shape``) is one term
of shape ``[N, H, W]`` returned as ``[N, 1, H, W]``; a history group (``history_of``) holds the frames of another
group that the env keeps (``policy_history``, newest first).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from rlcore_tasks.go2 import scan
from rlcore_tasks.go2.config import Go2Cfg
from rlcore_tasks.go2.randomization import PHYSICAL_TERMS
from rlcore_tasks.go2.terrain import scan_points

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env


@dataclass(frozen=True)
class Read:
    """Columns ``start:stop`` (all by default) of the state ``source`` ``[N, ...]``: an entry of :data:`SOURCES`
    or else the env attribute of that name."""

    source: str
    start: int | None = None
    stop: int | None = None


@dataclass(frozen=True)
class ObsTerm:
    """One observation term (see the module's doc for how its value is computed)."""

    name: str
    size: int
    read: Read
    #: What the quantity is; ``{unit}`` (or ``{unit[i]}`` for a tuple of units) marks where its unit is written.
    quantity: str
    unit: str | tuple[str, ...] = ""
    scale: float | list[float] = 1.0
    offset: float | list[float] = 0.0
    clip: tuple[float, float] | None = None
    noise: float = 0.0
    bias: Read | None = None
    bias_amplitude: float = 0.0
    divide: bool = False
    #: A grid term's missing cells (bool ``[N, H, W]``, with ``obs.add_noise``) and the value they read.
    missing: Read | None = None
    missing_value: float = 0.0

    def describe(self) -> str:
        """The quantity with its unit, as the deployment metadata states it."""
        return self.quantity.format(unit=self.unit)

    def noise_amplitude(self) -> float:
        """The noise amplitude in observation units (at ``obs.noise_level`` 1)."""
        return self.noise * self.scale if self.noise else 0.0

    def has_offset(self) -> bool:
        return isinstance(self.offset, list) or self.offset != 0.0


@dataclass(frozen=True)
class ObsGroup:
    """An observation group: its terms in order, the clip of the whole group and, for a grid, its shape."""

    name: str
    terms: tuple[ObsTerm, ...] = ()
    clip: float | None = None
    shape: tuple[int, ...] | None = None
    history_of: str | None = None
    frames: int = 0

    @property
    def size(self) -> int:
        return sum(t.size for t in self.terms)

    def slices(self) -> dict[str, slice]:
        """Each term's columns in the group's vector."""
        out, start = {}, 0
        for term in self.terms:
            out[term.name] = slice(start, start + term.size)
            start += term.size
        return out


#: Per-episode sensor biases, as the ``privileged`` group reports them: (name, size, bias state columns, scale,
#: quantity, unit).
BIAS_TERMS = (("ang_vel_bias", 3, Read("imu_bias", 0, 3), 20.0, "gyro bias added to base_ang_vel [{unit}]", "rad/s"),
              ("gravity_bias", 3, Read("imu_bias", 3, 6), 50.0, "bias added to projected_gravity", ""),
              ("joint_pos_bias", 12, Read("joint_pos_bias"), 50.0, "encoder offsets added to joint_pos [{unit}]",
               "rad"))


def _unit_template(what: str) -> tuple[str, str]:
    """``"joint armature [kg m^2]"`` -> ``("joint armature [{unit}]", "kg m^2")`` (the first bracket is the unit)."""
    m = re.search(r"\[([^\]]+)\]", what)
    return (what, "") if m is None else (what[:m.start(1)] + "{unit}" + what[m.end(1):], m.group(1))


def _fixed_privileged_terms() -> tuple[ObsTerm, ...]:
    """The privileged terms no setting changes: the variant's physical parameters and the sensor biases."""
    physical, column = [], 3  # variant columns 0-2: ground friction, added base mass, motor strength
    for name, size, scale, offset, what in PHYSICAL_TERMS:
        template, unit = _unit_template(what)
        physical.append(ObsTerm(name, size, Read("variant", column, column + size), template, unit, scale=scale,
                                offset=offset))
        column += size
    biases = (ObsTerm(name, size, read, what, unit, scale=scale) for name, size, read, scale, what, unit in BIAS_TERMS)
    return (*physical, *biases)


_FIXED_PRIVILEGED = _fixed_privileged_terms()


@functools.lru_cache(maxsize=16)
def _scan_shape(x_range: tuple[float, ...], y_range: tuple[float, ...], resolution: float) -> tuple[int, int]:
    rows, cols = scan_points(list(x_range), list(y_range), resolution).shape[:2]
    return int(rows), int(cols)


def observation_groups(cfg: Go2Cfg) -> dict[str, ObsGroup]:
    """Every observation group of the task configured by ``cfg``, in the order of the deployment metadata."""
    o, dr, c = cfg.obs, cfg.domain_rand, cfg
    policy = ObsGroup("policy", clip=float(o.clip), terms=(
        ObsTerm("base_ang_vel", 3, Read("base_ang_vel"), "base angular velocity, base frame [{unit}]", "rad/s",
                scale=o.ang_vel_scale, noise=o.noise_ang_vel, bias=Read("imu_bias", 0, 3),
                bias_amplitude=dr.imu_bias_ang_vel * dr.randomize_imu_bias),
        ObsTerm("projected_gravity", 3, Read("projected_gravity"), "unit gravity vector in the base frame",
                noise=o.noise_gravity, bias=Read("imu_bias", 3, 6),
                bias_amplitude=dr.imu_bias_gravity * dr.randomize_imu_bias),
        ObsTerm("velocity_commands", 3, Read("commands"),
                "commanded vx, vy [{unit[0]}] (base frame), yaw rate [{unit[2]}]", ("m/s", "m/s", "rad/s"),
                scale=list(o.command_scale)),
        ObsTerm("joint_pos", 12, Read("dof_pos"), "joint angles [{unit}] minus default_joint_pos", "rad",
                scale=o.dof_pos_scale, offset=list(c.control.default_joint_pos), noise=o.noise_dof_pos,
                bias=Read("joint_pos_bias"), bias_amplitude=dr.encoder_bias * dr.randomize_encoder_bias),
        ObsTerm("joint_vel", 12, Read("dof_vel"), "joint velocities [{unit}]", "rad/s", scale=o.dof_vel_scale,
                noise=o.noise_dof_vel),
        ObsTerm("last_actions", 12, Read("actions"), "the policy's previous output, after clipping to action_clip"),
    ))
    privileged = ObsGroup("privileged", terms=(
        ObsTerm("base_lin_vel", 3, Read("base_lin_vel"), "base linear velocity, base frame [{unit}]", "m/s",
                scale=o.lin_vel_scale),
        ObsTerm("ground_friction", 1, Read("variant", 0, 1), "sliding friction of the ground"),
        ObsTerm("added_base_mass", 1, Read("variant", 1, 2), "mass added to the base [{unit}]", "kg"),
        ObsTerm("motor_strength", 1, Read("variant", 2, 3), "scale of kp and kd"),
        ObsTerm("foot_forces", 4, Read("foot_forces"), "foot contact normal forces [{unit}], FL, FR, RL, RR", "N",
                scale=0.01, divide=True),
        ObsTerm("push_velocity", 2, Read("push_vel"), "last push's planar velocity [{unit}], fading", "m/s"),
        *_FIXED_PRIVILEGED,
    ))
    groups = {"policy": policy, "privileged": privileged}
    if o.history_length > 0:
        groups["policy_history"] = ObsGroup("policy_history", terms=policy.terms, clip=policy.clip,
                                            history_of="policy", frames=o.history_length)
    rows, cols = _scan_shape(tuple(o.scan_x), tuple(o.scan_y), o.scan_resolution)
    target, lo, hi = cfg.rewards.base_height_target, -1.0, 1.0
    groups["height_scan"] = ObsGroup("height_scan", shape=(1, rows, cols), terms=(
        ObsTerm("height_scan", rows * cols, Read("height_above_terrain"),
                f"clip(base height above the terrain point - {target}, {lo:g}, {hi:g}) [{{unit}}] on a grid "
                f"x {list(o.scan_x)}, y {list(o.scan_y)}, step {o.scan_resolution} in the base's yaw frame", "m",
                scale=o.height_scale, offset=target, clip=(lo, hi), noise=o.noise_height,
                missing=Read("height_scan_missing"), missing_value=scan.MISSING_VALUE),))
    groups["base_lin_vel"] = ObsGroup("base_lin_vel", terms=(
        ObsTerm("base_lin_vel", 3, Read("base_lin_vel"),
                "base linear velocity, base frame [{unit}] (privileged: an estimator's target)", "m/s",
                scale=o.lin_vel_scale),))
    return groups


# ---------------------------------------------------------------------------------------------- the env's vectors
def _sensor_bias(name: str) -> Callable[[Go2Env], torch.Tensor]:
    def read(env: Go2Env) -> torch.Tensor:  # biases are observation corruption: off with the noise (x 0)
        bias = getattr(env, name)
        return bias if env.cfg_task.obs.add_noise else 0.0 * bias
    return read


#: States a term may read besides the env's attributes.
SOURCES: dict[str, Callable[[Go2Env], torch.Tensor]] = {
    "variant": lambda env: env.variant_params[env.sim.env_variant],  # [N, 20]: each env's physical variant
    "imu_bias": _sensor_bias("imu_bias"),
    "joint_pos_bias": _sensor_bias("joint_pos_bias"),
    "height_above_terrain": scan.height_above_terrain,  # with the scan's errors (offset, lag) when they apply
    "height_scan_missing": scan.missing,
}


@functools.lru_cache(maxsize=64)
def _constant(values: tuple[float, ...], device: torch.device) -> torch.Tensor:
    """A float32 tensor of ``values`` (cached: never modify it)."""
    return torch.tensor(values, dtype=torch.float32, device=device)


def _as_value(x: float | list[float], device: torch.device) -> float | torch.Tensor:
    return _constant(tuple(x), device) if isinstance(x, list) else x


def _columns(x: float | list[float], size: int) -> list[float]:
    return list(x) if isinstance(x, list) else [x] * size


def _plain(term: ObsTerm) -> bool:
    """A term computed as ``(quantity - offset) * scale`` alone (no bias, clip, division or noise)."""
    return term.bias is None and term.clip is None and not term.divide and term.noise_amplitude() == 0.0


def _runs(terms: tuple[ObsTerm, ...]) -> list[tuple[ObsTerm, ...]]:
    """``terms`` in order, consecutive plain terms that read adjacent columns of one source grouped together."""
    runs: list[list[ObsTerm]] = []
    for term in terms:
        last = runs[-1][-1] if runs else None
        if (last is not None and _plain(last) and _plain(term) and last.read.source == term.read.source
                and last.read.stop is not None and last.read.stop == term.read.start):
            runs[-1].append(term)
        else:
            runs.append([term])
    return [tuple(run) for run in runs]


def _run_value(env: Go2Env, run: tuple[ObsTerm, ...], read: Callable[[Read], torch.Tensor]) -> torch.Tensor:
    """Adjacent plain terms as one block: per-column offsets and scales, the very float32 operations each term
    would do on its own (``x - 0`` and ``x * 1`` leave x as it is)."""
    x = read(Read(run[0].read.source, run[0].read.start, run[-1].read.stop))
    offset = [v for t in run for v in _columns(t.offset, t.size)]
    scale = [v for t in run for v in _columns(t.scale, t.size)]
    if any(v != 0.0 for v in offset):
        x = x - _constant(tuple(offset), env.device)
    if any(v != 1.0 for v in scale):
        x = x * _constant(tuple(scale), env.device)
    return x


def term_value(env: Go2Env, term: ObsTerm, read: Callable[[Read], torch.Tensor] | None = None) -> torch.Tensor:
    """``term``'s value in ``env`` now (noise drawn from the env's generator with ``obs.add_noise``)."""
    read = read or (lambda r: _read(env, r, {}))
    x = read(term.read)
    if term.bias is not None:
        x = x + read(term.bias)
    if term.has_offset():
        x = x - _as_value(term.offset, env.device)
    if term.clip is not None:
        x = x.clamp(*term.clip)
    if term.divide:
        x = x / (1.0 / term.scale)
    elif isinstance(term.scale, list) or term.scale != 1.0:
        x = x * _as_value(term.scale, env.device)
    o, amplitude = env.cfg_task.obs, term.noise_amplitude()
    if o.add_noise and amplitude != 0.0:
        x = x + (torch.rand(x.shape, generator=env.generator, device=env.device) * 2 - 1) * amplitude * o.noise_level
    if o.add_noise and term.missing is not None:
        x = x.masked_fill(read(term.missing), term.missing_value)
    return x


def _read(env: Go2Env, read: Read, cache: dict[str, torch.Tensor]) -> torch.Tensor:
    """The columns ``read`` names (each source computed once per ``cache``)."""
    if read.source not in cache:
        source = SOURCES.get(read.source)
        cache[read.source] = source(env) if source is not None else getattr(env, read.source)
    x = cache[read.source]
    return x if read.start is None and read.stop is None else x[:, read.start:read.stop]


def observe(env: Go2Env, groups: dict[str, ObsGroup]) -> dict[str, torch.Tensor]:
    """The vectors of every group but the history groups (which the env keeps), in order: noise is drawn term
    by term in that order. Adjacent plain terms of one source are computed as one block (:func:`_run_value`)."""
    cache: dict[str, torch.Tensor] = {}
    out = {}
    for group in groups.values():
        if group.history_of is not None:
            continue
        read = functools.partial(_read, env, cache=cache)
        values = [term_value(env, run[0], read) if len(run) == 1 else _run_value(env, run, read)
                  for run in _runs(group.terms)]
        x = values[0].unsqueeze(1) if group.shape is not None else torch.cat(values, dim=1)
        out[group.name] = x if group.clip is None else x.clamp(-group.clip, group.clip)
    return out


# ---------------------------------------------------------------------------------------------- the metadata
def _scan_layout(group: ObsGroup, term: ObsTerm, cfg: Go2Cfg) -> dict:
    """The height scan's layout as machine-readable fields: where its points are (``points``), what each value
    measures (``measures``: the formula and its numbers), what a missing cell reads (``missing_value``) and the
    map errors of training (``training_perturbations``, amplitudes 0 where they do not apply; never to be added at
    deployment)."""
    o, dr = cfg.obs, cfg.domain_rand
    rows, cols = _scan_shape(tuple(o.scan_x), tuple(o.scan_y), o.scan_resolution)  # the env's grid [H (y), W (x)]
    r, x0, y0 = (round(float(v), 9) for v in (o.scan_resolution, o.scan_x[0], o.scan_y[0]))
    lo, hi = term.clip if term.clip is not None else (None, None)
    errors = o.add_noise and dr.randomize_height_scan and cfg.terrain.type != "flat"  # as scan.active
    factor = o.noise_level if o.add_noise else 0.0
    return {
        "points": {"frame": "base_yaw", "frame_axes": "x forward, y left, z up; rotated by the base's yaw only "
                   "(no roll or pitch), origin at the base's xy", "x": [x0, round(x0 + (cols - 1) * r, 9)],
                   "y": [y0, round(y0 + (rows - 1) * r, 9)], "resolution": r, "shape": [rows, cols],
                   "order": "row_major_y_then_x",
                   "order_meaning": "row i at y = y[0] + i * resolution, column j at x = x[0] + j * resolution"},
        "measures": {"quantity": "base_height_above_terrain", "unit": "m",
                     "formula": "value = clip(base_z - terrain_z(point) - offset, clip_raw[0], clip_raw[1]) * scale, "
                                "then clipped to +-clip where clip is not null",
                     "offset": float(term.offset), "clip_raw": [lo, hi], "scale": float(term.scale),
                     "clip": group.clip},
        "missing_value": float(term.missing_value),
        "training_perturbations": {
            "training_only": True,
            "note": "how the training scan was corrupted (the offset's amplitude grows to this value with the "
                    "domain-randomisation curriculum); do not apply any of these at deployment",
            "noise": term.noise_amplitude() * factor,  # uniform, per cell and step, observation units
            "noise_m": float(term.noise) * factor,  # the same before scaling [m]
            "offset_per_episode_m": float(dr.scan_offset) if errors else 0.0,  # uniform +-, per episode
            "missing_fraction": float(dr.scan_missing_fraction) if errors else 0.0,  # per cell and step
            "max_lag_steps": int(dr.scan_max_lag) if errors else 0,  # 0..max_lag control steps, per episode
            "control_dt": float(cfg.sim.dt * cfg.sim.decimation),
        },
    }


def _units(term: ObsTerm) -> str | list[str]:
    """A term's unit (``"1"``: dimensionless), or one per column when the term's columns differ."""
    if isinstance(term.unit, tuple):
        return [u or "1" for u in term.unit]
    return term.unit or "1"


def interface(groups: dict[str, ObsGroup], cfg: Go2Cfg) -> dict[str, dict]:
    """The deployment metadata's ``observation_groups`` (interface version 2, docs/deployment.md): for a vector group
    its size, clip and terms (name, columns ``start:stop`` within the group, unit, quantity, scale, offset where
    there is one: ``value = (quantity - offset) * scale``, and ``training_perturbations``: the uniform noise
    amplitude added at every step and, in a group with sensor biases, the amplitude of the uniform offset drawn per
    episode, both in observation units and 0 with ``obs.add_noise`` off; never applied at deployment); a history
    group adds its frame order as fields; for a grid its shape, scale, clip and quantity, and its layout as fields
    (:func:`_scan_layout`: points, measures, missing_value, training_perturbations)."""
    on = float(cfg.obs.add_noise)
    factor = cfg.obs.noise_level if cfg.obs.add_noise else 0.0
    out = {}
    for group in groups.values():
        if group.shape is not None:
            (term,) = group.terms
            out[group.name] = {"shape": list(group.shape), "scale": term.scale, "clip": group.clip,
                               "quantity": term.describe(), **_scan_layout(group, term, cfg)}
            continue
        biased = any(t.bias is not None for t in group.terms)
        terms = []
        for term, cols in zip(group.terms, group.slices().values()):
            d = {"name": term.name, "start": cols.start, "stop": cols.stop, "unit": _units(term),
                 "quantity": term.describe(), "scale": term.scale}
            if term.has_offset():
                d["offset"] = term.offset
            perturbations = {"noise": term.noise_amplitude() * factor}
            if biased:
                perturbations["bias"] = float(term.bias_amplitude * term.scale * on) if term.bias is not None else 0.0
            d["training_perturbations"] = perturbations
            terms.append(d)
        if group.history_of is None:
            out[group.name] = {"size": group.size, "clip": group.clip, "terms": terms}
            continue
        width = group.size
        out[group.name] = {
            "size": group.frames * width, "clip": group.clip, "history_of": group.history_of, "frames": group.frames,
            "order": "newest_first", "lags": list(range(1, group.frames + 1)), "before_episode_start": "first_frame",
            "summary": f"frame k holds the {group.history_of} group of lags[k-1] control steps before the current "
                       f"one; frames from before the episode's first step hold that first step's {group.history_of} "
                       "group (so at the first step every frame is the current group)",
            "terms": [{**t, "name": f"{t['name']}@t-{k}", "start": (k - 1) * width + t["start"],
                       "stop": (k - 1) * width + t["stop"]} for k in range(1, group.frames + 1) for t in terms]}
    return out


#: Width of the ``policy`` group (one frame).
POLICY_SIZE = observation_groups(Go2Cfg())["policy"].size

__all__ = ["BIAS_TERMS", "POLICY_SIZE", "SOURCES", "ObsGroup", "ObsTerm", "Read", "interface", "observation_groups",
           "observe", "term_value"]
