"""One rank of the 2-process CPU (Gloo) check launched by ``test_multiprocess.py`` through torchrun.

Usage: ``python -m torch.distributed.run --nproc_per_node=2 tests/distributed/ddp_worker.py OUTDIR``

Each rank writes ``OUTDIR/rank<r>.pt`` with what the test compares across ranks:
- ``grad_bucket``: its gradients before and after ``all_reduce_mean_grads`` with tiny buckets;
- ``init`` / ``final``: actor and critic state dicts (normaliser buffers included) right after the
  runner was built (after the start-up broadcast) and after 3 PPO iterations;
- ``learning_rate`` (algorithm and optimiser), the local observation moments fed to the normalisers,
  seeds, and the runner's log dir (rank 0 gets ``OUTDIR/logs_rank0``, rank 1 ``OUTDIR/logs_rank1``).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from rlcore.runners import OnPolicyRunner
from rlcore.utils.distributed import all_reduce_mean_grads, multi_gpu_cfg_from_env
from tasks.registry import make_task

NUM_ENVS = 64
NUM_STEPS = 16
ITERATIONS = 3
BASE_SEED = 7
GRAD_BUCKET_MB = 0.0001  # ~104 bytes = 26 float32 per bucket: many buckets, some tensors larger than one


def train_cfg() -> dict:
    return {
        "seed": BASE_SEED,
        "num_steps_per_env": NUM_STEPS,
        "logger": "none",
        "save_interval": 1000,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "learning_rate": 1e-3,
                      "schedule": "adaptive", "desired_kl": 0.01, "rnd_cfg": None, "symmetry_cfg": None},
    }


def grad_bucket_check(rank: int) -> dict:
    """Gradients that differ per rank, averaged with ``all_reduce_mean_grads`` in many tiny buckets."""
    g = torch.Generator().manual_seed(1000 + rank)
    shapes = [(3,), (40, 7), (1,), (5, 5), (100,), (2, 3, 4), (13,)]
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g)
    params[3].grad = torch.randn(5, 5, generator=g).t()  # a non-contiguous gradient
    params.append(torch.nn.Parameter(torch.zeros(4)))  # a parameter without gradient (skipped on every rank)
    before = [p.grad.clone() if p.grad is not None else None for p in params]
    all_reduce_mean_grads(params, bucket_mb=GRAD_BUCKET_MB)
    after = [p.grad.clone() if p.grad is not None else None for p in params]
    return {"before": before, "after": after}


def main(outdir: str) -> None:
    rank = int(os.environ["RANK"])
    assert multi_gpu_cfg_from_env() is not None, "not launched by torchrun with WORLD_SIZE > 1"
    try:
        env = make_task("pendulum", num_envs=NUM_ENVS, seed=BASE_SEED + rank)  # the env's own RNG differs per rank
        # The runner initialises the Gloo process group from torchrun's environment and seeds seed + rank.
        runner = OnPolicyRunner(env, train_cfg(), log_dir=os.path.join(outdir, f"logs_rank{rank}"), device="cpu")
        assert dist.is_initialized() and dist.get_backend() == "gloo"
        result: dict = {"rank": rank, "world_size": dist.get_world_size(), "torch_seed": torch.initial_seed(),
                        "log_dir": runner.log_dir, "num_envs": NUM_ENVS, "num_steps": NUM_STEPS,
                        "iterations": ITERATIONS}
        result["grad_bucket"] = grad_bucket_check(rank)

        alg = runner.alg
        snapshot = lambda: {"actor": {k: v.clone() for k, v in alg.actor.state_dict().items()},  # noqa: E731
                            "critic": {k: v.clone() for k, v in alg.critic.state_dict().items()}}
        result["init"] = snapshot()

        # Record, in float64, what this rank feeds to the normalisers (to check the pooled statistics).
        local = {g: {"n": 0, "sum": 0.0, "sumsq": 0.0} for g in ("policy", "critic")}
        original = alg.update_normalization

        def recording_update_normalization(obs):
            for group, acc in local.items():
                x = obs[group].reshape(-1, obs[group].shape[-1]).double()
                acc["n"] += x.shape[0]
                acc["sum"] = acc["sum"] + x.sum(0)
                acc["sumsq"] = acc["sumsq"] + x.square().sum(0)
            original(obs)

        alg.update_normalization = recording_update_normalization
        runner.learn(ITERATIONS)
        runner.close()

        result["final"] = snapshot()
        result["local_obs_moments"] = local
        result["learning_rate"] = alg.learning_rate
        result["optimizer_lrs"] = [group["lr"] for group in alg.optimizer.param_groups]
        result["iteration"] = runner.current_learning_iteration
        torch.save(result, os.path.join(outdir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
