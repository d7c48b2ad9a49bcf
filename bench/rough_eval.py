"""Rough-terrain evaluation of a Go2 policy from its exported ONNX file alone: fixed courses, success rates.

Training on rough terrain reports a mean terrain level, which mixes every tile kind and moves with the curriculum;
it does not say whether the policy climbs a 13 cm stair. This script runs the ``.onnx`` file (onnxruntime only, the
closed loop of :mod:`rlcore.robustness`: the file's interface gives the actuation, timing, observation layout and
command ranges, :func:`rlcore_tasks.go2.task.env_from_interface`) on fixed straight courses
(``terrain.type = course``, :func:`rlcore_tasks.go2.terrain.course_heights`): flat, rough, stairs up and down of
10/13/16 cm and slopes of 15/25 deg. On each course ``--robots`` robots (nominal robot: no domain randomisation,
no observation noise, no pushes; only the spawn pose's joint scale and velocity differ between robots) start at
x = 1.0 m on the strip's centre line facing +x and are commanded 0.5 m/s forward, no lateral speed, heading +x: the
yaw-rate command comes from the heading error as in training (the task's heading controller, ``commands.heading_*``;
with a yaw rate of 0 held instead, a policy's small turning bias accumulates and walks it off the course).

A robot *succeeds* when its base's x passes the course's finish line (``Terrain.finish_x``) before it falls and
before the time limit ``2 * (finish_x - 1.0) / 0.5 + 4`` s (twice the time the command needs, plus 4 s). A *fall* is
the task's termination other than a time-out (base contact, tilt, base too low) or unstable physics; the first fall
counts and the robot is ignored afterwards. A robot that neither crosses nor falls (e.g. it stands still) is a
*timeout*. The table gives per course: robots, success rate, falls, timeouts and the median time to cross.

Run (from the repository root)::

    python bench/rough_eval.py logs/go2_rough/<run>              # its exported/policy.onnx or policy.onnx
    python bench/rough_eval.py policy.onnx --robots 16 --courses flat,stairs_up_13cm
    python bench/rough_eval.py logs/go2_rough/<run> --curve --robots 16   # every checkpoint: level, rates vs minutes

``--curve`` (a run directory) exports each ``model_<it>.pt`` to ONNX (``python -m rlcore.export``, into
``<run>/curve/``) and evaluates it on the courses of the last line; one line per checkpoint gives its iteration, the
training minutes up to it (the sum of the iterations' collect and learn times in ``train.log``), the mean terrain
level logged at that iteration and each course's rate, as ``curve: it=<i> minutes=<m> level=<l> <course>=<rate> ...``.

Last line (rates with 2 decimals; ``n/a`` for a course not run; ``mean_level``: the run's final mean terrain level,
the last ``terrain_level`` of its ``train.log``, next to the .onnx for a file (or above its ``exported/``), ``n/a`` when there is none)::

    rough_eval: stairs_up_13cm=<rate> stairs_down_13cm=<rate> slope_25deg=<rate> rough=<rate> flat=<rate> mean_level=<l> policy=<path>
"""

from __future__ import annotations

import argparse
import math
import os
import re

from _common import ROOT  # noqa: F401  (the preamble: repository on sys.path, OMP_WAIT_POLICY)

COURSES = ("flat", "rough", "stairs_up_10cm", "stairs_up_13cm", "stairs_up_16cm", "stairs_down_10cm",
           "stairs_down_13cm", "stairs_down_16cm", "slope_15deg", "slope_25deg")
#: The courses of the last line, in its order.
SUMMARY = ("stairs_up_13cm", "stairs_down_13cm", "slope_25deg", "rough", "flat")
SPEED = 0.5  # commanded forward speed [m/s]
#: Commands held for the whole course: heading +x under the task's heading controller, never resampled.
HEADING_X = {"heading_command": True, "heading_fraction": 1.0, "heading": [0.0, 0.0], "resampling_time": 1.0e9}
LEVEL = re.compile(r"(?<![\w/])terrain_level\s+([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan))")
ITERATION = re.compile(r"^it (\d+)/\d+ .*\(collect ([\d.]+)s, learn ([\d.]+)s\)")


def time_limit(finish_x: float) -> float:
    """Seconds a robot has to cross ``finish_x``: twice the time the command needs from the start, plus 4 s."""
    from rlcore_tasks.go2.terrain import COURSE_SPAWN_X

    return 2.0 * (finish_x - COURSE_SPAWN_X) / SPEED + 4.0


def course_env(meta: dict, course: str, robots: int, seed: int = 0, episode_s: float = 1.0e4,
               threads: int | None = None):
    """The Go2 env of the file's interface ``meta`` on ``course``: nominal robot, no observation noise, no pushes,
    robots facing +x and held there by the heading controller (:data:`HEADING_X`), episodes of ``episode_s``."""
    from rlcore_tasks.go2.config import no_randomization
    from rlcore_tasks.go2.env import Go2Env
    from rlcore_tasks.go2.task import env_from_interface

    s = env_from_interface(meta)
    return Go2Env(num_envs=robots, device="cpu", seed=seed, episode_length_s=float(episode_s),
                  sim={**s["sim"], "threads": threads}, control=s["control"],
                  obs={**s["obs"], "add_noise": False}, commands={**s["commands"], **HEADING_X},
                  domain_rand={**s["domain_rand"], **no_randomization()}, init={"random_yaw": False},
                  terrain={"type": "course", "course": course})


def evaluate_course(path: str, course: str, robots: int = 64, seed: int = 0, threads: int | None = None,
                    limit_s: float | None = None) -> dict:
    """Run the policy ``path`` (a .onnx or a run directory) on ``course``.

    ``limit_s`` replaces the time limit (:func:`time_limit`, e.g. for a quick check). Returns ``rate`` (share of
    robots that crossed), ``falls``, ``timeouts``, ``unstable`` (falls that were physics failures), ``crossed`` and
    ``fell`` (bool masks ``[robots]``), ``times`` (seconds to cross, NaN where not crossed), ``finish_x``,
    ``limit_s``, ``policy``.
    """
    import numpy as np
    import torch

    from rlcore.config.cli import UserError
    from rlcore.robustness import OnnxPolicy, load_interface, resolve_policy

    path = resolve_policy(str(path))
    meta, _ = load_interface(path)
    if str(meta.get("task")) not in ("go2", "go2_rough"):
        raise UserError(f"{path} is a policy for task {meta.get('task')!r}; the courses are the Go2's.")
    env = course_env(meta, course, robots, seed, threads=threads)
    try:
        finish = float(env.terrain.finish_x)
        limit = time_limit(finish) if limit_s is None else float(limit_s)
        env.commands[:] = torch.tensor([SPEED, 0.0, 0.0])
        policy = OnnxPolicy(path, meta, robots)
        crossed, fell, unstable = (np.zeros(robots, dtype=bool) for _ in range(3))
        times = np.full(robots, np.nan)
        obs = env.get_observations()
        with torch.inference_mode():
            for step in range(int(math.ceil(limit / env.dt - 1e-9))):
                actions, bad = policy(obs)
                obs, _, dones, extras = env.step(torch.from_numpy(actions))
                live = ~(crossed | fell)
                now_unstable = env.sim.unstable.cpu().numpy() | bad
                falls = live & ((dones & ~extras["time_outs"]).cpu().numpy() | now_unstable)
                fell |= falls
                unstable |= falls & now_unstable
                past = live & ~falls & (env.base_pos[:, 0].cpu().numpy() >= finish)
                crossed |= past
                times[past] = (step + 1) * env.dt
                if (crossed | fell).all():
                    break
    finally:
        env.close()
    return {"policy": path, "course": course, "robots": robots, "rate": float(crossed.mean()),
            "falls": int(fell.sum()), "timeouts": int((~crossed & ~fell).sum()), "unstable": int(unstable.sum()),
            "crossed": crossed, "fell": fell, "times": times, "finish_x": finish, "limit_s": limit}


def mean_level(path: str) -> float | None:
    """The last ``terrain_level`` of the training log: ``<dir>/train.log`` of a run directory, or the one next to
    a .onnx file, or the run's above it for a file in ``<run>/exported/`` (``python -m rlcore.export``'s place);
    None without one."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    log = os.path.join(folder, "train.log")
    if not os.path.isfile(log) and os.path.basename(folder) == "exported":
        log = os.path.join(os.path.dirname(folder), "train.log")
    if not os.path.isfile(log):
        return None
    with open(log, errors="replace") as f:
        found = LEVEL.findall(f.read())
    return float(found[-1]) if found else None


def training_log(run: str) -> dict[int, tuple[float, float | None]]:
    """``{iteration index: (training minutes up to its end, its terrain_level)}`` from ``<run>/train.log`` (console
    line ``it k/N`` is iteration k - 1, checkpoint ``model_<k - 1>.pt``; minutes: the summed collect and learn
    times)."""
    out: dict[int, tuple[float, float | None]] = {}
    seconds, current = 0.0, None
    with open(os.path.join(run, "train.log"), errors="replace") as f:
        for line in f:
            m = ITERATION.match(line)
            if m:
                seconds += float(m.group(2)) + float(m.group(3))
                current = int(m.group(1)) - 1
                out[current] = (seconds / 60.0, None)
                continue
            level = LEVEL.search(line)
            if level and current is not None:
                out[current] = (out[current][0], float(level.group(1)))
    return out


def curve(run: str, robots: int, courses: list[str], seed: int = 0, threads: int | None = None) -> list[dict]:
    """Each checkpoint of ``run``, exported and evaluated on ``courses`` (see the module's doc); prints a line each."""
    import glob
    import subprocess
    import sys

    log = training_log(run)
    its = sorted(int(re.search(r"model_(\d+)\.pt$", p).group(1)) for p in glob.glob(os.path.join(run, "model_*.pt")))
    os.makedirs(os.path.join(run, "curve"), exist_ok=True)
    rows = []
    for it in its:
        onnx = os.path.join(run, "curve", f"policy_{it}.onnx")
        if not os.path.isfile(onnx):
            subprocess.run([sys.executable, "-m", "rlcore.export", f"checkpoint={os.path.join(run, f'model_{it}.pt')}",
                            "format=onnx", f"output={onnx}"], check=True, stdout=subprocess.DEVNULL)
        minutes, level = log.get(it, (float("nan"), None))
        rates = {c: evaluate_course(onnx, c, robots, seed, threads)["rate"] for c in courses}
        rows.append({"it": it, "minutes": minutes, "level": level, **rates})
        print(f"curve: it={it} minutes={minutes:.1f} level={'n/a' if level is None else f'{level:.3f}'} "
              + " ".join(f"{c}={r:.2f}" for c, r in rates.items()), flush=True)
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("policy", help="an exported policy.onnx or a run directory holding one")
    p.add_argument("--robots", type=int, default=64, help="robots per course")
    p.add_argument("--courses", default=",".join(COURSES), help="comma-separated course names")
    p.add_argument("--seed", type=int, default=0, help="seed of the spawn poses")
    p.add_argument("--threads", type=int, default=None, help="MuJoCo threads (default: all cores)")
    p.add_argument("--limit-s", type=float, default=None, help="time limit [s] instead of the rule's (quick checks)")
    p.add_argument("--curve", action="store_true", help="every checkpoint of a run directory (see the module's doc)")
    args = p.parse_args(argv)
    args.courses = [c.strip() for c in args.courses.split(",") if c.strip()]
    if args.robots < 1 or not args.courses:
        p.error("need --robots >= 1 and at least one course")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import numpy as np

    from rlcore.config.cli import user_errors
    from rlcore.robustness import resolve_policy

    if args.curve:
        if not os.path.isdir(args.policy):
            raise SystemExit(f"--curve needs a run directory; {args.policy} is not one")
        courses = args.courses if args.courses != list(COURSES) else list(SUMMARY)
        return {"curve": curve(args.policy, args.robots, courses, args.seed, args.threads)}
    with user_errors():
        path = resolve_policy(args.policy)
        results = {}
        print(f"rough_eval of {path}: {args.robots} robots per course, {SPEED} m/s forward")
        print(f"{'course':<18} {'robots':>6} {'success':>7} {'falls':>5} {'timeouts':>8} {'median_cross_s':>14} "
              f"{'limit_s':>7}")
        for course in args.courses:
            r = results[course] = evaluate_course(path, course, args.robots, args.seed, args.threads, args.limit_s)
            median = f"{float(np.nanmedian(r['times'])):.2f}" if r["crossed"].any() else "-"
            print(f"{course:<18} {args.robots:>6} {r['rate']:7.2f} {r['falls']:>5} {r['timeouts']:>8} {median:>14} "
                  f"{r['limit_s']:7.1f}" + (f"  ({r['unstable']} unstable)" if r["unstable"] else ""))
    level = mean_level(args.policy)
    rates = " ".join(f"{c}={results[c]['rate']:.2f}" if c in results else f"{c}=n/a" for c in SUMMARY)
    print(f"rough_eval: {rates} mean_level={'n/a' if level is None else f'{level:.3f}'} policy={path}")
    return results


if __name__ == "__main__":
    main()
