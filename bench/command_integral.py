"""Command integral: what an outer integral loop on the velocity command would do for a Go2 PPO policy.

A blind actor with a base-velocity estimator closes the loop on its estimate like a proportional controller
(``bench/noise_gap.py --feedback``: it corrects about half of an error in its estimate), so each robot keeps a
steady error of about half its own mismatch with the pool's average robot. The classic remedy is integral action:
the deployed controller feeds the policy ``cmd + u`` instead of ``cmd``, with

    e = cmd_xy - estimate_xy,   u <- clip(u + k * dt * e * (|e| < band), -u_max, u_max),   u = 0 at the start,

(per planar axis; ``--band 0``: no band, always integrating), which drives the policy's own velocity estimate, and so the robot, onto the command. This runs the checkpoint's
mean action under ``rlcore.robustness``'s held probe commands (1 s settle, 5 s measured) on the nominal robot (or, with
``--robots training``, on the run's own robot pool; see ``bench/noise_gap.py``) once per gain ``k`` (0: the policy
as trained) and prints per gain the mean planar error per step (``err``, what ``rlcore.robustness`` reports as
``nominal_err``) and the error of the mean velocity (``reached``). The loop acts on the command the env shows the
policy, so the observation history holds the corrected commands, as a deployment that corrects the command would.

Run (from the repository root)::

    python bench/command_integral.py logs/go2/<run>                  # gains 0, 1, 2, 4
    python bench/command_integral.py logs/go2/<run> --gains 0,2 --robots training
    python bench/command_integral.py logs/go2/<run> --gains 2 --limit 0.15 --band 0.2   # the exported default law

The exported graph carries the same law (``rlcore_tasks.go2.command_integral``: ``python -m rlcore.export ...
command_integral_gain=K command_integral_limit=L command_integral_band=B``); this bench's defaults (limit 0.3, no
band) are those its first figures were measured with, the export's (limit 0.15, band 0.2) are in ``rlcore_tasks/go2``.

Last line::

    command_integral: gains=<k,...> err=<e,...> reached=<e,...> policy=<checkpoint>
"""

from __future__ import annotations

import argparse

from _common import ROBOTS, probe_env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a Go2 PPO run directory or model_<it>.pt (its actor needs a base_lin_vel estimator)")
    p.add_argument("--gains", default="0,1,2,4", help="integral gains k [1/s], comma-separated; 0 = no loop")
    p.add_argument("--limit", type=float, default=0.3, help="u_max: the largest correction of vx and vy [m/s]")
    p.add_argument("--band", type=float, default=0.0,
                   help="integrate an axis only while |cmd - estimate| < band [m/s] (anti-windup); 0 = always")
    p.add_argument("--robots", choices=ROBOTS, default="nominal")
    p.add_argument("--envs", type=int, default=4, help="envs per probe command")
    p.add_argument("--settle-s", type=float, default=1.0)
    p.add_argument("--measure-s", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    args = p.parse_args(argv)
    try:
        args.gain_list = [float(k) for k in args.gains.split(",") if k.strip()]
    except ValueError:
        p.error(f"--gains {args.gains!r}: write numbers separated by commas, e.g. 0,2")
    if not args.gain_list or min(args.gain_list) < 0 or args.limit < 0 or args.band < 0:
        p.error("--gains: at least one gain, none negative; --limit >= 0; --band >= 0")
    return args


def run_gain(info, args: argparse.Namespace, k: float) -> dict:
    """One closed loop under every probe command with integral gain ``k``: per command ``[C]`` the mean planar error
    per step and the error of the mean velocity, and the mean correction ``u`` at the end ``[C, 2]``."""
    import torch

    from rlcore.checkpoint.run_files import make_run_policy
    from rlcore_tasks.go2.command_integral import integral_step
    from rlcore_tasks.go2.task import PROBE_COMMANDS

    torch.manual_seed(args.seed)
    held = [cmd for _, cmd, *step in PROBE_COMMANDS if not step]  # this loop holds every command from the start
    c = len(held)
    cmds = torch.tensor(held, dtype=torch.float32).repeat_interleave(args.envs, dim=0)
    env = probe_env(info, len(cmds), args.seed, args.robots)
    try:
        policy = make_run_policy(info, env, "cpu")
        estimator = getattr(policy, "estimator", None)
        if estimator is None or list(getattr(estimator, "target_groups", [])) != ["base_lin_vel"]:
            raise SystemExit(f"error: {info.checkpoint}: the actor has no base_lin_vel estimator to close the loop on")
        scale, dt = float(env.cfg_task.obs.lin_vel_scale), float(env.step_dt)
        settle, measure = round(args.settle_s / dt), round(args.measure_s / dt)
        u = torch.zeros(len(cmds), 2)
        err, vel = torch.zeros(len(cmds)), torch.zeros(len(cmds), 2)
        obs = env.get_observations()
        with torch.no_grad():
            for t in range(settle + measure):
                shown = cmds.clone()
                shown[:, :2] += u
                env.commands[:] = shown
                actions = policy(obs)
                estimate = policy.last_estimate[:, :2] / scale
                u = integral_step(u, cmds[:, :2] - estimate, k, dt, args.limit, args.band)  # the exported law
                obs, _, _, _ = env.step(actions)
                if t >= settle:
                    v = env.base_lin_vel[:, :2]
                    err += torch.norm(cmds[:, :2] - v, dim=1)
                    vel += v
    finally:
        env.close()
    per_cmd = lambda x: x.view(c, args.envs, *x.shape[1:]).mean(dim=1)  # noqa: E731
    reached = torch.norm(cmds[:, :2] - vel / measure, dim=1)
    return {"err": per_cmd(err / measure), "reached": per_cmd(reached), "u": per_cmd(u)}


def main(argv: list[str] | None = None) -> dict:
    import torch

    from rlcore.checkpoint.run_files import load_run
    from rlcore_tasks.go2.task import PROBE_COMMANDS

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = load_run(args.checkpoint)
    runs = {k: run_gain(info, args, k) for k in args.gain_list}
    where = "the nominal robot" if args.robots == "nominal" else "its training robots"
    print(f"command integral of {info.checkpoint} on {where}: {args.envs} envs per command, "
          f"{args.settle_s:g} s settle + {args.measure_s:g} s measured, |u| <= {args.limit:g} m/s"
          + (f", band {args.band:g} m/s" if args.band > 0 else ""))
    print(f"{'command':>16} " + " ".join(f"{'k=' + format(k, 'g') + ' err/reached':>20}" for k in args.gain_list))
    for i, name in enumerate(name for name, _, *step in PROBE_COMMANDS if not step):
        print(f"{name:>16} " + " ".join(f"{float(runs[k]['err'][i]):>11.3f}/{float(runs[k]['reached'][i]):.3f}"
                                        for k in args.gain_list))
    result = {"gains": args.gain_list, "err": [float(runs[k]["err"].mean()) for k in args.gain_list],
              "reached": [float(runs[k]["reached"].mean()) for k in args.gain_list],
              "err_per_command": {k: runs[k]["err"].tolist() for k in args.gain_list},
              "u": {k: runs[k]["u"].tolist() for k in args.gain_list}}
    fmt = lambda xs: ",".join(f"{x:.4f}" for x in xs)  # noqa: E731
    print(f"command_integral: gains={','.join(format(k, 'g') for k in args.gain_list)} err={fmt(result['err'])} "
          f"reached={fmt(result['reached'])} policy={info.checkpoint}")
    return result


if __name__ == "__main__":
    main()
