"""Time to walk, rlcore against rsl_rl 5.x: the same Go2 env and train config, driven by either runner.

Each run composes the config of ``python -m rlcore.train task=go2`` (``conf/task/go2.yaml`` with the model /
algorithm / runner defaults; Hydra overrides go after the options), builds the Go2 env with the run's seed, and
trains with one library's ``OnPolicyRunner`` until the stopping rule of ``bench/time_to_walk.py`` holds: every
``--eval-every`` iterations its ``evaluate`` (imported, not copied) runs the deterministic policy on
``--eval-envs`` separate envs (seed 10000 + seed, as there); training stops when that error is under
``--threshold`` or when ``--budget-min`` minutes of training are spent. Evaluation time is not counted.

rsl_rl gets the same hyperparameters: the runner, algorithm, model and distribution keys of the rlcore train
config that rsl_rl's classes take (their signatures, read from the installed package); the rlcore-only keys it
cannot take are listed at the start of each rsl_rl run. Both runners are seeded alike before their models are
built. rsl_rl has no per-iteration callback: the bench hooks its ``logger.log`` (called once per iteration).

Reported per run: wall minutes to the threshold and env steps to it, counted at the env's ``step`` (so rlcore's
normaliser warm-up rollout counts). A run that misses the threshold within the budget shows its last figures
with ``reached=no``, and its library's mean is ``nan``.

Ablations (``--ablations``, rlcore only, each alone on top of the default):

- ``final_obs``: no time-out bootstrap from final observations (``extras["final_observations"]`` is dropped
  from every env step, so PPO bootstraps time-outs with V of the step's own observation, as rsl_rl does).
  rlcore has no config switch for this: the bench removes the key at the env;
- ``warmup``: no normaliser warm-up rollout (``runner.normalizer_warmup_steps=0``);
- ``reward_norm``: reward normalisation toggled (``algorithm.reward_normalization``): it is off in the default
  config, so this ablation turns it on.

Every run is a fresh subprocess (same threads). Run (from the repository root)::

    python bench/time_to_walk_vs_rsl_rl.py                        # seeds 1 and 2, 15-minute budget per run
    python bench/time_to_walk_vs_rsl_rl.py --ablations            # + the three ablations per seed
    python bench/time_to_walk_vs_rsl_rl.py --seeds 1 --ablations warmup,final_obs --threads 2
    python bench/time_to_walk_vs_rsl_rl.py --tiny --threads 1     # smoke run (16 envs, 1 iteration; seconds)

Run time: up to ``--budget-min`` of training per run plus evaluation and start-up (~0.5 min), i.e. up to
~2 x 2 x 15.5 = 62 minutes by default and ~155 minutes with ``--ablations`` (runs that reach the threshold
earlier stop earlier: about 5 minutes each at the README's time-to-walk figures).

Last line: ``time_to_walk_vs_rsl_rl: rlcore_minutes=<a> rsl_rl_minutes=<b> ratio=<a/b> rlcore_steps=<s>
rsl_rl_steps=<t>`` (means over seeds of the default runs).
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, WALK_RULE, evaluate, with_policy  # bench/time_to_walk.py's evaluation and stopping rule

ABLATIONS = {
    "final_obs": "no time-out bootstrap from final observations",
    "warmup": "no normaliser warm-up",
    "reward_norm": "reward normalisation toggled",
}
TINY = {"overrides": ["task.num_envs=16"], "eval_envs": 8, "eval_every": 1, "threshold": 100.0, "budget_min": 1.0}
"""--tiny: 16 envs, an evaluation after every iteration on 8 envs, a threshold every policy meets (1 iteration)."""
RSL_RL_RUNNER_KEYS = ("seed", "num_steps_per_env", "save_interval", "obs_groups", "check_for_nan", "run_name",
                      "experiment_name")
"""Runner keys of the rlcore train config that rsl_rl 5.x's OnPolicyRunner reads (with log_dir None)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1,2", help="comma-separated seeds")
    p.add_argument("--budget-min", type=float, default=WALK_RULE["budget_min"], help="training minutes per run at most")
    p.add_argument("--threshold", type=float, default=WALK_RULE["threshold"], help="eval tracking error target [m/s]")
    p.add_argument("--eval-every", type=int, default=WALK_RULE["eval_every"], help="iterations between evaluations")
    p.add_argument("--eval-envs", type=int, default=WALK_RULE["eval_envs"], help="envs of the deterministic evaluation")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--ablations", nargs="?", const=",".join(ABLATIONS), default="",
                   help=f"also run rlcore with one addition off at a time: {', '.join(ABLATIONS)} (bare: all)")
    p.add_argument("--no-rsl-rl", action="store_true", help="skip the rsl_rl runs")
    p.add_argument("--tiny", action="store_true", help="smoke run: 16 envs, one iteration and evaluation per run")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # "<library>:<variant>:<seed>"
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m rlcore.train")
    args = p.parse_args(argv)
    try:
        args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        p.error(f"--seeds must be comma-separated integers, got '{args.seeds}'")
    args.ablation_list = [a.strip() for a in args.ablations.split(",") if a.strip()]
    for name in args.ablation_list:
        if name not in ABLATIONS:
            p.error(f"unknown ablation '{name}'; valid: {', '.join(ABLATIONS)}")
    if args.tiny:
        args.overrides = TINY["overrides"] + args.overrides
        args.eval_envs, args.eval_every = TINY["eval_envs"], TINY["eval_every"]
        args.threshold, args.budget_min = TINY["threshold"], TINY["budget_min"]
    return args


# ============================================================================ one run (worker process)
def rsl_rl_train_cfg(cfg: dict) -> tuple[dict, dict[str, object]]:
    """rsl_rl 5.x's train config from rlcore's: the keys its classes accept, and ``{dropped key: value}``."""
    from rsl_rl.utils import resolve_callable

    dropped: dict[str, object] = {}
    out = {k: copy.deepcopy(cfg[k]) for k in RSL_RL_RUNNER_KEYS if k in cfg}

    def accepted(section: str, d: dict) -> dict:
        params = inspect.signature(resolve_callable(d["class_name"]).__init__).parameters
        kept = {"class_name": d["class_name"]}
        for key, value in d.items():
            if key == "class_name":
                continue
            if key == "distribution_cfg" and isinstance(value, dict):
                kept[key] = accepted(f"{section}.{key}", value)
            elif key in params:
                kept[key] = copy.deepcopy(value)
            else:
                dropped[f"{section}.{key}"] = value
        return kept

    for section in ("algorithm", "actor", "critic"):
        out[section] = accepted(section, cfg[section])
    return out, dropped


def patch_env_step(env, drop_final_obs: bool) -> dict:
    """Count env steps (``counter["steps"]``) at ``env.step``; optionally drop ``extras["final_observations"]``."""
    counter = {"steps": 0}
    step = env.step

    def counted_step(actions):
        obs, rewards, dones, extras = step(actions)
        counter["steps"] += env.num_envs
        if drop_final_obs and "final_observations" in extras:
            extras = {k: v for k, v in extras.items() if k != "final_observations"}
        return obs, rewards, dones, extras

    env.step = counted_step
    return counter


class _Stop(Exception):
    """Raised from rsl_rl's per-iteration hook to end its ``learn`` loop."""


def run_one(args: argparse.Namespace) -> dict:
    """Train one (library, variant, seed) to the stopping rule in this process; the run's figures."""
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rlcore.checkpoint.io import seed_everything
    from rlcore.env.task import make_task
    from rlcore.train import build_train_cfg

    library, variant, seed = args.worker.split(":")
    seed = int(seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = ["task=go2", "logger=none", f"seed={seed}", "runner.log_interval=1000000", *args.overrides]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        extra, label = [], "default"
        if variant == "warmup":
            extra, label = ["runner.normalizer_warmup_steps=0"], "runner.normalizer_warmup_steps=0"
        elif variant == "reward_norm":
            on = not bool(compose("config", overrides=base).algorithm.reward_normalization)
            extra = [f"algorithm.reward_normalization={str(on).lower()}"]
            label = extra[0]
        elif variant == "final_obs":
            label = "final_observations dropped at the env"
        cfg = compose("config", overrides=base + extra)
    seed_everything(seed)
    train_cfg = build_train_cfg(cfg)
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    env = make_task(cfg.task.name, num_envs=int(cfg.task.num_envs), device="cpu", seed=seed, **env_kwargs)
    eval_env = make_task(cfg.task.name, num_envs=args.eval_envs, device="cpu", seed=10_000 + seed, **env_kwargs)
    counter = patch_env_step(env, drop_final_obs=variant == "final_obs")
    tag = f"[{library}{'' if variant == 'default' else ' -' + variant} seed {seed}]"
    print(f"{tag} {label}; envs={env.num_envs} steps/it={train_cfg['num_steps_per_env']} torch_threads="
          f"{torch.get_num_threads()} threshold={args.threshold} budget={args.budget_min} min", flush=True)

    if library == "rlcore":
        from rlcore.runners import OnPolicyRunner

        runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")  # seeds itself with train_cfg["seed"]
    else:
        from rsl_rl.runners import OnPolicyRunner as RslRlRunner

        rsl_cfg, dropped = rsl_rl_train_cfg(train_cfg)
        print(f"{tag} rlcore-only keys not given to rsl_rl: " +
              ", ".join(f"{k}={v}" for k, v in dropped.items()), flush=True)
        seed_everything(int(train_cfg["seed"]))  # as rlcore's runner does before it builds its models
        runner = RslRlRunner(env, rsl_cfg, None, "cpu")

    clock = {"start": 0.0, "paused": 0.0}
    result = {"library": library, "variant": variant, "seed": seed, "label": label, "reached": False,
              "minutes": math.nan, "env_steps": 0, "iterations": 0, "tracking_error": math.nan}
    times = {"collect": 0.0, "learn": 0.0}

    def on_iteration(it: int, collect_s: float, learn_s: float) -> bool:
        """bench/time_to_walk.py's rule: evaluate every eval_every iterations, stop under the threshold or budget."""
        wall = time.perf_counter() - clock["start"] - clock["paused"]
        steps = counter["steps"]
        times["collect"] += collect_s
        times["learn"] += learn_s
        if (it + 1) % args.eval_every:
            return wall > args.budget_min * 60
        t0 = time.perf_counter()
        error = with_policy(runner, evaluate, eval_env, runner.env)
        clock["paused"] += time.perf_counter() - t0
        result.update(minutes=wall / 60, env_steps=steps, iterations=it + 1, tracking_error=error)
        print(f"{tag} it={it:4d} wall={wall:7.1f}s env_steps={steps:9d} eval_error={error:.3f} "
              f"collect={collect_s:.2f}s learn={learn_s:.2f}s", flush=True)
        if error < args.threshold:
            result["reached"] = True
            return True
        return wall > args.budget_min * 60

    clock["start"] = time.perf_counter()
    if library == "rlcore":
        runner.learn(num_learning_iterations=10**6, init_at_random_ep_len=True,
                     callback=lambda it, stats: on_iteration(it, stats["collect_s"], stats["learn_s"]))
    else:
        log = runner.logger.log

        def hooked_log(*a, **k):
            log(*a, **k)
            if on_iteration(k["it"], k["collect_time"], k["learn_time"]):
                raise _Stop

        runner.logger.log = hooked_log
        try:
            runner.learn(num_learning_iterations=10**6, init_at_random_ep_len=True)
        except _Stop:
            pass
    n = max(result["iterations"], 1)
    result.update(collect_s_per_it=times["collect"] / n, learn_s_per_it=times["learn"] / n)
    for e in (env, eval_env):
        e.close()
    return result


# ============================================================================ the plan (parent process)
def spawn(library: str, variant: str, seed: int, args: argparse.Namespace) -> dict | None:
    """One run in a fresh interpreter, its progress lines echoed; its result dict, or None if it failed."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{library}:{variant}:{seed}",
           "--budget-min", str(args.budget_min), "--threshold", str(args.threshold), "--eval-every",
           str(args.eval_every), "--eval-envs", str(args.eval_envs)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    overrides = [o for o in args.overrides if not (args.tiny and o in TINY["overrides"])]
    cmd += (["--tiny"] if args.tiny else []) + (["--"] + overrides if overrides else [])
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result, tail = None, []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=str(ROOT)) as proc:
        for line in proc.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
            else:
                tail = (tail + [line.rstrip()])[-5:]
                if line.startswith("["):
                    print("  " + line.rstrip(), flush=True)
    if result is None:
        print(f"  [{library} {variant} seed {seed}] failed (exit {proc.returncode}): " + " | ".join(tail), flush=True)
    return result


def mean_of(runs: list[dict | None], key: str) -> float:
    """Mean of ``key`` over runs that all reached the threshold; nan if any failed or missed it."""
    if not runs or any(r is None or not r["reached"] for r in runs):
        return math.nan
    return sum(r[key] for r in runs) / len(runs)


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return {}
    plan = [("rlcore", "default")] + ([] if args.no_rsl_rl else [("rsl_rl", "default")])
    plan += [("rlcore", a) for a in args.ablation_list]
    print(f"time_to_walk_vs_rsl_rl: task=go2, seeds {args.seed_list}, threshold {args.threshold} m/s, eval every "
          f"{args.eval_every} iterations on {args.eval_envs} envs, budget {args.budget_min} min per run, "
          f"{len(plan) * len(args.seed_list)} runs{' (TINY)' if args.tiny else ''}", flush=True)
    t0 = time.perf_counter()
    runs: dict[tuple[str, str], list[dict | None]] = {}
    for library, variant in plan:
        runs[(library, variant)] = [spawn(library, variant, seed, args) for seed in args.seed_list]

    print(f"\n{'runner':18s} {'seed':>4s} {'reached':>7s} {'minutes':>8s} {'env steps':>11s} {'its':>5s} "
          f"{'eval err':>8s} {'collect s/it':>12s} {'learn s/it':>10s}")
    for (library, variant), results in runs.items():
        name = library if variant == "default" else f"rlcore -{variant}"
        for seed, r in zip(args.seed_list, results):
            if r is None:
                print(f"{name:18s} {seed:4d} (failed)")
                continue
            print(f"{name:18s} {seed:4d} {'yes' if r['reached'] else 'no':>7s} {r['minutes']:8.2f} "
                  f"{r['env_steps']:11d} {r['iterations']:5d} {r['tracking_error']:8.3f} "
                  f"{r['collect_s_per_it']:12.2f} {r['learn_s_per_it']:10.2f}")
        print(f"{name:18s} {'mean':>4s} {'':7s} {mean_of(results, 'minutes'):8.2f} "
              f"{mean_of(results, 'env_steps'):11.0f}")
    base = runs[("rlcore", "default")]
    for variant in args.ablation_list:
        label = next((r["label"] for r in runs[("rlcore", variant)] if r), variant)
        m = mean_of(runs[("rlcore", variant)], "minutes") / mean_of(base, "minutes")
        s = mean_of(runs[("rlcore", variant)], "env_steps") / mean_of(base, "env_steps")
        print(f"ablation {variant}, {ABLATIONS[variant]} ({label}): minutes x{m:.2f}, env steps x{s:.2f} of rlcore's default")
    print(f"(bench wall time {(time.perf_counter() - t0) / 60:.1f} min; a mean is nan when a run missed the threshold)")
    a, b = mean_of(base, "minutes"), mean_of(runs.get(("rsl_rl", "default"), []), "minutes")
    s, t = mean_of(base, "env_steps"), mean_of(runs.get(("rsl_rl", "default"), []), "env_steps")
    out = {"rlcore_minutes": a, "rsl_rl_minutes": b, "ratio": a / b if b == b and b > 0 else math.nan,
           "rlcore_steps": s, "rsl_rl_steps": t}
    print(f"time_to_walk_vs_rsl_rl: rlcore_minutes={a:.4g} rsl_rl_minutes={b:.4g} ratio={out['ratio']:.4g} "
          f"rlcore_steps={s:.0f} rsl_rl_steps={t:.0f}")
    return out


if __name__ == "__main__":
    main()
