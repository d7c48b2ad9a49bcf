"""Go2 environment throughput: the task's control steps per second against raw MuJoCo rollout.

For each env count it builds ``task=go2`` (its Hydra task settings, ``conf/task/go2.yaml``; ``--task go2_rough``:
the rough terrain with its height scan and the scan's errors, ``conf/task/go2_rough.yaml``) and steps it
with a fixed random policy (Gaussian actions, std 0.5, from a seeded generator): that is the *task* rate,
physics plus the whole MDP (observations, rewards, terminations, resets, commands, pushes, numpy <->
torch, actuation latency, physics-failure checks). The *raw* rate steps the very same simulator object
(same compiled models, variants and thread count) with the same kind of joint targets through
``Go2Sim.rollout`` alone, i.e. one MuJoCo threaded rollout call per control step and nothing else, from
the states the task run reached.
Runs alternate task and raw blocks, so a change of machine load hits both alike.

``--backend warp`` times the task on the MuJoCo Warp backend (``task.env.sim.backend=warp``, on ``--device``:
Warp's CPU device for ``cpu``, a GPU for ``cuda``) beside the same task on the rollout backend, alternating blocks
the same way; Warp compiles its kernels in the warm-up (cached on disk for later runs).

Run (from the repository root)::

    python bench/env_throughput.py                   # 1024 and 4096 envs
    python bench/env_throughput.py --envs 512 2048 --steps 50
    python bench/env_throughput.py --task go2_rough --envs 1024   # the raw rollout on the same height field
    python bench/env_throughput.py --backend warp --envs 64       # Warp's CPU device beside the rollout backend
    python bench/env_throughput.py --backend warp --device cuda --envs 4096 16384

Last line: ``env_throughput: task=<task> envs=<n> task_steps_per_s=<a> raw_steps_per_s=<b> ratio=<a/b>`` (largest n);
with ``--backend warp``: ``env_throughput: task=<task> backend=warp device=<d> envs=<n> warp_steps_per_s=<a>
rollout_steps_per_s=<b> ratio=<a/b>``.
"""

from __future__ import annotations

import argparse
import time

from _common import ROOT


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=["go2", "go2_rough"], default="go2")
    p.add_argument("--envs", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--steps", type=int, default=40, help="control steps per timed block")
    p.add_argument("--blocks", type=int, default=3, help="alternating task/raw blocks per env count")
    p.add_argument("--warmup", type=int, default=20, help="control steps before timing")
    p.add_argument("--threads", type=int, default=None, help="MuJoCo threads (default: all cores)")
    p.add_argument("--backend", choices=["rollout", "warp"], default="rollout",
                   help="warp: the task on MuJoCo Warp beside the task on the rollout backend")
    p.add_argument("--device", default="cpu", help="the Warp task's device (cpu or cuda[:k])")
    return p.parse_args(argv)


def task_block(env, steps: int, gen) -> float:
    """Seconds for ``steps`` task steps under Gaussian actions (std 0.5)."""
    import torch

    t0 = time.perf_counter()
    with torch.inference_mode():
        for _ in range(steps):
            env.step(0.5 * torch.randn(env.num_envs, 12, generator=gen).to(env.device))
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    return time.perf_counter() - t0


def compare_backends(args: argparse.Namespace, env_kwargs: dict) -> tuple[float, float]:
    """The task on MuJoCo Warp (``args.device``) against the task on the rollout backend (CPU), per env count."""
    import copy

    import torch

    from rlcore.env.task import make_task

    result = (float("nan"), float("nan"))
    for n in args.envs:
        envs = {}
        for backend, device in (("warp", args.device), ("rollout", "cpu")):
            kwargs = copy.deepcopy(env_kwargs)
            kwargs.setdefault("sim", {})["backend"] = backend
            envs[backend] = make_task(args.task, num_envs=n, device=device, seed=0, **kwargs)
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        task_block(envs["warp"], args.warmup, gen)  # compiles Warp's kernels (or loads them from the cache)
        warmup_s = time.perf_counter() - t0
        task_block(envs["rollout"], args.warmup, gen)
        elapsed = dict.fromkeys(envs, 0.0)
        for _ in range(args.blocks):
            for name, env in envs.items():
                elapsed[name] += task_block(env, args.steps, gen)
        total = n * args.steps * args.blocks
        result = (total / elapsed["warp"], total / elapsed["rollout"])
        print(f"[env_throughput] task={args.task} envs={n} warp on {args.device} {result[0]:,.0f} steps/s (warm-up "
              f"with kernel loading {warmup_s:.1f} s), rollout on {envs['rollout'].sim.nthread} CPU threads "
              f"{result[1]:,.0f} steps/s, ratio {result[0] / result[1]:.3f}", flush=True)
        for env in envs.values():
            env.close()
    print(f"env_throughput: task={args.task} backend=warp device={args.device} envs={args.envs[-1]} "
          f"warp_steps_per_s={result[0]:.0f} rollout_steps_per_s={result[1]:.0f} ratio={result[0] / result[1]:.3f}")
    return result


def main(argv: list[str] | None = None) -> tuple[float, float]:
    args = parse_args(argv)
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rlcore.env.task import make_task

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"task={args.task}"])
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    if args.threads:
        env_kwargs.setdefault("sim", {})["threads"] = args.threads
    if args.backend == "warp":
        return compare_backends(args, env_kwargs)
    result = (float("nan"), float("nan"))
    for n in args.envs:
        env = make_task(args.task, num_envs=n, device="cpu", seed=0, **env_kwargs)
        gen = torch.Generator().manual_seed(0)
        scale = env.cfg_task.control.action_scale
        default = env.default_dof_pos.double().numpy()

        def raw_block(steps: int) -> float:
            saved = env.sim.state.copy()  # raw steps start from the task's states and leave them as they were
            targets = [default + scale * 0.5 * torch.randn(n, 12, generator=gen).double().numpy() for _ in range(steps)]
            t0 = time.perf_counter()
            for target in targets:
                env.sim.ctrl[:] = target[:, None, :]
                env.sim.rollout()
                env.sim.state[:] = env.sim._state_out[:, -1]
            elapsed = time.perf_counter() - t0
            env.sim.state[:] = saved
            return elapsed

        task_block(env, args.warmup, gen)
        raw_block(min(args.warmup, 5))
        task_t = raw_t = 0.0
        for _ in range(args.blocks):
            task_t += task_block(env, args.steps, gen)
            raw_t += raw_block(args.steps)
        total = n * args.steps * args.blocks
        task_rate, raw_rate = total / task_t, total / raw_t
        print(f"[env_throughput] task={args.task} envs={n} threads={env.sim.nthread} physics_dt={env.cfg_task.sim.dt} "
              f"decimation={env.sim.decimation}: task {task_rate:,.0f} steps/s, raw MuJoCo {raw_rate:,.0f} steps/s, "
              f"ratio {task_rate / raw_rate:.2f}", flush=True)
        result = (task_rate, raw_rate)
        env.close()
    task_rate, raw_rate = result
    print(f"env_throughput: task={args.task} envs={args.envs[-1]} task_steps_per_s={task_rate:.0f} raw_steps_per_s={raw_rate:.0f} "
          f"ratio={task_rate / raw_rate:.2f}")
    return result


if __name__ == "__main__":
    main()
