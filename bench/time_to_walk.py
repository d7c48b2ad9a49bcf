"""Time to walk: how long ``task=go2`` with its default settings takes to track velocity commands.

Composes the same Hydra config as ``python -m rlcore.train task=go2`` (``conf/task/go2.yaml`` with the
model / algorithm / runner defaults) and trains on this machine. Two tracking errors ``|v_xy_cmd - v_xy|``
are recorded, for commands up to 1 m/s forward/backward, 0.5 m/s sideways and 1 rad/s yaw:

- ``train``: every env and step of each training iteration (stochastic policy, exploration noise included);
- ``eval`` (the stopping criterion): every ``--eval-every`` iterations, the *deterministic* policy (the actor's
  mean action) runs ``--eval-envs`` separate envs of the same task (noise, randomisation
  and pushes as in training) from fresh resets for 1 s to get going, then 4 s measured (the same scenario at
  every evaluation; the runner's own evaluation code). A policy whose mean action only stands, and which
  moves only through exploration noise, does not pass.

Training stops when the eval error is under ``--threshold`` (0.25 m/s), or when the time budget is
spent. Evaluation time is not counted in the reported minutes. At the end the deterministic policy is
shown separately on forward, backward, sideways and turning commands (velocity reached, falls).

Run (from the repository root)::

    python bench/time_to_walk.py                        # default settings, 15-minute budget
    python bench/time_to_walk.py --budget-min 10 --seed 2 --csv ttw.csv --save go2.pt
    python bench/time_to_walk.py task.num_envs=2048     # any Hydra override of the train command

Last line: ``time_to_walk: minutes=<m> env_steps=<s> tracking_error=<e> reached=<yes|no>`` (e: eval error).
"""

from __future__ import annotations

import argparse
import copy
import time

from _common import WALK_RULE, evaluate, go2_training, with_policy

#: Fixed commands (vx, vy, yaw rate) of the final per-direction report.
PROBE_COMMANDS = [(0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (-0.5, 0.0, 0.0), (-1.0, 0.0, 0.0),
                  (0.0, 0.5, 0.0), (0.0, -0.5, 0.0), (0.0, 0.0, 1.0), (0.7, 0.0, 0.5)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-min", type=float, default=WALK_RULE["budget_min"],
                   help="stop after this many minutes of training")
    p.add_argument("--threshold", type=float, default=WALK_RULE["threshold"], help="tracking error target [m/s]")
    p.add_argument("--eval-every", type=int, default=WALK_RULE["eval_every"],
                   help="iterations between deterministic evaluations")
    p.add_argument("--eval-envs", type=int, default=WALK_RULE["eval_envs"], help="envs of the deterministic evaluation")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--csv", type=str, default=None, help="write the per-iteration record here")
    p.add_argument("--save", type=str, default=None, help="write the final checkpoint here (for rlcore.play)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m rlcore.train")
    return p.parse_args(argv)


def probe(actor, env, steps: int = 250) -> list[tuple[tuple, list[float], int]]:
    """Velocity reached (vx, vy, yaw rate; mean of the last 150 steps) and falls for each probe command."""
    import torch

    commands = torch.tensor(PROBE_COMMANDS, dtype=torch.float32, device=env.device)
    n = len(PROBE_COMMANDS)
    obs = env.reset()
    actor.reset()
    falls = torch.zeros(n, dtype=torch.long)
    reached = []
    with torch.inference_mode():
        for t in range(steps):
            env.commands[:] = commands
            obs = env.get_observations() if t == 0 else obs
            obs, _, dones, extras = env.step(actor(obs))
            env.commands[:] = commands
            obs["policy"][:, 6:9] = commands * env.command_scale  # the command the policy sees next
            actor.reset(dones)
            falls += (dones & ~extras["time_outs"]).long().cpu()
            if t >= steps - 150:
                reached.append(torch.cat([env.base_lin_vel[:, :2], env.base_ang_vel[:, 2:]], dim=1))
    mean = torch.stack(reached).mean(0).tolist()
    return [(PROBE_COMMANDS[i], mean[i], int(falls[i])) for i in range(n)]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    from rlcore.env.task import make_task
    from rlcore.runners import OnPolicyRunner

    cfg, train_cfg, env_kwargs, env = go2_training(args.seed, args.overrides, args.threads)
    eval_env = make_task(cfg.task.name, num_envs=args.eval_envs, device="cpu", seed=10_000 + args.seed, **env_kwargs)
    probe_kwargs = copy.deepcopy(env_kwargs)
    probe_kwargs.setdefault("commands", {}).update(heading_command=False, resampling_time=1e6)
    probe_kwargs.setdefault("domain_rand", {}).update(push_robots=False)
    probe_env = make_task(cfg.task.name, num_envs=len(PROBE_COMMANDS), device="cpu", seed=20_000 + args.seed,
                          **probe_kwargs)
    cmd = env.cfg_task.commands
    print(f"[time_to_walk] task={cfg.task.name} envs={env.num_envs} steps/it={train_cfg['num_steps_per_env']} "
          f"actor={train_cfg['actor'].get('hidden_dims')} epochs={train_cfg['algorithm'].get('num_learning_epochs')} "
          f"commands vx={cmd.lin_vel_x} vy={cmd.lin_vel_y} yaw={cmd.ang_vel_yaw} torch_threads={torch.get_num_threads()} "
          f"budget={args.budget_min} min", flush=True)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    steps_per_it = train_cfg["num_steps_per_env"] * env.num_envs
    record: list[tuple[int, float, int, float, float]] = []
    clock = {"start": time.perf_counter(), "paused": 0.0}
    result = {"reached": False, "minutes": float("nan"), "env_steps": 0, "tracking_error": float("nan")}

    def on_iteration(it: int, stats: dict) -> bool:
        wall = time.perf_counter() - clock["start"] - clock["paused"]
        train_err = float(stats.get("Env/metrics/lin_vel_error_now", float("nan")))
        eval_err = float("nan")
        if (it + 1) % args.eval_every == 0:
            t0 = time.perf_counter()
            eval_err = with_policy(runner, evaluate, eval_env, runner.env)
            clock["paused"] += time.perf_counter() - t0
        record.append((it, wall, (it + 1) * steps_per_it, train_err, eval_err))
        print(f"[time_to_walk] it={it:4d} wall={wall:7.1f}s env_steps={(it + 1) * steps_per_it:9d} "
              f"train_error={train_err:.3f} eval_error={eval_err:.3f} action_std={_action_std(runner):.2f} "
              f"collect={stats['collect_s']:.2f}s learn={stats['learn_s']:.2f}s", flush=True)
        if eval_err == eval_err:  # not NaN
            result.update(minutes=wall / 60, env_steps=(it + 1) * steps_per_it, tracking_error=eval_err)
            if eval_err < args.threshold:
                result["reached"] = True
                return True
        return wall > args.budget_min * 60

    runner.learn(num_learning_iterations=100000, init_at_random_ep_len=True, callback=on_iteration)
    if args.save:
        runner.save(args.save)
    for command, reached, falls in with_policy(runner, probe, probe_env):
        print(f"[time_to_walk] deterministic policy: command (vx, vy, yaw) {command} -> "
              f"({reached[0]:+.2f}, {reached[1]:+.2f}, {reached[2]:+.2f}), falls in 5 s: {falls}", flush=True)
    for e in (env, eval_env, probe_env):
        e.close()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("iteration,wall_s,env_steps,train_error,eval_error\n")
            f.writelines(f"{i},{w:.2f},{s},{a:.4f},{b:.4f}\n" for i, w, s, a, b in record)
    print(f"time_to_walk: minutes={result['minutes']:.2f} env_steps={result['env_steps']} "
          f"tracking_error={result['tracking_error']:.3f} reached={'yes' if result['reached'] else 'no'}")
    return result


def _action_std(runner) -> float:
    """Mean standard deviation of the policy's action distribution (exploration noise still in the rollouts)."""
    dist = getattr(runner.alg.get_policy(), "distribution", None)
    if not hasattr(dist, "current_std"):
        return float("nan")
    return float(dist.current_std().detach().float().mean())


if __name__ == "__main__":
    main()
