"""Learner throughput: rlcore's collection and update time per iteration at legged_gym sizes.

The environment costs nothing (``ZeroCostEnv``: observations and rewards come from a small pool of
pre-generated random tensors, time-outs come from ``episode_length_buf``, no physics), so the figures are
the learner's own cost: policy/critic inference and storage during collection, GAE, and the PPO update.

Defaults are ANYmal-on-flat-ground sizes of legged_gym: 4096 envs x 24 steps, actor and critic MLPs
[512, 256, 128] (elu) with observation normalisation, 48-dim ``policy`` and 48-dim ``critic`` groups
(``--privileged-dim 187`` adds a height-scan-like ``privileged`` group to the critic), 12 actions,
PPO 5 epochs x 4 mini-batches, adaptive learning rate.

If ``rsl_rl`` (PyPI ``rsl-rl-lib``, 5.x; ``pip install -e .[bench]``) is importable, its OnPolicyRunner runs the
same settings in the same process; iterations of the two learners are interleaved so that a change of
machine load hits both alike. ``update`` is the time spent in ``alg.update()``; ``collection`` is the rest
of the iteration (rollout, returns, bookkeeping); ``total`` is the whole ``learn(1)`` call (wall clock);
``CPU s/it`` is the process CPU time of that call, a figure that a busy shared machine disturbs less.

Run (from the repository root)::

    python bench/learner.py                       # 4096 envs, 1 warm-up + 3 measured iterations
    python bench/learner.py --iterations 3 --threads 1
    python bench/learner.py --device cuda

Last line: ``learner: envs=<n> rlcore_s_per_it=<a> rsl_rl_s_per_it=<b or nan> ratio=<a/b or nan>``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--steps", type=int, default=24, help="steps per env per iteration (num_steps_per_env)")
    # Default 3, not 5: at these sizes one PPO update is ~20 CPU-seconds per learner on one core, and a default
    # run with rsl_rl side by side (2 x (1 + 3) iterations) must stay within ~3 minutes on 2 cores.
    p.add_argument("--iterations", type=int, default=3, help="measured iterations (after 1 warm-up iteration)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: all cores)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--obs-dim", type=int, default=48, help="size of the 'policy' and 'critic' groups")
    p.add_argument("--privileged-dim", type=int, default=0, help="extra critic-only 'privileged' group (0: none)")
    p.add_argument("--num-actions", type=int, default=12)
    p.add_argument("--episode-length", type=int, default=1000, help="time-out period of the zero-cost env")
    p.add_argument("--no-rsl-rl", action="store_true", help="skip rsl_rl even if it is importable")
    return p.parse_args(argv)


ARGS = parse_args()
if ARGS.threads:
    THREADS = ARGS.threads
elif hasattr(os, "sched_getaffinity"):
    THREADS = len(os.sched_getaffinity(0))
else:
    THREADS = os.cpu_count() or 1
# Before torch is imported: idle OpenMP threads must not spin between the many small kernels.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout without install

from rlcore.env import VecEnv  # noqa: E402
from rlcore.runners import OnPolicyRunner  # noqa: E402


class ZeroCostEnv(VecEnv):
    """A VecEnv without physics: it cycles through ``pool`` pre-generated observation/reward sets.

    Episodes end only by time-out, when ``episode_length_buf`` reaches ``max_episode_length``
    (``extras["time_outs"]``), so dones, resets and time-out bootstrapping still happen at a realistic rate.
    """

    def __init__(self, num_envs: int, obs_dims: dict[str, int], num_actions: int, max_episode_length: int,
                 device: str, pool: int = 4, seed: int = 0) -> None:
        self.num_envs, self.num_actions = num_envs, num_actions
        self.max_episode_length = max_episode_length
        self.device = torch.device(device)
        self.cfg = {"num_envs": num_envs, "obs_dims": obs_dims, "max_episode_length": max_episode_length}
        g = torch.Generator(device="cpu").manual_seed(seed)
        self._obs = [TensorDict({k: torch.randn(num_envs, d, generator=g) for k, d in obs_dims.items()},
                                batch_size=[num_envs]).to(self.device) for _ in range(pool)]
        self._rew = [torch.randn(num_envs, generator=g).to(self.device) for _ in range(pool)]
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._i = 0

    def get_observations(self) -> TensorDict:
        return self._obs[self._i]

    def step(self, actions: torch.Tensor):
        self._i = (self._i + 1) % len(self._obs)
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        self.episode_length_buf.masked_fill_(time_outs, 0)
        return self._obs[self._i], self._rew[self._i], time_outs, {"time_outs": time_outs}


def train_cfg(args: argparse.Namespace) -> dict:
    """The rsl_rl 5.x train config (rlcore reads the same format)."""
    critic_groups = ["critic"] + (["privileged"] if args.privileged_dim > 0 else [])
    mlp = {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu", "obs_normalization": True}
    return {
        "seed": 1,
        "num_steps_per_env": args.steps,
        "save_interval": 10**9,
        "logger": "tensorboard",  # nothing is written: log_dir is None
        "obs_groups": {"actor": ["policy"], "critic": critic_groups},
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": dict(mlp),
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
            "schedule": "adaptive", "desired_kl": 0.01, "clip_param": 0.2, "gamma": 0.99, "lam": 0.95,
            "value_loss_coef": 1.0, "entropy_coef": 0.01, "max_grad_norm": 1.0, "use_clipped_value_loss": True,
            "rnd_cfg": None, "symmetry_cfg": None,
        },
    }


class Learner:
    """A runner plus timers: ``step()`` runs one ``learn(1)`` and records its total and update time."""

    def __init__(self, name: str, runner, device: str) -> None:
        self.name, self.runner, self.device = name, runner, device
        self.total: list[float] = []
        self.update: list[float] = []
        self.cpu: list[float] = []
        self._update_s = 0.0
        alg = runner.alg
        original = alg.update

        def timed_update(*a, **k):
            self._sync()
            t = time.perf_counter()
            out = original(*a, **k)
            self._sync()
            self._update_s += time.perf_counter() - t
            return out

        alg.update = timed_update  # both runners call self.alg.update() once per iteration
        self._first = True

    def _sync(self) -> None:
        if str(self.device).startswith("cuda"):
            torch.cuda.synchronize()

    def step(self, record: bool) -> None:
        self._update_s = 0.0
        self._sync()
        t, c = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):  # the runners' per-iteration console reports
            self.runner.learn(1, init_at_random_ep_len=self._first)
        self._sync()
        total, cpu = time.perf_counter() - t, time.process_time() - c
        self._first = False
        if record:
            self.total.append(total)
            self.cpu.append(cpu)
            self.update.append(self._update_s)

    def figures(self) -> dict[str, float]:
        n = max(len(self.total), 1)
        total, update = sum(self.total) / n, sum(self.update) / n
        return {"collection": total - update, "update": update, "total": total, "cpu": sum(self.cpu) / n}


def make_env(args: argparse.Namespace) -> ZeroCostEnv:
    dims = {"policy": args.obs_dim, "critic": args.obs_dim}
    if args.privileged_dim > 0:
        dims["privileged"] = args.privileged_dim
    return ZeroCostEnv(args.num_envs, dims, args.num_actions, args.episode_length, args.device)


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(THREADS)
    steps_per_it = args.num_envs * args.steps
    print(f"learner bench: {args.num_envs} envs x {args.steps} steps = {steps_per_it} samples/it, "
          f"MLP [512, 256, 128] elu, obs policy={args.obs_dim} critic={args.obs_dim}"
          f"{f' + privileged={args.privileged_dim}' if args.privileged_dim else ''}, {args.num_actions} actions, "
          f"PPO 5 epochs x 4 mini-batches, device={args.device}, threads={torch.get_num_threads()}, "
          f"torch {torch.__version__}")

    learners = []
    with contextlib.redirect_stdout(io.StringIO()):
        learners.append(Learner("rlcore", OnPolicyRunner(make_env(args), train_cfg(args), None, args.device),
                                args.device))
    rsl_rl_version = None
    if not args.no_rsl_rl:
        try:
            import importlib.metadata

            from rsl_rl.runners import OnPolicyRunner as RslRlRunner

            rsl_rl_version = importlib.metadata.version("rsl-rl-lib")
        except ImportError:
            print("rsl_rl: not importable (pip install rsl-rl-lib, or pip install -e .[bench]); rlcore only")
        else:
            if not rsl_rl_version.startswith("5."):
                print(f"rsl_rl: version {rsl_rl_version} found, the bench needs 5.x; rlcore only")
            else:
                with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints its models
                    learners.append(Learner("rsl_rl", RslRlRunner(make_env(args), train_cfg(args), None, args.device),
                                            args.device))

    t0 = time.perf_counter()
    for learner in learners:  # warm-up: allocators, first normaliser statistics (rlcore's warm-up rollout)
        learner.step(record=False)
    for _ in range(args.iterations):  # interleaved: load changes of a shared machine hit both
        for learner in learners:
            learner.step(record=True)
    elapsed = time.perf_counter() - t0

    print(f"{'':12s} {'collection s/it':>16s} {'update s/it':>12s} {'total s/it':>11s} {'steps/s':>10s} {'CPU s/it':>9s}"
          f"   (mean of {args.iterations} iterations after 1 warm-up)")
    figs = {}
    for learner in learners:
        f = figs[learner.name] = learner.figures()
        label = learner.name if learner.name == "rlcore" else f"rsl_rl {rsl_rl_version}"
        print(f"{label:12s} {f['collection']:16.3f} {f['update']:12.3f} {f['total']:11.3f} "
              f"{steps_per_it / f['total']:10.0f} {f['cpu']:9.3f}")
    a = figs["rlcore"]["total"]
    b = figs["rsl_rl"]["total"] if "rsl_rl" in figs else math.nan
    if "rsl_rl" in figs:
        ratios = {k: figs["rlcore"][k] / figs["rsl_rl"][k] for k in ("collection", "update", "total")}
        print(f"{'ratio':12s} {ratios['collection']:16.3f} {ratios['update']:12.3f} {ratios['total']:11.3f}"
              f"   (rlcore / rsl_rl; < 1: rlcore is faster)")
    print(f"(bench wall time {elapsed:.1f} s)")
    print(f"learner: envs={args.num_envs} rlcore_s_per_it={a:.4f} rsl_rl_s_per_it={b:.4f} ratio={a / b:.3f}")


if __name__ == "__main__":
    main(ARGS)
