"""Noise gap: how a Go2 PPO policy tracks with its mean action (deployment) and with its training noise.

PPO earns its rewards with sampled actions (mean + Gaussian noise of the learned std), while a deployed policy
acts with the mean. On a legged robot the noise changes the gait (it dithers the joints, like extra damping), so
the velocity a policy reaches can differ between the two. This runs one checkpoint on the nominal robot (no
randomisation, no pushes, no observation noise; or, with ``--robots training``, on the checkpoint's own randomised
robot pool (the very robots saved in the checkpoint) at the full range of its curriculum, with its observation
noise, pushes off) under fixed commands, ``--settle-steps`` control steps to get
going and ``--steps`` measured, once driven by the mean action and once by sampled actions (the checkpoint's
std times ``--std-scale``), and prints per command the mean base-frame velocity reached in each mode, for an
actor with a state estimator of ``base_lin_vel`` what the estimator read in the mean-action run, and the mean-action
gait's own oscillation: the rms of the planar velocity about its mean and the share of that signal's power at 7 Hz
and above (jitter, against the slower sway of the stride).

Run (from the repository root)::

    python bench/noise_gap.py logs/go2/<run>               # or .../model_<it>.pt
    python bench/noise_gap.py logs/go2/<run> --commands "0.5,0,0;0,0.5,0" --envs 8
    python bench/noise_gap.py logs/go2/<run> --robots training --envs 32   # the robots it was trained on

A policy that holds its commands on the training robots and misses them on the nominal one has a gait tuned to
the pool's average robot; one that misses on both has a bias of its own.

Last line::

    noise_gap: mean_action_err=<m/s> sampled_err=<m/s> estimate_err=<m/s> osc_rms=<m/s> robot_err=<m/s>
    robots=<nominal|training> policy=<checkpoint>

``*_err``: the mean over the commands of ``|cmd_xy - v_xy|`` of the *mean* velocity reached (the bias, not the
gait's oscillation); ``estimate_err``: mean ``|estimate_xy - v_xy|`` of the mean-action run (nan without an
estimator); ``osc_rms``: the mean over the commands of the mean-action run's oscillation rms; ``robot_err``: the mean
over commands and envs of each env's own ``|cmd_xy - v_xy|`` of its mean velocity, mean action (on the nominal robot
about ``mean_action_err``; on the training pool the error of each robot, where the pool's mean velocity lets robots
over and under the command cancel).
"""

from __future__ import annotations

import argparse
import math

from _common import ROBOTS, probe_env

DEFAULT_COMMANDS = "0.5,0,0;1.0,0,0;-0.5,0,0;0,0.5,0;0,-0.5,0"
JITTER_HZ = 7.0  # oscillation power at and above this frequency counts as jitter


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a Go2 PPO run directory or model_<it>.pt")
    p.add_argument("--commands", default=DEFAULT_COMMANDS, help="'vx,vy,wz;...' commands (m/s, rad/s)")
    p.add_argument("--envs", type=int, default=4, help="envs per command (the sampled run averages over them)")
    p.add_argument("--settle-steps", type=int, default=50, help="control steps before measuring")
    p.add_argument("--steps", type=int, default=250, help="control steps measured")
    p.add_argument("--std-scale", type=float, default=1.0, help="factor on the policy's std in the sampled run")
    p.add_argument("--robots", choices=ROBOTS, default="nominal",
                   help="nominal: the task's robot, no noise; training: the checkpoint's randomised pool (full "
                        "curriculum range) and observation noise, no pushes")
    p.add_argument("--feedback", type=float, default=0.0, metavar="DELTA",
                   help="also run the mean action with the velocity estimate shifted by +-DELTA m/s along each command "
                        "and report how much of the shift the policy corrects (0: off)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    args = p.parse_args(argv)
    try:
        args.command_list = [tuple(float(x) for x in c.split(",")) for c in args.commands.split(";") if c.strip()]
    except ValueError:
        p.error(f"--commands {args.commands!r}: write 'vx,vy,wz;vx,vy,wz'")
    if not args.command_list or any(len(c) != 3 for c in args.command_list):
        p.error(f"--commands {args.commands!r}: each command has three numbers, vx,vy,wz")
    return args


def run_mode(info, args: argparse.Namespace, sampled: bool, offset: float = 0.0) -> dict:
    """One closed loop: mean velocity reached ``[C, 3]`` per command, the estimator's mean reading (or None) and the
    oscillation of the planar velocity about its mean (rms ``[C]``, share of its power at ``JITTER_HZ`` and above
    ``[C]``, averaged over each command's envs). ``offset`` [m/s]: added to the velocity estimate that the policy's
    head reads, along each command's planar direction (the feedback probe; needs a base-velocity estimator)."""
    import torch

    from rlcore.checkpoint.run_files import make_run_policy

    torch.manual_seed(args.seed)
    cmds = torch.tensor(args.command_list, dtype=torch.float32).repeat_interleave(args.envs, dim=0)
    env = probe_env(info, len(cmds), args.seed, args.robots)
    policy = make_run_policy(info, env, "cpu")
    estimator = getattr(policy, "estimator", None)
    reads_velocity = estimator is not None and list(getattr(estimator, "target_groups", [])) == ["base_lin_vel"]
    dist = policy.distribution
    if sampled and args.std_scale != 1.0:  # a Gaussian's state-independent std: scale it (log std: shift it)
        if hasattr(dist, "std_param"):
            dist.std_param.data.mul_(args.std_scale)
        elif hasattr(dist, "log_std_param"):
            dist.log_std_param.data.add_(math.log(max(args.std_scale, 1e-12)))
        else:
            raise SystemExit(f"error: --std-scale needs a Gaussian with a std parameter; this policy has {type(dist).__name__}")
    scale = float(env.cfg_task.obs.lin_vel_scale)
    if offset:
        if not reads_velocity:
            raise SystemExit("error: --feedback needs an actor with a base_lin_vel estimator (estimator_cfg)")
        direction = torch.nn.functional.normalize(cmds[:, :2], dim=1)  # [N, 2]; zero for a turn in place
        shift = torch.zeros(len(cmds), estimator.output_dim)
        shift[:, :2] = offset * scale * direction
        estimator.register_forward_hook(lambda module, inputs, output: output + shift)
    est, trace = torch.zeros(len(cmds), 3), []  # trace: the base velocity [N, 3] of every measured step
    obs = env.get_observations()
    with torch.no_grad():
        for t in range(args.settle_steps + args.steps):
            env.commands[:] = cmds
            actions = policy(obs, stochastic_output=sampled)
            if t >= args.settle_steps:  # the state the observations show, and what the estimator made of them
                trace.append(env.base_lin_vel[:, :3].clone())
                if reads_velocity:
                    est += policy.last_estimate[:, :3] / scale
            obs, _, _, _ = env.step(actions)
    c = len(args.command_list)
    per_cmd = lambda x: (x / args.steps).view(c, args.envs, 3).mean(dim=1)  # noqa: E731
    trace = torch.stack(trace)  # [steps, N, 3]
    rms, jitter = oscillation(trace[..., :2], float(env.step_dt))
    # each env's own reached error |cmd_xy - mean_t v_xy| [N], averaged per command: on a randomised pool this is the
    # error of each robot, which the pool-average velocity above hides (robots over and under the command cancel)
    own = torch.norm(cmds[:, :2] - trace[..., :2].mean(dim=0), dim=1).view(c, args.envs).mean(dim=1)
    return {"vel": per_cmd(trace.sum(dim=0)), "est": per_cmd(est) if reads_velocity else None, "robot_err": own,
            "osc_rms": rms.view(c, args.envs).mean(dim=1), "jitter": jitter.view(c, args.envs).mean(dim=1)}


def feedback_gain(info, args: argparse.Namespace, cmds):
    """How much of an error in its velocity estimate the policy corrects, per command ``[C]``: the mean action runs
    with the estimate shifted by ``+args.feedback`` and by ``-args.feedback`` m/s along the command's planar direction,
    and the gain is the change of the reached velocity along it over the change of the shift (1: the policy walks
    until its estimate reads the command, a pure velocity-feedback controller; 0: it ignores the estimate; nan for
    a turn in place). A proportional feedback of loop gain K corrects K / (1 + K) of the shift, and leaves 1 / (1 + K)
    of any robot's own mismatch (a lighter robot's overshoot) as a steady error."""
    import torch

    up = run_mode(info, args, sampled=False, offset=args.feedback)["vel"][:, :2]
    down = run_mode(info, args, sampled=False, offset=-args.feedback)["vel"][:, :2]
    norm = cmds[:, :2].norm(dim=1)
    direction = cmds[:, :2] / norm.clamp_min(1e-9)[:, None]
    gain = ((down - up) * direction).sum(dim=1) / (2 * args.feedback)
    return torch.where(norm > 0, gain, torch.tensor(float("nan")))


def oscillation(trace, dt: float):
    """``(rms [n], jitter share [n])`` of planar velocities ``trace [steps, n, 2]`` sampled every ``dt`` seconds: the
    rms of ``|v - mean(v)|`` and the fraction of the power spectrum of ``v - mean(v)`` (both axes) at ``JITTER_HZ``
    and above (0 when the velocity is constant)."""
    import torch

    dev = trace - trace.mean(dim=0)
    rms = dev.square().sum(dim=-1).mean(dim=0).sqrt()
    power = torch.fft.rfft(dev, dim=0).abs().square().sum(dim=-1)  # [freqs, n]
    freqs = torch.fft.rfftfreq(trace.shape[0], dt)
    total = power.sum(dim=0)
    jitter = torch.where(total > 0, power[freqs >= JITTER_HZ].sum(dim=0) / total.clamp_min(1e-30), 0.0)
    return rms, jitter


def main(argv: list[str] | None = None) -> dict:
    import torch

    from rlcore.checkpoint.run_files import load_run

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = load_run(args.checkpoint)
    mean, noisy = run_mode(info, args, sampled=False), run_mode(info, args, sampled=True)
    cmds = torch.tensor(args.command_list)
    gain = feedback_gain(info, args, cmds) if args.feedback else None
    where = "the nominal robot" if args.robots == "nominal" else "its training robots (randomised pool, obs noise)"
    print(f"noise gap of {info.checkpoint} on {where}: {args.envs} envs per command, {args.settle_steps} "
          f"steps settle + {args.steps} measured, sampled std x{args.std_scale:g}")
    print(f"{'command vx/vy/wz':>18} {'mean action vx/vy':>18} {'sampled vx/vy':>15} {'estimate vx/vy':>15} "
          f"{'osc rms':>8} {'>=7 Hz':>7} {'robot err':>9}")
    for i, c in enumerate(cmds.tolist()):
        est = "-" if mean["est"] is None else f"{mean['est'][i, 0]:+.3f}/{mean['est'][i, 1]:+.3f}"
        print(f"{c[0]:+5.2f}/{c[1]:+5.2f}/{c[2]:+5.2f}     {mean['vel'][i, 0]:+.3f}/{mean['vel'][i, 1]:+.3f}"
              f"    {noisy['vel'][i, 0]:+.3f}/{noisy['vel'][i, 1]:+.3f}  {est:>15} {mean['osc_rms'][i]:8.3f} "
              f"{mean['jitter'][i]:7.2f} {mean['robot_err'][i]:9.3f}"
              + ("" if gain is None else f"  feedback {gain[i]:.2f}"))
    bias = lambda v: float(torch.norm(cmds[:, :2] - v[:, :2], dim=1).mean())  # noqa: E731
    result = {"mean_action_err": bias(mean["vel"]), "sampled_err": bias(noisy["vel"]),
              "robot_err": float(mean["robot_err"].mean()), "robot_err_per_command": mean["robot_err"].tolist(),
              "estimate_err": float("nan") if mean["est"] is None
              else float(torch.norm(mean["est"][:, :2] - mean["vel"][:, :2], dim=1).mean()),
              "mean_vel": mean["vel"].tolist(), "sampled_vel": noisy["vel"].tolist(),
              "osc_rms": float(mean["osc_rms"].mean()), "osc_rms_per_command": mean["osc_rms"].tolist(),
              "jitter_per_command": mean["jitter"].tolist()}
    if gain is not None:
        result["feedback_per_command"] = gain.tolist()
        result["feedback_gain"] = float(gain[~gain.isnan()].mean()) if (~gain.isnan()).any() else float("nan")
    print(f"noise_gap: mean_action_err={result['mean_action_err']:.4f} sampled_err={result['sampled_err']:.4f} "
          f"estimate_err={result['estimate_err']:.4f} osc_rms={result['osc_rms']:.4f} "
          f"robot_err={result['robot_err']:.4f} "
          + ("" if gain is None else f"feedback_gain={result['feedback_gain']:.2f} ")
          + f"robots={args.robots} "
          f"policy={info.checkpoint}")
    return result


if __name__ == "__main__":
    main()
