"""Learner speed: rlcore against rsl_rl 5.x and a bare-PyTorch floor, at legged_gym sizes.

The environment costs nothing (``ZeroCostEnv``: observations and rewards come from a small pool of
pre-generated random tensors, time-outs from ``episode_length_buf``, no physics), so the figures are the
learner's own cost: policy/critic inference and storage during collection, GAE, and the PPO update.

Sizes (legged_gym, ANYmal on flat ground): actor observations 48 (group ``policy``), critic observations
48 + 187 privileged = 235 (groups ``policy`` + ``privileged``), 12 actions, 24 steps per env and iteration,
PPO 5 epochs x 4 mini-batches, adaptive-KL learning rate, observation normalisation. Cases:

- ``mlp``: actor and critic MLP [512, 256, 128] (elu), 4096 envs;
- ``mlp_1024``: the same at 1024 envs (per-iteration fixed costs weigh more);
- ``rnn``: LSTM 256 then MLP [256, 128], 4096 envs.

Each (case, library) runs in its own fresh subprocess with the same thread count; the processes of a case are
built first and then stepped in turns, one iteration each per round (the order rotating), so a slow spell of this
noisy machine falls on every library alike instead of on whichever ran at the time: a warm-up round (allocators,
rlcore's normaliser warm-up rollout), then the measured rounds, each a ``learn(1)``. Per iteration: ``returns``
is ``alg.compute_returns``, ``update`` is ``alg.update``, ``collection`` is the rest of the rollout (``total``
minus both), ``total`` the whole iteration (wall clock), ``CPU`` the process CPU time (a busy shared machine
disturbs it less). Each column is the median over the measured rounds (so the columns need not add up exactly).

The floor (``mlp`` and ``rnn`` cases, its own subprocess) is bare eager PyTorch doing only what one update must do:
5 x 4 mini-batch steps, each an actor and critic forward on contiguous slices of pre-made data, Gaussian
log-prob and entropy in closed form, clipped surrogate + clipped value loss, backward and an Adam step. MLP: batch
``envs * 24 / 4`` transitions (24,576 at 4096 envs). RNN: ``envs / 4`` whole 24-step sequences through
``nn.LSTM`` from a zero state, then the MLP head on every step (no episode ends inside a sequence, so no padding:
the least any library can do for the same update). ``rlcore/floor`` compares rlcore's ``update`` with it (both are
the update alone; no normalisation, gradient clipping, KL or shuffling in the floor).

rlcore's runner keeps freed CPU memory in the process (``runner.keep_cpu_memory``, default true): the update's large
tensors (50 MB activations and gradients at 4096 envs) then reuse mapped pages instead of page-faulting ~500,000 fresh
ones per update, as rsl_rl and the bare floor do under glibc's defaults. ``--allocator-variants`` adds rlcore without it
(``rlcore heap returned``) and the floor with it (``floor memory kept``), so the table separates the two effects.

Run (from the repository root; OMP_WAIT_POLICY=PASSIVE is set for the children)::

    python bench/learner.py                          # all cases, all cores, 1 warm-up + 3 measured iterations
    python bench/learner.py --cases mlp,mlp_1024 --iterations 5 --threads 2
    python bench/learner.py --device cuda
    python bench/learner.py --profile mlp            # torch.profiler over one rlcore update, top 25 by self CPU
    python bench/learner.py --profile mlp --profile-library floor   # the same for the floor (or rsl_rl, rlcore_plain)
    python bench/learner.py --tiny --threads 1       # smoke run: 16 envs, 1 + 2 iterations (seconds)
    python bench/learner.py --cases mlp --compile    # rlcore with torch_compile=true (compiled MLP heads)
    python bench/learner.py --allocator-variants     # + rlcore with runner.keep_cpu_memory=false, floor with it on

Expected run time of the default on the 2-core reference machine (issue 13's figures: ~15 s/it per library
for ``mlp``, ~4 s for ``mlp_1024``, ~33 s for ``rnn``, ~12 s for the floor): 4 iterations x 2 libraries x
(15 + 33) s + 6 x 2 x 4 s + 4 x 12 s plus ~7 subprocess start-ups, about 9-10 minutes (under 15).

Last line: ``learner: mlp_ratio=<r> mlp_1024_ratio=<r> rnn_ratio=<r> mlp_floor_ratio=<r> rnn_floor_ratio=<r>``
(rlcore total / rsl_rl total per case; rlcore update / floor for the MLP and RNN cases; ``nan`` for a case not
run or a library missing).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import subprocess
import sys
import time

from _common import (
    ACTOR_OBS,
    CASES,
    EPISODE_LENGTH,
    EPOCHS,
    MINI_BATCHES,
    NUM_ACTIONS,
    PRIVILEGED_OBS,
    ROOT,
    STEPS,
    case_settings,
    default_threads,
    floor_loss,
    make_runner,
)

LIBRARIES = ("rlcore", "rsl_rl")
FLOOR_CASES = ("mlp", "rnn")
ALLOCATOR_WORKERS = ("rlcore_plain", "floor_kept")
"""``--allocator-variants``: rlcore with ``runner.keep_cpu_memory=false`` (glibc returns every large block to the
kernel, as in rsl_rl and the floor) and the floor with rlcore's kept CPU memory (``rlcore.utils.cpu_memory``)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    p.add_argument("--iterations", type=int, default=None,
                   help="measured iterations per case (default: 3, 5 for mlp_1024; 2 with --tiny)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up iterations before measuring")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: all cores)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--episode-length", type=int, default=EPISODE_LENGTH, help="time-out period of the zero-cost env")
    p.add_argument("--no-rsl-rl", action="store_true", help="skip rsl_rl")
    p.add_argument("--no-floor", action="store_true", help="skip the bare-PyTorch floor")
    p.add_argument("--profile", default=None, metavar="CASE", help="profile one update of CASE and exit")
    p.add_argument("--profile-library", default="rlcore", choices=[*LIBRARIES, "floor", *ALLOCATOR_WORKERS],
                   help="whose update --profile profiles (default: rlcore; rlcore_plain / floor_kept: see "
                        "--allocator-variants)")
    p.add_argument("--tiny", action="store_true", help="smoke run: envs / 256 (at least 8), 2 measured iterations")
    p.add_argument("--compile", action="store_true",
                   help="rlcore with algorithm.torch_compile=true (its MLP heads under torch.compile; the warm-up "
                        "iteration compiles)")
    p.add_argument("--allocator-variants", action="store_true",
                   help="also rlcore with runner.keep_cpu_memory=false and the floor with freed CPU memory kept")
    p.add_argument("--worker", default=None, choices=[*LIBRARIES, "floor", *ALLOCATOR_WORKERS], help=argparse.SUPPRESS)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.case_list = [c.strip() for c in args.cases.split(",") if c.strip()]
    for name in args.case_list + ([args.profile] if args.profile else []):
        if name not in CASES:
            p.error(f"unknown case '{name}'; valid: {', '.join(CASES)}")
    if args.threads is None:
        args.threads = default_threads()
    return args


# ============================================================================ worker side (imports torch)
def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


class TimedRunner:
    """A runner whose ``alg.compute_returns`` and ``alg.update`` are timed; ``step()`` runs one ``learn(1)``."""

    def __init__(self, runner, device: str) -> None:
        self.runner, self.device = runner, device
        self.rows: list[dict[str, float]] = []
        self._spent = {"returns": 0.0, "update": 0.0}
        self._first = True
        for name, key in (("compute_returns", "returns"), ("update", "update")):
            setattr(runner.alg, name, self._timed(getattr(runner.alg, name), key))

    def _timed(self, fn, key: str):
        def wrapper(*a, **k):
            _sync(self.device)
            t = time.perf_counter()
            out = fn(*a, **k)
            _sync(self.device)
            self._spent[key] += time.perf_counter() - t
            return out

        return wrapper

    def step(self, record: bool) -> None:
        self._spent = {"returns": 0.0, "update": 0.0}
        _sync(self.device)
        t, c = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):  # the runners' per-iteration console reports
            self.runner.learn(1, init_at_random_ep_len=self._first)
        _sync(self.device)
        total, cpu = time.perf_counter() - t, time.process_time() - c
        self._first = False
        if record:
            self.rows.append({"collection": total - self._spent["returns"] - self._spent["update"],
                              "returns": self._spent["returns"], "update": self._spent["update"],
                              "total": total, "cpu": cpu})


def floor_step_fn(case: dict, device: str, keep_memory: bool = False):
    """One update's worth of bare mini-batch steps (EPOCHS x MINI_BATCHES) of the MLP or RNN case, as a closure
    (``keep_memory``: with rlcore's kept CPU memory, ``rlcore.utils.cpu_memory``, in this process)."""
    import torch
    import torch.nn as nn

    if keep_memory:
        from rlcore.utils.cpu_memory import keep_freed_cpu_memory

        keep_freed_cpu_memory()

    torch.manual_seed(0)
    recurrent = case["model"] == "rnn"

    def mlp(n_in: int, n_out: int) -> nn.Sequential:
        layers, d = [], n_in
        for h in case["hidden_dims"]:
            layers += [nn.Linear(d, h), nn.ELU()]
            d = h
        return nn.Sequential(*layers, nn.Linear(d, n_out)).to(device)

    def model(n_in: int, n_out: int):
        """``x [B, D] -> [B, n_out]`` (MLP), or ``x [T, n, D] -> [T, n, n_out]`` through an LSTM and the MLP."""
        if not recurrent:
            net = mlp(n_in, n_out)
            return net, net
        lstm, head = nn.LSTM(n_in, case["rnn_hidden_dim"]).to(device), mlp(case["rnn_hidden_dim"], n_out)
        return nn.ModuleList([lstm, head]), lambda x: head(lstm(x)[0])

    (actor_mod, actor), (critic_mod, critic) = model(ACTOR_OBS, NUM_ACTIONS), model(ACTOR_OBS + PRIVILEGED_OBS, 1)
    std = nn.Parameter(torch.ones(NUM_ACTIONS, device=device))
    optimizer = torch.optim.Adam([*actor_mod.parameters(), *critic_mod.parameters(), std], lr=1e-3)
    lead = (STEPS, case["num_envs"]) if recurrent else (case["num_envs"] * STEPS,)
    per_batch = lead[-1] // MINI_BATCHES  # envs (RNN) or transitions (MLP) per mini-batch
    data = {"obs_a": torch.randn(*lead, ACTOR_OBS), "obs_c": torch.randn(*lead, ACTOR_OBS + PRIVILEGED_OBS),
            "actions": torch.randn(*lead, NUM_ACTIONS), "old_log_prob": torch.randn(lead) - 10.0,
            "advantages": torch.randn(lead), "returns": torch.randn(lead), "old_values": torch.randn(lead)}
    data = {k: v.to(device) for k, v in data.items()}
    def update() -> None:
        for _ in range(EPOCHS):
            for i in range(MINI_BATCHES):
                s = slice(i * per_batch, (i + 1) * per_batch)
                mb = {k: v[:, s] if recurrent else v[s] for k, v in data.items()}
                loss = floor_loss(actor(mb["obs_a"]), std, mb["actions"], mb["old_log_prob"], mb["advantages"],
                                  critic(mb["obs_c"]).squeeze(-1), mb["old_values"], mb["returns"])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

    return update


def run_worker(args: argparse.Namespace) -> None:
    """One (case, library) in this process, driven by the parent over stdin: ``READY`` once built, then for every
    ``step`` line one iteration and its ``ROW <json>`` (collection, returns, update, total, cpu seconds); ``quit``
    or the end of stdin ends it. The parent alternates its workers step by step (see :func:`measure_case`)."""
    import torch

    torch.set_num_threads(args.threads)
    case = case_settings(args.case, args)
    if args.worker in ("floor", "floor_kept"):
        update = floor_step_fn(case, args.device, keep_memory=args.worker == "floor_kept")

        def step() -> dict[str, float]:
            _sync(args.device)
            t, c = time.perf_counter(), time.process_time()
            update()
            _sync(args.device)
            wall = time.perf_counter() - t
            return {"update": wall, "total": wall, "cpu": time.process_time() - c}
    else:
        if args.worker == "rsl_rl":
            try:
                import importlib.metadata

                import rsl_rl  # noqa: F401

                version = importlib.metadata.version("rsl-rl-lib")
            except ImportError:
                print("rsl_rl is not importable (pip install rsl-rl-lib, or pip install -e .[bench])")
                sys.exit(3)
            if not version.startswith("5."):
                print(f"rsl_rl {version} found; this bench needs 5.x")
                sys.exit(3)
        timed = TimedRunner(make_runner(args.worker, case, args), args.device)

        def step() -> dict[str, float]:
            timed.step(record=True)
            return timed.rows[-1]

    print(f"READY threads={torch.get_num_threads()}", flush=True)
    for line in sys.stdin:
        if line.strip() != "step":
            break
        print("ROW " + json.dumps(step()), flush=True)


def run_profile(args: argparse.Namespace) -> None:
    """torch.profiler over one update of case ``args.profile`` by ``args.profile_library`` (rlcore or rsl_rl: after
    a warm-up iteration and a rollout; floor: after one warm-up update)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(args.threads)
    case = case_settings(args.profile, args)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    tables: list[str] = []

    def profiled(fn):
        def wrapper(*a, **k):
            with profile(activities=activities) as prof:
                out = fn(*a, **k)
                _sync(args.device)
            tables.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
            return out

        return wrapper

    t = time.perf_counter()
    if args.profile_library in ("floor", "floor_kept"):
        update = floor_step_fn(case, args.device, keep_memory=args.profile_library == "floor_kept")
        update()  # warm-up
        t = time.perf_counter()
        profiled(update)()
    else:
        runner = make_runner(args.profile_library, case, args)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(1, init_at_random_ep_len=True)  # warm-up (normaliser warm-up rollout, allocators)
        runner.alg.update = profiled(runner.alg.update)
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(1)
    print(f"profile of one {args.profile_library} update, case {args.profile} ({case['num_envs']} envs, threads "
          f"{torch.get_num_threads()}, device {args.device}; incl. profiler overhead {time.perf_counter() - t:.2f} s), "
          "top 25 by self CPU time:")
    print(tables[0])


# ============================================================================ parent side
class Worker:
    """A worker process of one (case, library), built once and stepped on demand (``run_worker``'s protocol)."""

    def __init__(self, worker: str, case: str, args: argparse.Namespace) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", worker, "--case", case, "--threads",
               str(args.threads), "--device", args.device, "--episode-length", str(args.episode_length)]
        if args.tiny:
            cmd.append("--tiny")
        if args.compile:
            cmd.append("--compile")
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle OpenMP threads must not spin between small kernels
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")  # a checkout without install
        self.name, self.case = worker, case
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, cwd=ROOT)
        self.tail: list[str] = []
        self.alive = self._read("READY") is not None

    def _read(self, tag: str) -> str | None:
        """The payload of the next line starting with ``tag``; None (and the worker marked dead) at its exit."""
        for line in self.proc.stdout:
            if line.startswith(tag):
                return line[len(tag):].strip()
            self.tail = (self.tail + [line.rstrip()])[-3:]
        self.alive = False
        print(f"  {self.case} / {self.name}: no result (exit {self.proc.wait()}): {' | '.join(self.tail)}", flush=True)
        return None

    def step(self) -> dict | None:
        """One iteration in the worker; its timings, or None if the worker died."""
        if not self.alive:
            return None
        try:
            self.proc.stdin.write("step\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.alive = False
            return None
        row = self._read("ROW ")
        return None if row is None else json.loads(row)

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait()


def measure_case(name: str, workers: list[str], args: argparse.Namespace) -> dict[str, dict | None]:
    """Interleaved measurement of one case: every worker built first, then ``warmup + iterations`` rounds of one
    iteration per worker (the order rotating each round), so a slow spell of the machine hits every library
    alike. Returns per worker the median of each column over the measured rounds (None if it failed)."""
    case = case_settings(name, args)
    t = time.perf_counter()
    procs = [Worker(w, name, args) for w in workers]
    rows: dict[str, list[dict]] = {w: [] for w in workers}
    for r in range(args.warmup + case["iterations"]):
        order = procs[r % len(procs):] + procs[:r % len(procs)]
        for proc in order:
            row = proc.step()
            if row is not None and r >= args.warmup:
                rows[proc.name].append(row)
    for proc in procs:
        proc.close()
    print(f"  {name} ({case['num_envs']} envs, {args.warmup} warm-up + {case['iterations']} measured rounds of "
          f"{', '.join(workers)}): {time.perf_counter() - t:.0f} s", flush=True)
    return {w: ({k: statistics.median(row[k] for row in rs) for k in rs[0]} if rs and proc.alive else None)
            for (w, rs), proc in zip(rows.items(), procs)}


def ratio(a: dict | None, b: dict | None, key: str = "total") -> float:
    return a[key] / b[key] if a and b and b[key] > 0 else math.nan


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return {}
    if args.profile:
        run_profile(args)
        return {}
    try:
        import importlib.metadata

        rsl_version = importlib.metadata.version("rsl-rl-lib")
    except importlib.metadata.PackageNotFoundError:
        rsl_version = "missing"
    print(f"learner bench: threads={args.threads} device={args.device} rsl_rl={rsl_version}; actor obs {ACTOR_OBS}, "
          f"critic obs {ACTOR_OBS + PRIVILEGED_OBS}, {NUM_ACTIONS} actions, {STEPS} steps, PPO {EPOCHS} epochs x "
          f"{MINI_BATCHES} mini-batches, adaptive KL, obs normalisation; {args.warmup} warm-up round(s), "
          f"median of the measured rounds, libraries interleaved{' (TINY)' if args.tiny else ''}"
          f"{'; rlcore with torch_compile' if args.compile else ''}", flush=True)
    t0 = time.perf_counter()
    results: dict[str, dict[str, dict | None]] = {}
    for name in args.case_list:
        workers = ["rlcore"] + ([] if args.no_rsl_rl else ["rsl_rl"])
        if name in FLOOR_CASES and not args.no_floor:
            workers.append("floor")
        if args.allocator_variants:
            workers += [w for w in ALLOCATOR_WORKERS if w != "floor_kept" or "floor" in workers]
        results[name] = measure_case(name, workers, args)

    cols = ("collection", "returns", "update", "total", "cpu")
    print(f"\n{'case':9s} {'library':20s} " + " ".join(f"{c + ' s/it':>15s}" for c in cols) + f" {'samples/s':>10s}")
    for name, res in results.items():
        samples = case_settings(name, args)["num_envs"] * STEPS
        for worker, r in res.items():
            label = {"rsl_rl": f"rsl_rl {rsl_version}", "rlcore_plain": "rlcore heap returned",
                     "floor_kept": "floor memory kept"}.get(worker, worker)
            if r is None:
                print(f"{name:9s} {label:20s} (failed)")
                continue
            cells = " ".join(f"{r[c]:15.3f}" if c in r else f"{'-':>15s}" for c in cols)
            print(f"{name:9s} {label:20s} {cells} {samples / r['total']:10.0f}")
        rl, rs = res.get("rlcore"), res.get("rsl_rl")
        if rl and rs:
            print(f"{name:9s} {'rlcore / rsl_rl':20s} " + " ".join(f"{ratio(rl, rs, c):15.3f}" for c in cols))
        if rl and res.get("floor"):
            print(f"{name:9s} {'rlcore / floor':20s} {'':>15s} {'':>15s} {ratio(rl, res['floor'], 'update'):15.3f}"
                  "   (rlcore's update vs the bare mini-batch steps)")
        if rl and res.get("floor_kept"):
            print(f"{name:9s} {'rlcore / floor kept':20s} {'':>15s} {'':>15s} "
                  f"{ratio(rl, res['floor_kept'], 'update'):15.3f}   (both with freed CPU memory kept)")
        if res.get("rlcore_plain") and rs:
            print(f"{name:9s} {'rlcore heap ret./rsl':20s} "
                  + " ".join(f"{ratio(res['rlcore_plain'], rs, c):15.3f}" for c in cols))
    print(f"(bench wall time {time.perf_counter() - t0:.0f} s; ratios < 1: rlcore is faster)")

    def case_ratio(name: str) -> float:
        res = results.get(name, {})
        return ratio(res.get("rlcore"), res.get("rsl_rl"))

    out = {"mlp_ratio": case_ratio("mlp"), "mlp_1024_ratio": case_ratio("mlp_1024"), "rnn_ratio": case_ratio("rnn"),
           **{f"{name}_floor_ratio": ratio(results.get(name, {}).get("rlcore"), results.get(name, {}).get("floor"),
                                           "update") for name in FLOOR_CASES}}
    print("learner: " + " ".join(f"{k}={v:.3f}" for k, v in out.items()))
    return out


if __name__ == "__main__":
    main()
