"""What the ``task=go2_rough`` PPO update costs, and what the CNN encoder's shape does to it (issue 42's first bound).

A ``task=go2_rough`` run (default config, no logger) collects real rollouts; each measured iteration times
``PPO.update`` alone (4 epochs x 4 mini-batches over 1024 envs x 24 steps), after a warm-up iteration. With
``--sweep`` the default config and a fixed list of encoder variants (:data:`VARIANTS`) each run in a fresh process,
so that one variant's allocations do not slow the next; the table gives each variant's median update time, its
ratio to the default measured in the same sweep, and the size of the encoder's output (the features entering each
head's first layer). ``--profile`` adds ``torch.profiler``'s top operators of one update, and the share of the
convolutions (forward and backward) in it.

Run (from the repository root)::

    python bench/cnn_update.py                      # the default go2_rough config: 1 warm-up + 2 measured updates
    python bench/cnn_update.py --profile            # plus the profile of one update
    python bench/cnn_update.py --sweep              # the default and every variant (~1 min each on 2 cores)
    python bench/cnn_update.py model.actor.cnn_cfg.output_channels=[16,32]
    python bench/cnn_update.py --tiny               # smoke run: 64 envs

Last line: ``cnn_update: update=<s> features=<n>`` for one config; with ``--sweep``,
``cnn_update: default=<s> <variant>=<s> ...`` (medians). The variants change cost only: whether one learns as well
is a training run's question.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import time

from _common import BENCH, go2_training  # first: the preamble (OMP_WAIT_POLICY, the repository on sys.path)


def _cnn(head: str, channels: str, stride: str = "[2,2]") -> list[str]:
    """The overrides giving ``head`` (actor or critic) a CNN of ``channels`` at ``stride``."""
    return [f"model.{head}.cnn_cfg.output_channels={channels}", f"model.{head}.cnn_cfg.stride={stride}"]


#: Encoder variants of the sweep: name -> overrides of the go2_rough config. The default is the actor's CNN at
#: [8, 16] channels, stride [2, 2] (240 features), and the critic's scan flattened into its MLP (no conv layer).
VARIANTS: dict[str, list[str]] = {
    "two_cnns_16_32": _cnn("actor", "[16,32]") + _cnn("critic", "[16,32]"),  # the first runs' preset (480 each)
    "critic_cnn": _cnn("critic", "[8,16]"),  # the critic with its own CNN, as the actor's
    "actor_16_32": _cnn("actor", "[16,32]"),
    "stride_2_1": ["model.actor.cnn_cfg.stride=[2,1]"],
    "shared": ["algorithm.share_cnn_encoders=true"],  # the critic reuses the actor's encoder (run once per head)
    "heads_128": ["model.actor.hidden_dims=[128,128,128]", "model.critic.hidden_dims=[128,128,128]"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=2, help="measured updates (after one warm-up iteration)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="then profile one update (torch.profiler)")
    p.add_argument("--sweep", action="store_true", help="the default config and every variant, each in its process")
    p.add_argument("--tiny", action="store_true", help="smoke run: 64 envs")
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the task=go2_rough run")
    args = p.parse_args(argv)
    if args.iterations < 1:
        p.error("--iterations >= 1")
    return args


def encoder_features(model) -> int:
    """Features the CNN encoders of ``model`` hand to its head (their flattened outputs, summed over groups)."""
    return sum(int(cnn.output_dim) for cnn in model.cnns.values()) if hasattr(model, "cnns") else 0


def measure(args: argparse.Namespace) -> dict:
    """One config: ``{"update": median seconds, "features": n, "profile": table or None, "conv_share": x}``."""
    import torch

    from rlcore.runners import OnPolicyRunner

    overrides = ["task=go2_rough", *(["task.num_envs=64"] if args.tiny else []), *args.overrides]
    _, train_cfg, _, env = go2_training(args.seed, overrides, args.threads)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn(1)  # warm-up: normalisers, a first rollout and update
    alg, obs, times = runner.alg, env.get_observations(), []
    for _ in range(args.iterations):
        obs = runner._collect(obs)
        start = time.perf_counter()
        alg.update()
        times.append(time.perf_counter() - start)
    result = {"update": statistics.median(times), "features": encoder_features(alg.actor), "profile": None,
              "conv_share": None, "threads": torch.get_num_threads(), "envs": env.num_envs}
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        obs = runner._collect(obs)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            alg.update()
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        conv = sum(e.self_cpu_time_total for e in events if "convolution" in e.key)
        result["profile"] = events.table(sort_by="self_cpu_time_total", row_limit=12)
        result["conv_share"] = conv / total if total else 0.0
    env.close()
    return result


def sweep(args: argparse.Namespace) -> dict[str, float]:
    """The default config and every variant, each measured by this script in a fresh process."""
    results = {}
    base = [sys.executable, str(BENCH / "cnn_update.py"), f"--iterations={args.iterations}", f"--seed={args.seed}",
            *([f"--threads={args.threads}"] if args.threads else []), *(["--tiny"] if args.tiny else [])]
    for name, overrides in {"default": [], **VARIANTS}.items():
        proc = subprocess.run([*base, *args.overrides, *overrides], capture_output=True, text=True, check=False)
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode != 0 or not last.startswith("cnn_update: update="):
            raise SystemExit(f"error: variant {name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        fields = dict(item.split("=", 1) for item in last.removeprefix("cnn_update: ").split())
        results[name] = float(fields["update"])
        print(f"{name:<14} update {results[name]:6.2f} s  x{results[name] / results['default']:.2f} of default  "
              f"features {fields['features']:>5}  {' '.join(overrides)}", flush=True)
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.sweep:
        results = sweep(args)
        print("cnn_update: " + " ".join(f"{k}={v:.2f}" for k, v in results.items()))
        return results
    result = measure(args)
    if result["profile"]:
        print(result["profile"])
        print(f"convolutions (forward and backward): {100 * result['conv_share']:.0f} % of the update's CPU time")
    print(f"task=go2_rough, {result['envs']} envs, threads {result['threads']}, {args.iterations} updates, overrides "
          f"{args.overrides or 'none'}")
    print(f"cnn_update: update={result['update']:.2f} features={result['features']}")
    return result


if __name__ == "__main__":
    main()
