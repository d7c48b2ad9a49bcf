"""One rank of the 2-process CPU (Gloo) check launched by ``test_multiprocess.py`` through torchrun.

Usage: ``python -m torch.distributed.run --nproc_per_node=2 tests/distributed/ddp_worker.py OUTDIR``

Each rank runs the scenarios below in order (the collectives of every scenario pair up across ranks) and writes
``OUTDIR/rank<r>.pt`` with what the test compares across ranks and against the concatenated data of both ranks:

- ``grad_bucket``: gradients before and after ``all_reduce_mean_grads`` with tiny buckets;
- ``pooled``: an observation normaliser, :func:`pooled_moments` and PPO's advantage normalisation fed a feature
  of mean 1000 and std 0.05 (a different number of samples and a different offset per rank), plus a rank with
  an empty batch;
- ``ppo``: 3 PPO iterations on the pendulum with observation, reward and RND normalisers (rank 1's rewards are
  5x rank 0's): model states after the start-up broadcast and at the end, every input each normaliser was fed,
  each rank's advantages, its local KL of every mini-batch and the logged losses;
- ``resume``: every rank resumes from rank 0's checkpoint with ``learn(init_at_random_ep_len=True)``, once as
  written (every rank's state) and once without ``other_ranks``: the episode lengths each rank starts from;
- ``distillation``: 2 Distillation iterations with the PPO actor as teacher: student states and the inputs
  of its observation normaliser.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from rlcore.algorithms.ppo import _normalize
from rlcore.distributed import all_reduce_mean_grads, multi_gpu_cfg_from_env, pooled_moments
from rlcore.env.task import make_task
from rlcore.modules import EmpiricalNormalization
from rlcore.runners import DistillationRunner, OnPolicyRunner

NUM_ENVS = 64
NUM_STEPS = 16
ITERATIONS = 3
DISTILLATION_ITERATIONS = 2
BASE_SEED = 7
GRAD_BUCKET_MB = 0.0001  # ~104 bytes = 26 float32 per bucket: many buckets, some tensors larger than one
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


def train_cfg() -> dict:
    return {
        "seed": BASE_SEED,
        "num_steps_per_env": NUM_STEPS,
        "logger": "none",
        "save_interval": 1000,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"], "rnd_state": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True,
                  "distribution_cfg": GAUSSIAN},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "learning_rate": 1e-3,
                      "schedule": "adaptive", "desired_kl": 0.01, "reward_normalization": True,
                      "rnd_cfg": {"num_outputs": 4, "predictor_hidden_dims": [8], "target_hidden_dims": [8],
                                  "state_normalization": True, "reward_normalization": True},
                      "symmetry_cfg": None},
    }


def distillation_cfg() -> dict:
    return {
        "seed": BASE_SEED,
        "num_steps_per_env": NUM_STEPS,
        "logger": "none",
        "save_interval": 1000,
        "obs_groups": {"student": ["policy"], "teacher": ["policy"]},
        "student": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                    "distribution_cfg": GAUSSIAN},
        "teacher": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True},
        "algorithm": {"class_name": "Distillation", "num_learning_epochs": 1, "gradient_length": 8,
                      "learning_rate": 1e-2},
    }


class ScaledRewards:
    """The pendulum with rewards multiplied by ``scale`` (so the ranks' reward statistics differ clearly).

    Records the episode lengths the env holds at the first ``step`` after ``record_next_step()``.
    """

    def __init__(self, env, scale: float) -> None:
        self.__dict__.update(env=env, scale=scale, recorded=None, _record=False)

    def __getattr__(self, name):
        return getattr(self.env, name)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def record_next_step(self) -> None:
        self._record = True

    def step(self, actions):
        if self._record:
            self.recorded, self._record = self.env.episode_length_buf.clone(), False
        obs, rewards, dones, extras = self.env.step(actions)
        return obs, rewards * self.scale, dones, extras


def make_env(rank: int, seed_offset: int = 0) -> ScaledRewards:
    # the env's own RNG differs per rank; rank 1's rewards are 5x rank 0's
    env = make_task("pendulum", num_envs=NUM_ENVS, seed=BASE_SEED + rank + seed_offset)
    return ScaledRewards(env, 1.0 + 4.0 * rank)


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


def pooled_statistics_check(rank: int) -> dict:
    """Large mean, small spread: pooled statistics must not cancel (E[x^2] - mean^2 in float32 gives std 0)."""
    g = torch.Generator().manual_seed(2000 + rank)
    x = 1000.0 + 0.05 * torch.randn(500 + 300 * rank, 3, generator=g) + 0.03 * rank  # float32, offset per rank
    norm = EmpiricalNormalization(3)
    norm.update(x, sync=True)
    mean, var, n = pooled_moments(x)
    empty = EmpiricalNormalization(3)  # rank 1 contributes no samples
    empty.update(x if rank == 0 else x[:0], sync=True)
    adv = 1000.0 + 0.05 * torch.randn(400 + 100 * rank, 1, generator=g) + 0.05 * rank
    return {"x": x, "norm": {k: v.clone() for k, v in norm.state_dict().items()},
            "moments": (mean, var, n), "empty": {k: v.clone() for k, v in empty.state_dict().items()},
            "advantages": adv, "normalized": _normalize(adv)}


def _record_updates(normalizer: EmpiricalNormalization, inputs: list) -> None:
    """Keep a copy of every batch ``normalizer.update`` is fed (before it merges it)."""
    original = normalizer.update

    def update(x, sync=False):
        inputs.append(x.detach().reshape(-1, *normalizer._mean.shape[1:]).double().clone())
        original(x, sync=sync)

    normalizer.update = update


def ppo_run(rank: int, outdir: str) -> tuple[OnPolicyRunner, dict]:
    env = make_env(rank)
    # The runner initialises the Gloo process group from torchrun's environment and seeds seed + rank.
    runner = OnPolicyRunner(env, train_cfg(), log_dir=os.path.join(outdir, f"logs_rank{rank}"), device="cpu")
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    alg = runner.alg
    out: dict = {"torch_seed": torch.initial_seed(), "log_dir": runner.log_dir, "world_size": dist.get_world_size()}

    def snapshot() -> dict:
        mods = {"actor": alg.actor, "critic": alg.critic, "reward_normalizer": alg.reward_normalizer, "rnd": alg.rnd}
        return {name: {k: v.clone() for k, v in m.state_dict().items()} for name, m in mods.items()}

    out["init"] = snapshot()
    inputs = {"actor": [], "critic": [], "reward": [], "rnd_state": [], "rnd_reward": []}
    _record_updates(alg.actor.obs_normalizer, inputs["actor"])
    _record_updates(alg.critic.obs_normalizer, inputs["critic"])
    _record_updates(alg.reward_normalizer.emp_norm, inputs["reward"])
    _record_updates(alg.rnd.state_normalizer, inputs["rnd_state"])
    _record_updates(alg.rnd.reward_normalizer.emp_norm, inputs["rnd_reward"])

    local_kl, advantages, losses = [], [], []
    kl_fn, compute_returns, update = alg.actor.get_kl_divergence, alg.compute_returns, alg.update

    def get_kl_divergence(old, new):
        kl = kl_fn(old, new)
        local_kl.append(kl.mean().item())
        return kl

    def recording_compute_returns(obs):
        compute_returns(obs)
        advantages.append(alg.storage.advantages.clone())

    def recording_update():
        result = update()
        losses.append(dict(result))
        return result

    alg.actor.get_kl_divergence = get_kl_divergence
    alg.compute_returns = recording_compute_returns
    alg.update = recording_update
    runner.learn(ITERATIONS)
    runner.close()
    alg.actor.get_kl_divergence, alg.compute_returns, alg.update = kl_fn, compute_returns, update

    out.update(final=snapshot(), inputs=inputs, local_kl=local_kl, advantages=advantages, losses=losses,
               learning_rate=alg.learning_rate, optimizer_lrs=[group["lr"] for group in alg.optimizer.param_groups],
               iteration=runner.current_learning_iteration, num_mini_batches_per_update=2 * 2)
    return runner, out


def resume_check(rank: int, checkpoint: str) -> dict:
    """Every rank resumes from the distributed run's checkpoint, then from a copy without ``other_ranks`` (as an
    interrupt writes it): with its own state a rank continues exactly; without, it starts at random lengths."""
    out = {}
    stripped = f"{checkpoint}.rank{rank}_only0.pt"  # one copy per rank: no collective needed to share it
    ckpt = torch.load(checkpoint, weights_only=True)
    ckpt.pop("other_ranks", None)
    torch.save(ckpt, stripped)
    for name, path in (("own", checkpoint), ("fallback", stripped)):
        env = make_env(rank, seed_offset=100)
        runner = OnPolicyRunner(env, train_cfg(), log_dir=None, device="cpu")
        runner.load(path)
        env.record_next_step()
        runner.learn(1, init_at_random_ep_len=True)
        runner.close()
        out[name] = {"episode_length_buf": env.recorded, "max_episode_length": env.max_episode_length}
    return out


def distillation_run(rank: int, teacher_checkpoint: str) -> dict:
    env = make_task("pendulum", num_envs=NUM_ENVS, seed=BASE_SEED + 200 + rank)
    runner = DistillationRunner(env, distillation_cfg(), log_dir=None, device="cpu")
    runner.load(teacher_checkpoint)
    alg = runner.alg
    inputs: list = []
    _record_updates(alg.student.obs_normalizer, inputs)
    init = {k: v.clone() for k, v in alg.student.state_dict().items()}
    runner.learn(DISTILLATION_ITERATIONS)
    runner.close()
    return {"init": init, "final": {k: v.clone() for k, v in alg.student.state_dict().items()},
            "teacher": {k: v.clone() for k, v in alg.teacher.state_dict().items()}, "inputs": inputs}


def main(outdir: str) -> None:
    rank = int(os.environ["RANK"])
    assert multi_gpu_cfg_from_env() is not None, "not launched by torchrun with WORLD_SIZE > 1"
    try:
        result: dict = {"rank": rank, "num_envs": NUM_ENVS, "num_steps": NUM_STEPS, "iterations": ITERATIONS}
        runner, result["ppo"] = ppo_run(rank, outdir)  # initialises the process group
        result["grad_bucket"] = grad_bucket_check(rank)
        result["pooled"] = pooled_statistics_check(rank)

        # rank 0's last checkpoint, shared through the file system
        name = [f"model_{runner.current_learning_iteration}.pt" if rank == 0 else None]
        dist.broadcast_object_list(name, src=0)
        checkpoint = os.path.join(outdir, "logs_rank0", name[0])
        result["checkpoint"] = checkpoint
        result["resume"] = resume_check(rank, checkpoint)
        result["distillation"] = distillation_run(rank, checkpoint)
        torch.save(result, os.path.join(outdir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
