"""``python -m rlcore.robustness policy=<policy.onnx | run dir | shipped name> [settle_s=1] [measure_s=5] [variants=[...]]``.

A deployment check of an exported legged policy: the ``.onnx`` file alone (run through onnxruntime, with the
joint order, gains, action scale, timing and observation layout read from its ``metadata_props``) walks
closed-loop in its task's simulator on the task's fixed grid of robot variants under the task's probe commands
(the task supplies both, :class:`rlcore.env.task.RobustnessSuite`; for the Go2,
:data:`rlcore_tasks.go2.variants.ROBUSTNESS_GRID`: joint damping and friction, soft and 6-D foot contacts, heavier
legs and base, kp -25 %/+25 %, 10/20 ms latency, ground friction, and a combined "worst plausible" robot). Every
(variant, command) case is one env of a single batch; each gets ``settle_s`` to reach its command, then
``measure_s`` measured. A probe command is held from the start, ``(name, command)``, or is a *step from rest*,
``(name, command, from_rest_s)``: the env's command is zero for the first ``from_rest_s`` seconds, then steps to
``command``, and the case's own ``settle_s`` + ``measure_s`` start at the step (each case's window is offset by its
own ``from_rest_s``; the batch runs as long as its longest case, and what an env does after its case ended is not
counted, falls included, so every case is measured as if it ran alone). For a step case ``rise_s`` is the time from
the step until the velocity along the command (planar: projected on the command's direction; a pure turn: the yaw
rate with the command's sign), averaged over :data:`RISE_AVERAGE_S` centred on each control step to ride over the
gait's sway, first reaches :data:`RISE_FRACTION` of the command (None if it never does).

Per case: the mean velocity reached (vx, vy in the base frame, yaw rate), the mean planar velocity error
``|cmd_xy - v_xy|`` over the control steps (it counts the gait's own sway about its mean velocity as error), the
error of the reached velocity ``|cmd_xy - mean(v_xy)|`` (column ``reached``: how well the command is tracked on
average, without the sway) and the yaw-rate error, and whether the robot fell (the task's termination: base contact, tilt,
base too low) or the physics became unstable (MuJoCo reset the state, or it is not finite; counted as a fall).
After a fall the robot counts as standing still for the rest of the measured time. A variant's ``err`` is the
mean planar error over its commands; ``worst_err`` the largest over the variants (a line gives the same three
figures for the error of the reached velocity, ``nominal_err_reached`` etc.); these errors count every case,
step cases included (measured after their step). Per case also the reached/commanded ratios (:func:`reached_ratios`:
``ratio_xy`` the planar velocity along the command over the command's speed, ``ratio_yaw`` the yaw rate over the
commanded one; None for a zero command), which show a policy that turns too slowly (or too fast) at a glance; a line
gives their range over the held yaw commands (:func:`yaw_summary`) and one the rise times of the steps
(:func:`step_summary`). The planar error does not see a robot that ignores a turn command, so the line before the
last gives the yaw-rate errors and the cases whose command was *not followed*: the robot stayed up but reached less
than half of the commanded planar speed (along the command) or yaw rate (:data:`FOLLOW_FRACTION`). The last line
is::

    robustness: nominal_err=<m/s> mean_err=<m/s> worst_err=<m/s> falls=<n>/<cases> policy=<path>

Run ``python -m rlcore.robustness --help`` for every key.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlcore.config.cli import UserError, check_counts, parse_key_values, split_env_overrides, usage, user_errors
from rlcore.env.task import RobustnessSuite, find_pretrained, get_task, shipped_policies, tasks_with
from rlcore.errors import ConfigError

# torch, onnxruntime and the task's simulator load inside the functions that use them, so that ``--help`` and a
# bad argument answer at once.

SUMMARY = ("Run an exported ONNX policy (onnxruntime only; its interface from the file's metadata) on its task's grid "
           "of robot variants x probe commands; print velocity errors and falls per case and variant.")

#: A non-zero planar command or yaw rate counts as followed when at least this fraction of it is reached (the
#: planar velocity projected on the command's direction; the yaw rate with the command's sign).
FOLLOW_FRACTION = 0.5

#: A step case has risen when the velocity along its command reaches this fraction of the command ...
RISE_FRACTION = 0.9
#: ... averaged over this many seconds centred on each control step (a trotting Go2 sways by about 0.05 m/s at
#: 2-3 Hz: a single step's velocity would cross early on a sway peak).
RISE_AVERAGE_S = 0.2

#: Interface entries the tool needs from the file.
REQUIRED = ("robot", "joint_names", "default_joint_pos", "kp", "kd", "action_scale", "action_clip", "physics_dt",
            "decimation", "solver", "inputs", "obs_groups", "obs_layout", "observation_groups")


@dataclass
class RobustnessCfg:
    """Keys of ``python -m rlcore.robustness``."""

    policy: str = ""  # an exported policy.onnx, a run directory (its exported/policy.onnx or policy.onnx), or a shipped policy's name
    settle_s: float = 1.0  # seconds to reach the command before measuring
    measure_s: float = 5.0  # seconds measured
    variants: list[str] = field(default_factory=list)  # names from the grid (empty: all)
    threads: int | None = None  # MuJoCo rollout threads (None: all available cores)
    solver_iterations: int | None = None  # replaces the file's MuJoCo solver iterations (None: the file's)
    table: str = "full"  # full: one row per case, then per variant; summary: per variant only
    # std of Gaussian noise added to the policy's actions at every control step (action units, before the env's clip;
    # 0: none): a stress test of how close to a fall the policy walks
    action_noise: float = 0.0
    repeats: int = 1  # runs of each case, as cases named <command>#<k> (with action_noise: independent noise draws)
    seed: int = 0  # seed of the action noise


def resolve_policy(path: str) -> str:
    """The ONNX file of ``path``: the file itself, a run directory's ``exported/policy.onnx`` / ``policy.onnx``, or
    the file of a policy shipped with a task (``go2_flat``: the task's ``TaskSpec.pretrained``) when no such path
    exists."""
    if not os.path.exists(path) and path in shipped_policies():
        return find_pretrained(path).path
    if os.path.isdir(path):
        for candidate in (os.path.join(path, "exported", "policy.onnx"), os.path.join(path, "policy.onnx")):
            if os.path.isfile(candidate):
                return candidate
        raise UserError(f"{path}: no exported/policy.onnx or policy.onnx in this directory; export one with "
                        f"python -m rlcore.export checkpoint={path} format=onnx.")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file or directory; give an exported policy.onnx, a run directory or a "
                        f"shipped policy ({', '.join(shipped_policies()) or 'none installed'}).")
    return path


def load_interface(path: str) -> tuple[dict, RobustnessSuite]:
    """The file's rlcore interface and its task's robustness suite; a UserError if it is not ONNX, has no interface,
    its task has no robustness suite, or the interface lacks what the closed loop needs."""
    from google.protobuf.message import DecodeError

    from rlcore.deployment import read_onnx_interface, upgrade_interface

    try:  # reading the user's file: what can go wrong with the file itself is a user error
        meta = read_onnx_interface(path, raw=True)
    except (OSError, DecodeError, ValueError) as err:  # unreadable, not ONNX, metadata that is not JSON
        raise UserError(f"{path}: cannot read it as an ONNX model with rlcore metadata "
                        f"({' '.join(str(err).split())[:160]}).") from None
    meta = upgrade_interface(meta) if meta else meta  # rlcore's own code: a failure here is a bug, not the file's
    if not meta:
        raise UserError(f"{path} has no rlcore interface in its metadata (rlcore.* metadata_props); export it with "
                        "this rlcore: python -m rlcore.export checkpoint=<run> format=onnx.")
    suite = suite_of(meta, path)  # first: a file of a task without a grid is told so, not what it lacks
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise UserError(f"{path}: its rlcore metadata lacks {', '.join(missing)} (exported by rlcore "
                        f"{meta.get('version')}); re-export it with this rlcore.")
    return meta, suite


def suite_of(meta: dict, path: str = "the policy") -> RobustnessSuite:
    """The robustness suite of the task ``meta`` (an exported file's interface) names; one line when the task is
    not installed or has none."""
    task = str(meta.get("task"))
    try:
        spec = get_task(task)
    except ConfigError as err:
        raise UserError(f"{path} is a policy for task {task!r}: {err}") from None
    if spec.robustness is None:
        raise UserError(f"{path} is a policy for task {task!r}, which has no robustness grid; tasks with one: "
                        f"{', '.join(tasks_with('robustness')) or 'none installed'}.")
    return spec.robustness()


def select_variants(names: Sequence[str], grid: Sequence) -> list:
    """The variants of ``grid`` (a :class:`~rlcore.env.task.RobustnessSuite`'s) named in ``names`` (all when empty),
    in grid order."""
    if not names:
        return list(grid)
    known = [v.name for v in grid]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"variants: unknown {unknown}; valid: {', '.join(known)}.")
    return [v for v in grid if v.name in names]


def evaluate(policy: str, variants: Sequence | None = None, commands: Sequence[tuple] | None = None, settle_s: float = 1.0,
             measure_s: float = 5.0, threads: int | None = None, solver_iterations: int | None = None,
             table: str = "full", action_noise: float = 0.0, repeats: int = 1, seed: int = 0,
             env_overrides: dict | None = None, out: Callable[[str], None] = print) -> dict:
    """Run the robustness grid on an exported policy; print the tables and the summary line; return the results.

    Args:
        policy: a ``policy.onnx`` with rlcore metadata, or a run directory holding one.
        variants: the task's variants or their names in its grid, e.g. ``["nominal"]`` (default: the whole grid).
        commands: probe commands (default: the task's): ``(name, (vx, vy, yaw rate))``, held from the start, or
            ``(name, (vx, vy, yaw rate), from_rest_s)``, a step from rest: zero command for ``from_rest_s``
            seconds, then the command (the policy sees it in its next observation); the case's settle and measured
            time start at the step, so the batch runs ``max(from_rest_s)`` longer and a held case's env idles,
            uncounted, after its case ended.
        settle_s, measure_s: seconds before measuring and seconds measured (after the step for a step case).
        threads: MuJoCo rollout threads (None: all available cores).
        solver_iterations: MuJoCo solver iterations instead of the file's (None: the policy's own physics).
        table: ``"full"`` (a row per case and per variant), ``"summary"`` (per variant), ``"none"``.
        action_noise: std of Gaussian noise added to the policy's actions at every control step (action units,
            before the env clips them). A deterministic policy on a deterministic simulator can pass a hard case by
            a hair; with noise of a few hundredths (much less than a trained PPO policy's own exploration noise)
            a policy that walks with a margin still does not fall.
        repeats: run every case this many times (cases named ``<command>#<k>``; the falls count over all of them),
            each with its own noise draws.
        seed: seed of the noise (the same seed: the same draws).
        env_overrides: task settings merged over those the file implies (``task.env.*`` on the command line, e.g.
            ``{"sim": {"backend": "warp"}}``: the grid on another physics backend).
        out: where lines go.

    Returns:
        ``cases`` (a dict per case: ``variant``, ``command``, ``cmd``, ``from_rest_s`` (None: held), ``vel``,
        ``err_xy``, ``err_yaw``, ``err_reached_xy``, ``ratio_xy``, ``ratio_yaw`` (:func:`reached_ratios`),
        ``rise_s`` (:func:`rise_time`; None for a held case or a step never reached), ``fell``, ``unstable``,
        ``fall_time_s`` (from the start of the run), ``not_followed``), ``variants`` (a dict per variant name),
        ``nominal_err``, ``mean_err``, ``worst_err``, ``worst_variant`` (over all cases, step cases included),
        ``falls``, ``unstable``, ``cases_n``, the yaw-rate figures ``nominal_err_yaw``, ``mean_err_yaw``,
        ``worst_err_yaw``, ``worst_yaw_variant``, the yaw ratios of :func:`yaw_summary`, the rise times of
        :func:`step_summary`, ``not_followed`` (the cases whose ``not_followed`` reason, from :func:`not_followed`,
        is not empty), ``wall_s``, ``policy``, ``action_noise``, ``repeats``.
    """
    start = time.perf_counter()
    path = resolve_policy(str(policy))
    meta, suite = load_interface(path)
    variants = list(suite.grid if variants is None else variants)
    names = [v for v in variants if isinstance(v, str)]
    if names:  # names resolve to the grid's variants, in the order given
        by_name = {v.name: v for v in select_variants(names, suite.grid)}
        variants = [by_name[v] if isinstance(v, str) else v for v in variants]
    commands = [probe_command(c) for c in (suite.probe_commands if commands is None else commands)]
    if not variants or not commands:
        raise UserError("robustness: give at least one variant and one command.")
    if not (action_noise >= 0 and int(repeats) >= 1):
        raise UserError(f"action_noise={action_noise}, repeats={repeats}: need action_noise >= 0 and repeats >= 1.")
    if int(repeats) > 1:
        commands = [(f"{name}#{k}", c, f) for name, c, f in commands for k in range(int(repeats))]
    if not (settle_s >= 0 and measure_s > 0):
        raise UserError(f"settle_s={settle_s}, measure_s={measure_s}: need settle_s >= 0 and measure_s > 0.")
    control_dt = meta["physics_dt"] * meta["decimation"]
    settle, measured = round(settle_s / control_dt), max(1, round(measure_s / control_dt))
    lead = int(_lead_steps(commands, control_dt).max())
    env = _grid_env(suite, path, meta, len(variants) * len(commands), (lead + settle + measured + 50) * control_dt,
                    threads, solver_iterations, env_overrides)
    noise = (float(action_noise), np.random.default_rng(seed)) if action_noise > 0 else None
    run = _run_grid(env, path, meta, variants, commands, settle, measured, noise)
    result = {"policy": path, **_summarise(run, variants, commands, suite.describe)}
    result["wall_s"] = time.perf_counter() - start
    result["action_noise"], result["repeats"] = float(action_noise), int(repeats)
    _report(result, meta, variants, commands, settle * control_dt, measured * control_dt, table, out)
    return result


def probe_command(entry) -> tuple[str, tuple[float, ...], float | None]:
    """``(name, command, from_rest_s)`` of a probe command given as ``(name, (vx, vy, yaw rate))`` (held from the
    start: ``from_rest_s`` None) or ``(name, (vx, vy, yaw rate), from_rest_s)`` (a step from rest after
    ``from_rest_s`` > 0 seconds); a UserError for anything else."""
    try:
        name, cmd, *rest = entry
        cmd, from_rest = tuple(float(x) for x in cmd), (float(rest[0]) if rest else None)
        ok = len(rest) <= 1 and len(cmd) == 3 and (from_rest is None or (from_rest > 0 and math.isfinite(from_rest)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"probe command {entry!r}: give (name, (vx, vy, yaw rate)) or (name, (vx, vy, yaw rate), "
                        "from_rest_s) with from_rest_s > 0.")
    return str(name), cmd, from_rest


def _lead_steps(commands: Sequence[tuple], control_dt: float) -> np.ndarray:
    """Per command (:func:`probe_command`'s triples), the control steps of zero command before it: 0 when held,
    ``from_rest_s`` in whole control steps (at least one) for a step from rest."""
    return np.array([0 if f is None else max(1, round(f / control_dt)) for _, _, f in commands], dtype=int)


def _grid_env(suite: RobustnessSuite, path: str, meta: dict, n: int, episode_s: float, threads: int | None,
              solver_iterations: int | None, env_overrides: dict | None = None):
    """The task as ``meta`` (the file's interface) describes it, with ``n`` envs (``suite.make_env``); a UserError
    when the task cannot be that (another robot or observation layout)."""
    try:
        extra = {"overrides": env_overrides} if env_overrides else {}
        return suite.make_env(meta, n, episode_s=episode_s, threads=threads, solver_iterations=solver_iterations,
                              **extra)
    except ConfigError as err:  # the file describes another robot or layout than this task (not a bug here)
        raise UserError(f"{path}: {' '.join(str(err).split())[:300]}; re-export it with this rlcore.") from None


def _run_grid(env, path: str, meta: dict, variants: list, commands: list, settle: int, measured: int,
              noise: tuple | None = None) -> dict:
    """Env ``e`` gets variant ``e // C`` and command ``e % C`` (C commands, :func:`probe_command`'s triples); all run
    closed-loop at once (:func:`_closed_loop`'s results, ``noise`` and the steps from rest passed on). Closes
    ``env``."""
    import torch

    try:
        env.assign_variants(variants, np.repeat(np.arange(len(variants)), len(commands)))
        cmd = torch.tensor([c for _, c, _ in commands], dtype=torch.float32)  # [C, 3]
        env.commands[:] = cmd.repeat(len(variants), 1)  # [N, 3]
        lead = np.tile(_lead_steps(commands, meta["physics_dt"] * meta["decimation"]), len(variants))
        return _closed_loop(env, session_of(path), meta, settle, measured, noise, lead)
    finally:
        env.close()


def _summarise(run: dict, variants: list, commands: list, describe: Callable) -> dict:
    """The grid's results from the closed-loop arrays: ``cases`` (one dict per env), ``variants`` (per variant: mean
    errors over its commands, falls, what ``describe`` says it changes) and the summary figures of
    :func:`evaluate`'s return value."""

    n_cmd, dt = len(commands), run["control_dt"]
    cases = []
    for e in range(len(variants) * n_cmd):
        v, c = variants[e // n_cmd], commands[e % n_cmd]
        fall_time = float(run["fall_time"][e])
        cases.append({"variant": v.name, "command": c[0], "cmd": list(c[1]), "from_rest_s": c[2],
                      "vel": run["vel"][e].tolist(), "err_xy": float(run["err_xy"][e]),
                      "err_yaw": float(run["err_yaw"][e]),
                      "err_reached_xy": float(math.hypot(c[1][0] - run["vel"][e][0], c[1][1] - run["vel"][e][1])),
                      "fell": bool(run["fallen"][e]), "unstable": bool(run["unstable"][e]),
                      "fall_time_s": None if math.isnan(fall_time) else fall_time})
        cases[-1].update(reached_ratios(cases[-1]))
        along = along_command(c[1], run["trace"][:run["end"][e], e]) if c[2] is not None else None
        cases[-1]["rise_s"] = None if along is None else rise_time(along[0], along[1], int(run["lead"][e]), dt)
        cases[-1]["not_followed"] = not_followed(cases[-1])
    per_variant = {}
    for i, v in enumerate(variants):
        mine = cases[i * n_cmd:(i + 1) * n_cmd]
        per_variant[v.name] = {"err": float(np.mean([c["err_xy"] for c in mine])),
                               "err_yaw": float(np.mean([c["err_yaw"] for c in mine])),
                               "err_reached": float(np.mean([c["err_reached_xy"] for c in mine])),
                               "falls": sum(c["fell"] for c in mine), "unstable": sum(c["unstable"] for c in mine),
                               "changes": describe(v)}
    def over_variants(key: str, suffix: str, worst_name: str) -> dict:
        """``nominal_err<suffix>``, ``mean_err<suffix>``, ``worst_err<suffix>`` and ``worst_name`` of ``key``."""
        errs = {name: r[key] for name, r in per_variant.items()}
        worst = max(errs, key=errs.get)
        return {f"nominal_err{suffix}": errs.get("nominal", float("nan")),
                f"mean_err{suffix}": float(np.mean(list(errs.values()))), f"worst_err{suffix}": errs[worst],
                worst_name: worst}

    return {"cases": cases, "variants": per_variant, **over_variants("err", "", "worst_variant"),
            "falls": int(run["fallen"].sum()), "unstable": int(run["unstable"].sum()), "cases_n": len(cases),
            **over_variants("err_yaw", "_yaw", "worst_yaw_variant"),
            **over_variants("err_reached", "_reached", "worst_reached_variant"), **yaw_summary(cases),
            **step_summary(cases), "not_followed": [c for c in cases if c["not_followed"]]}


def reached_ratios(case: dict) -> dict:
    """``ratio_xy``: the case's reached planar velocity projected on its command's direction over the command's
    speed, ``ratio_yaw``: its reached yaw rate over the commanded one (None where that command is zero). 1 is
    perfect tracking; a robot that moves against the command has a negative ratio; a fallen robot counts as
    standing still for the rest of the measured time (its ``vel``), as in the errors."""
    (cx, cy, cz), (vx, vy, vz) = case["cmd"], case["vel"]
    speed = math.hypot(cx, cy)
    return {"ratio_xy": (vx * cx + vy * cy) / speed**2 if speed > 0.0 else None,
            "ratio_yaw": vz / cz if cz != 0.0 else None}


def along_command(cmd: Sequence[float], trace: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The velocity along the command ``(vx, vy, yaw rate)`` over a ``trace [T, 3]`` of velocities, and the
    command's size in it: the planar velocity projected on the command's direction and its speed for a planar
    command, else the yaw rate with the command's sign and its magnitude (None for a zero command)."""
    speed = math.hypot(cmd[0], cmd[1])
    if speed > 0.0:
        return (trace[:, 0] * cmd[0] + trace[:, 1] * cmd[1]) / speed, speed
    if cmd[2] != 0.0:
        return trace[:, 2] * math.copysign(1.0, cmd[2]), abs(cmd[2])
    return None


def rise_time(along: np.ndarray, target: float, step: int, dt: float,
              average_s: float = RISE_AVERAGE_S) -> float | None:
    """Seconds from the step of a command (set before control step ``step``) until the velocity along it, ``along
    [T]`` (``along[k]``: after control step ``k``, i.e. ``(k + 1) * dt`` into the run), averaged over the
    ``2 * round(average_s / dt / 2) + 1`` samples centred on each step (fewer at the ends of the trace), first
    reaches :data:`RISE_FRACTION` of ``target`` (> 0); None if it never does."""
    half = round(average_s / dt / 2)
    total = np.concatenate([[0.0], np.cumsum(along)])
    k = np.arange(step, len(along))
    lo, hi = np.maximum(k - half, 0), np.minimum(k + half + 1, len(along))
    hit = np.flatnonzero((total[hi] - total[lo]) / (hi - lo) >= RISE_FRACTION * target)
    return float((k[hit[0]] + 1 - step) * dt) if hit.size else None


def yaw_summary(cases: Sequence[dict]) -> dict:
    """The yaw ratios (:func:`reached_ratios`) over the held cases (no step from rest) with a non-zero yaw command:
    ``yaw_ratio_nominal_min``/``_max`` over the nominal variant's, ``yaw_ratio_min`` over every variant's and its
    ``yaw_ratio_min_case`` ``(variant, command)`` (None when there are no such cases)."""
    held = [c for c in cases if c["from_rest_s"] is None and c["ratio_yaw"] is not None]
    nominal = [c["ratio_yaw"] for c in held if c["variant"] == "nominal"]
    low = min(held, key=lambda c: c["ratio_yaw"], default=None)
    return {"yaw_ratio_nominal_min": min(nominal, default=None), "yaw_ratio_nominal_max": max(nominal, default=None),
            "yaw_ratio_min": None if low is None else low["ratio_yaw"],
            "yaw_ratio_min_case": None if low is None else (low["variant"], low["command"])}


def step_summary(cases: Sequence[dict]) -> dict:
    """The rise times of the steps from rest (:func:`rise_time`): ``rise_s_nominal`` (command name -> the nominal
    variant's rise_s, None if never reached), ``rise_s_max`` and its ``rise_s_max_case`` ``(variant, command)`` over
    the steps reached, ``rise_s_never`` the ``(variant, command)`` of those never reached (fallen ones included)
    and ``steps_n`` the number of step cases."""
    steps = [c for c in cases if c["from_rest_s"] is not None]
    risen = [c for c in steps if c["rise_s"] is not None]
    slow = max(risen, key=lambda c: c["rise_s"], default=None)
    return {"rise_s_nominal": {c["command"]: c["rise_s"] for c in steps if c["variant"] == "nominal"},
            "rise_s_max": None if slow is None else slow["rise_s"],
            "rise_s_max_case": None if slow is None else (slow["variant"], slow["command"]),
            "rise_s_never": [(c["variant"], c["command"]) for c in steps if c["rise_s"] is None], "steps_n": len(steps)}


def not_followed(case: dict) -> str:
    """Why a case's robot, still standing, did not follow its command ("" if it did or fell).

    A non-zero planar command is followed when the reached planar velocity, projected on the command's direction,
    is at least :data:`FOLLOW_FRACTION` of the command's speed; a non-zero yaw rate when the reached yaw rate is at
    least that fraction of it, with its sign. Example: ``"yaw -0.02 of -1.0 rad/s"`` for a robot that does not turn.
    """
    if case["fell"]:
        return ""
    (cx, cy, cz), (vx, vy, vz) = case["cmd"], case["vel"]
    why = []
    speed = math.hypot(cx, cy)
    along = (vx * cx + vy * cy) / speed if speed > 0.0 else 0.0
    if speed > 0.0 and along < FOLLOW_FRACTION * speed:
        why.append(f"planar {along:+.2f} of {speed:.1f} m/s")
    if cz != 0.0 and vz / cz < FOLLOW_FRACTION:
        why.append(f"yaw {vz:+.2f} of {cz:+.1f} rad/s")
    return ", ".join(why)


def _closed_loop(env, session, meta: dict, settle: int, measured: int, noise: tuple | None = None,
                 lead: np.ndarray | None = None) -> dict:
    """Drive ``env`` (commands set) with the ONNX ``session``; ``noise``: ``(std, numpy Generator)`` of Gaussian noise
    added to the actions (the policy's state is its own, noise-free); ``lead [N]``: control steps of zero command
    before env ``e``'s command (0, the default: held from the start). Env ``e``'s case runs ``lead[e] + settle +
    measured`` control steps, measured over the last ``measured``; the batch runs as long as its longest case, and
    what an env does after its case ended (falls included) is not counted.

    Returns numpy arrays over the N envs: ``vel [N, 3]`` (mean measured vx, vy, yaw rate; zero once fallen),
    ``err_xy``, ``err_yaw`` (mean measured errors), ``fallen``, ``unstable`` (the fall was a physics failure or a
    non-finite action), ``fall_time`` (seconds from the start, NaN if none), ``trace [T, N, 3]`` (vx, vy, yaw rate
    after every control step; zero once fallen), ``lead``, ``end`` (control steps of each case) and ``control_dt``.
    """
    import torch

    n = env.num_envs
    policy = OnnxPolicy(session, meta, n)
    cmd = env.commands.detach().cpu().numpy().astype(np.float64)
    lead = np.zeros(n, dtype=int) if lead is None else np.asarray(lead, dtype=int)
    begin, end = lead + settle, lead + settle + measured  # each case's measured window
    env.commands[torch.from_numpy(lead > 0).to(env.commands.device)] = 0.0  # steps from rest: zero until their step
    fallen, unstable = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    fall_time = np.full(n, np.nan)
    vel_sum, err_xy_sum, err_yaw_sum = np.zeros((n, 3)), np.zeros(n), np.zeros(n)
    trace = np.zeros((int(end.max()), n, 3))
    control_dt = meta["physics_dt"] * meta["decimation"]
    obs = env.get_observations()
    with torch.inference_mode():
        for step in range(int(end.max())):
            due = (lead == step) & (lead > 0)
            if due.any():  # the step: the policy sees the command in its next observation
                env.commands[torch.from_numpy(due).to(env.commands.device)] = torch.from_numpy(cmd[due]).to(env.commands)
            actions, bad_action = policy(obs)
            if noise is not None:
                actions = actions + (noise[0] * noise[1].standard_normal(actions.shape)).astype(np.float32)
            obs, _, dones, extras = env.step(torch.from_numpy(actions))
            now_unstable = env.sim.unstable.cpu().numpy() | bad_action
            fell = ((dones & ~extras["time_outs"]).cpu().numpy() | now_unstable) & (step < end)  # ended: not counted
            first = fell & ~fallen
            fall_time[first] = (step + 1) * control_dt
            unstable |= first & now_unstable
            fallen |= fell
            vel = np.concatenate([env.base_lin_vel[:, :2].cpu().numpy(), env.base_ang_vel[:, 2:].cpu().numpy()],
                                 axis=1).astype(np.float64)
            vel[fallen] = 0.0  # a fallen robot makes no progress
            trace[step] = vel
            window = (step >= begin) & (step < end)  # np.where: an ended case's env may hold anything
            vel_sum += np.where(window[:, None], vel, 0.0)
            err_xy_sum += np.where(window, np.linalg.norm(cmd[:, :2] - vel[:, :2], axis=1), 0.0)
            err_yaw_sum += np.where(window, np.abs(cmd[:, 2] - vel[:, 2]), 0.0)
    return {"vel": vel_sum / measured, "err_xy": err_xy_sum / measured, "err_yaw": err_yaw_sum / measured,
            "fallen": fallen, "unstable": unstable, "fall_time": fall_time, "trace": trace, "lead": lead, "end": end,
            "control_dt": control_dt}


class OnnxPolicy:
    """An exported policy run by onnxruntime on ``n`` envs: ``policy(obs)`` feeds it the env's observations
    (:func:`feeder`) and its recurrent state (zeros at first, then its own outputs, ``meta["recurrent_state"]``)
    and returns ``(actions [n, A] float32, bad [n] bool)``: rows with a non-finite action are zeroed and flagged
    in ``bad``.

    Args:
        session: an onnxruntime session (:func:`session_of`) or the path of the file.
        meta: the file's interface (:func:`load_interface`).
        n: number of envs.
    """

    def __init__(self, session, meta: dict, n: int) -> None:
        self.session = session_of(session) if isinstance(session, (str, os.PathLike)) else session
        self.meta = meta
        self.feeds_of = feeder(meta, self.session)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.state = {s["input"]: np.zeros((s["shape"][0], n, s["shape"][2]), dtype=np.float32)
                      for s in meta["recurrent_state"]}

    def __call__(self, obs) -> tuple[np.ndarray, np.ndarray]:
        outputs = dict(zip(self.output_names, self.session.run(None, {**self.feeds_of(obs), **self.state})))
        for s in self.meta["recurrent_state"]:
            self.state[s["input"]] = outputs[s["output"]]
        actions = outputs["actions"]
        bad = ~np.isfinite(actions).all(axis=1)
        return np.where(bad[:, None], 0.0, actions).astype(np.float32), bad


def session_of(path: str):
    """An onnxruntime CPU session of ``path`` (one thread); a UserError when onnxruntime cannot load it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # a small network: threads would only contend with MuJoCo's
    options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as err:
        raise UserError(f"{path}: onnxruntime cannot load it ({' '.join(str(err).split())[:200]}).") from None


def feeder(meta: dict, session) -> Callable:
    """A function from the env's observations (TensorDict) to the session's observation inputs."""
    import torch

    groups = list(meta["obs_groups"])
    state_names = {s["input"] for s in meta["recurrent_state"]}
    image_inputs = [i["name"] for i in meta["inputs"] if i["name"] not in state_names and i["name"] != "obs"]
    real = {i.name for i in session.get_inputs()}
    expected = {i["name"] for i in meta["inputs"]}
    if real != expected:
        raise UserError(f"the graph's inputs {sorted(real)} are not those its metadata lists ({sorted(expected)}).")

    def feeds(obs) -> dict:
        out = {}
        if "obs" in expected:
            flat = torch.cat([obs[g] for g in groups], dim=-1) if len(groups) > 1 else obs[groups[0]]
            out["obs"] = flat.detach().float().cpu().numpy()
        for name in image_inputs:
            out[name] = obs[name].detach().float().cpu().numpy()
        return out

    return feeds


def _fmt(x: float | None, spec: str = ".2f") -> str:
    """``x`` formatted by ``spec``, ``-`` for None."""
    return "-" if x is None else format(x, spec)


def _report(result: dict, meta: dict, variants: list, commands: list, settle_s: float, measure_s: float, table: str,
            out: Callable[[str], None]) -> None:
    cases, per_variant = result["cases"], result["variants"]
    if table != "none":
        steps = sorted({f for _, _, f in commands if f is not None})
        out(f"robustness of {result['policy']} (task {meta.get('task')}, {meta.get('model')}, rlcore "
            f"{meta.get('version')}): {len(variants)} variants x {len(commands)} commands = {len(cases)} envs, "
            f"{settle_s:g} s settle + {measure_s:g} s measured"
            + (f" (steps from rest: after {'/'.join(f'{f:g}' for f in steps)} s of zero command)" if steps else "")
            + (f", action noise std {result['action_noise']:g}" if result["action_noise"] > 0 else ""))
    if table == "full":
        out(f"{'variant':<20} {'command':<15} {'cmd vx/vy/wz':>17} {'reached vx/vy/wz':>20} {'err_xy':>7} "
            f"{'reached':>7} {'err_yaw':>7} {'ratio xy/wz':>11}  fall")
        for c in cases:
            fall = "-" if not c["fell"] else f"{'unstable' if c['unstable'] else 'fell'}@{c['fall_time_s']:.2f}s"
            cmd = "/".join(f"{x:+.1f}" for x in c["cmd"])
            vel = "/".join(f"{x:+.2f}" for x in c["vel"])
            ratio = f"{_fmt(c['ratio_xy'])}/{_fmt(c['ratio_yaw'])}"
            out(f"{c['variant']:<20} {c['command']:<15} {cmd:>17} {vel:>20} {c['err_xy']:7.3f} "
                f"{c['err_reached_xy']:7.3f} {c['err_yaw']:7.3f} {ratio:>11}  {fall}")
    if table in ("full", "summary"):
        out(f"{'variant':<20} {'err':>7} {'reached':>7} {'err_yaw':>7} {'falls':>6} {'unstable':>8}  changes")
        for name, r in per_variant.items():
            out(f"{name:<20} {r['err']:7.3f} {r['err_reached']:7.3f} {r['err_yaw']:7.3f} {r['falls']:>3}/{len(commands):<2} "
                f"{r['unstable']:>8}  {r['changes']}")
        out(f"worst variant: {result['worst_variant']}; unstable physics: {result['unstable']} case(s); "
            f"wall time {result['wall_s']:.1f} s")
    missed = result["not_followed"]
    listed = "; ".join(f"{c['variant']}/{c['command']} ({c['not_followed']})" for c in missed[:8])
    more = f"; and {len(missed) - 8} more" if len(missed) > 8 else ""
    out(f"reached velocity: nominal_err_reached={result['nominal_err_reached']:.3f} "
        f"mean_err_reached={result['mean_err_reached']:.3f} worst_err_reached={result['worst_err_reached']:.3f} "
        f"({result['worst_reached_variant']}): the error of the mean planar velocity over the measured time (err also "
        "counts the gait's sway about it)")
    if result["steps_n"]:
        nominal = " ".join(f"{k}={_fmt(v)}" for k, v in result["rise_s_nominal"].items()) or "-"
        slow = result["rise_s_max_case"]
        out(f"steps from rest: rise_s (to {RISE_FRACTION:g} of the command, {RISE_AVERAGE_S:g} s average) nominal "
            f"{nominal}; max {_fmt(result['rise_s_max'])}" + (f" ({slow[0]}/{slow[1]})" if slow else "")
            + f"; never reached {len(result['rise_s_never'])}/{result['steps_n']}")
    if result["yaw_ratio_min_case"] is not None:
        low = result["yaw_ratio_min_case"]
        out(f"yaw ratio (reached/commanded, held yaw commands): nominal {_fmt(result['yaw_ratio_nominal_min'])}.."
            f"{_fmt(result['yaw_ratio_nominal_max'])}, min {result['yaw_ratio_min']:.2f} ({low[0]}/{low[1]})")
    out(f"yaw rate: nominal_err_yaw={result['nominal_err_yaw']:.3f} mean_err_yaw={result['mean_err_yaw']:.3f} "
        f"worst_err_yaw={result['worst_err_yaw']:.3f} ({result['worst_yaw_variant']}); commands not followed "
        f"(standing, under {FOLLOW_FRACTION:g} of the command reached): {len(missed)}/{result['cases_n']}"
        + (f": {listed}{more}" if missed else ""))
    out(f"robustness: nominal_err={result['nominal_err']:.3f} mean_err={result['mean_err']:.3f} "
        f"worst_err={result['worst_err']:.3f} falls={result['falls']}/{result['cases_n']} policy={result['policy']}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m rlcore.robustness`` and ``rlcore-robustness``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(usage("robustness", RobustnessCfg, SUMMARY))
        return
    with user_errors():
        if argv and "=" not in argv[0] and not argv[0].startswith("-"):  # arguments are key=value, like every tool's
            raise UserError(f"arguments are key=value: write policy={argv[0]}.")
        # variants=nominal means variants=[nominal] (one name, or names separated by commas)
        argv = [f"variants=[{a.split('=', 1)[1]}]" if a.startswith("variants=") and not a.startswith("variants=[")
                else a for a in argv]
        argv, env_overrides = split_env_overrides(argv, "robustness")  # task.env.sim.backend=warp, ...
        args = parse_key_values(argv, RobustnessCfg, "robustness")
        if not args["policy"]:
            raise UserError("robustness needs a policy: python -m rlcore.robustness policy=<policy.onnx | run dir | "
                            "shipped name>.")
        if args["table"] not in ("full", "summary", "none"):
            raise UserError(f"table={args['table']}: use full, summary or none.")
        check_counts(args, ("threads", "solver_iterations"))  # repeats: evaluate checks it, for Python callers too
        evaluate(args["policy"], list(args["variants"]) or None, settle_s=float(args["settle_s"]),
                 measure_s=float(args["measure_s"]), threads=args["threads"],
                 solver_iterations=args["solver_iterations"], table=args["table"],
                 action_noise=float(args["action_noise"]), repeats=int(args["repeats"]), seed=int(args["seed"]),
                 env_overrides=env_overrides)


if __name__ == "__main__":
    main()
