"""Time to walk: how long ``task=go2`` with its default settings takes to track velocity commands.

Composes the same Hydra config as ``python -m rlcore.train task=go2`` (``conf/task/go2.yaml`` with the
model / algorithm / runner defaults), trains on this machine and records per iteration the wall time,
the env steps so far and the mean planar velocity tracking error ``|v_xy_cmd - v_xy|`` over every
env and step of the iteration (commands up to 1 m/s forward/backward, 0.5 m/s sideways, 1 rad/s yaw;
resets, pushes and zeroed commands included). It stops when the error averaged over the last
``--window`` iterations is under ``--threshold`` (0.25 m/s), or when the time budget is spent.

Run (from the repository root)::

    python bench/time_to_walk.py                        # default settings, 15-minute budget
    python bench/time_to_walk.py --budget-min 10 --seed 2 --csv ttw.csv
    python bench/time_to_walk.py task.num_envs=2048     # any Hydra override of the train command

Last line: ``time_to_walk: minutes=<m> env_steps=<s> tracking_error=<e> reached=<yes|no>``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: no busy-waiting threads

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-min", type=float, default=15.0, help="stop after this many minutes (default 15)")
    p.add_argument("--threshold", type=float, default=0.25, help="tracking error target [m/s]")
    p.add_argument("--window", type=int, default=5, help="iterations the error is averaged over")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--csv", type=str, default=None, help="write the per-iteration record here")
    p.add_argument("--save", type=str, default=None, help="write the final checkpoint here (for rlcore.play)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m rlcore.train")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rlcore.runners import OnPolicyRunner
    from rlcore.train import build_train_cfg
    from rlcore.utils.checkpoint import seed_everything
    from tasks.registry import make_task

    if args.threads:
        torch.set_num_threads(args.threads)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["task=go2", "logger=none", f"seed={args.seed}",
                                               "runner.log_interval=1000000", *args.overrides])
    seed_everything(args.seed)
    train_cfg = build_train_cfg(cfg)
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    env = make_task(cfg.task.name, num_envs=int(cfg.task.num_envs), device="cpu", seed=args.seed, **env_kwargs)
    cmd = env.cfg_task.commands
    print(f"[time_to_walk] task={cfg.task.name} envs={env.num_envs} steps/it={train_cfg['num_steps_per_env']} "
          f"actor={train_cfg['actor'].get('hidden_dims')} epochs={train_cfg['algorithm'].get('num_learning_epochs')} "
          f"commands vx={cmd.lin_vel_x} vy={cmd.lin_vel_y} yaw={cmd.ang_vel_yaw} torch_threads={torch.get_num_threads()} "
          f"budget={args.budget_min} min", flush=True)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    steps_per_it = train_cfg["num_steps_per_env"] * env.num_envs
    record: list[tuple[int, float, int, float]] = []
    start = time.perf_counter()
    result = {"reached": False}

    def on_iteration(it: int, stats: dict) -> bool:
        wall = time.perf_counter() - start
        err = float(stats.get("Env/metrics/lin_vel_error_now", float("nan")))
        record.append((it, wall, (it + 1) * steps_per_it, err))
        recent = [r[3] for r in record[-args.window:]]
        smoothed = sum(recent) / len(recent)
        print(f"[time_to_walk] it={it:4d} wall={wall:7.1f}s env_steps={(it + 1) * steps_per_it:9d} "
              f"tracking_error={err:.3f} (last {len(recent)}: {smoothed:.3f}) "
              f"action_std={_action_std(runner):.2f} collect={stats['collect_s']:.2f}s learn={stats['learn_s']:.2f}s",
              flush=True)
        result.update(minutes=wall / 60, env_steps=(it + 1) * steps_per_it, tracking_error=smoothed)
        if len(recent) == args.window and smoothed < args.threshold:
            result["reached"] = True
            return True
        return wall > args.budget_min * 60

    runner.learn(num_learning_iterations=100000, init_at_random_ep_len=True, callback=on_iteration)
    if args.save:
        runner.save(args.save)
    env.close()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("iteration,wall_s,env_steps,tracking_error\n")
            f.writelines(f"{i},{w:.2f},{s},{e:.4f}\n" for i, w, s, e in record)
    print(f"time_to_walk: minutes={result.get('minutes', float('nan')):.2f} env_steps={result.get('env_steps', 0)} "
          f"tracking_error={result.get('tracking_error', float('nan')):.3f} reached={'yes' if result['reached'] else 'no'}")
    return result


def _action_std(runner) -> float:
    """Mean standard deviation of the policy's action distribution (exploration noise still in the rollouts)."""
    dist = getattr(runner.alg.get_policy(), "distribution", None)
    if not hasattr(dist, "current_std"):
        return float("nan")
    return float(dist.current_std().detach().float().mean())


if __name__ == "__main__":
    main()
