"""Two CPU processes under torchrun (Gloo): PPO, RND and Distillation stay in lock-step across ranks.

One module-scoped torchrun launch of ``ddp_worker.py`` (2 ranks, each with its own env seed, rank 1's rewards
5x rank 0's) produces ``rank<r>.pt`` files; the tests below compare them across ranks and against statistics
of the concatenated data of both ranks (computed here in float64):

- gradient all-reduce in tiny buckets gives every rank the mean of both ranks' gradients;
- models (parameters and normaliser buffers, RND included) are identical across ranks, and differ from the start;
- observation, reward (PPO's and RND's) and student normalisers hold the statistics of both ranks' data;
- pooled statistics do not cancel for a feature of mean 1000 and std 0.05;
- advantages are normalised over both ranks: each rank's own mean is not 0, the pooled mean is 0, std 1;
- the logged KL is the mean of both ranks' KLs, and the adaptive learning rate follows it on both ranks;
- a distributed resume starts the ranks without restored env state at random episode lengths;
- only rank 0 writes a log dir and checkpoints; seeds are seed + rank.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

WORKER = Path(__file__).with_name("ddp_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
WORLD_SIZE = 2
TIMEOUT_S = 180

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                                   reason="torch.distributed with the Gloo backend is not available")]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    outdir = tmp_path_factory.mktemp("ddp")
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):  # never inherit a launcher's
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={WORLD_SIZE}",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}", str(WORKER), str(outdir)]
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun did not finish within {TIMEOUT_S} s:\n{e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    out = {r: torch.load(outdir / f"rank{r}.pt", weights_only=False) for r in range(WORLD_SIZE)}
    out["outdir"] = outdir
    return out


def _assert_state_equal(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if k.endswith("disc_return"):  # running discounted return: per env, hence per rank
            continue
        assert torch.equal(a[k], b[k]), f"{what}.{k} differs across ranks"


def _concat_stats(batches: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mean and population variance (float64) of all samples of ``batches`` ``[B_i, *shape]`` together."""
    x = torch.cat([b.double() for b in batches])
    return x.mean(0), x.var(0, unbiased=False), x.shape[0]


def _assert_pooled(state: dict, prefix: str, batches: list[torch.Tensor], what: str) -> None:
    """The normaliser ``state`` (keys ``prefix._mean`` ...) holds the statistics of ``batches`` together."""
    mean, var, n = _concat_stats(batches)
    assert int(state[f"{prefix}count"]) == n, f"{what}: {int(state[prefix + 'count'])} samples, both ranks gave {n}"
    torch.testing.assert_close(state[f"{prefix}_mean"].squeeze(0).double(), mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state[f"{prefix}_var"].squeeze(0).double(), var, rtol=1e-4, atol=1e-6)


def _ranks(results: dict, *path: str) -> list:
    out = []
    for r in range(WORLD_SIZE):
        value = results[r]
        for key in path:
            value = value[key]
        out.append(value)
    return out


# ---------------------------------------------------------------------------- gradient all-reduce
def test_bucketed_grad_all_reduce_is_the_mean(results):
    r0, r1 = results[0]["grad_bucket"], results[1]["grad_bucket"]
    assert len(r0["before"]) == len(r1["before"]) == 8
    n_reduced = 0
    for b0, b1, a0, a1 in zip(r0["before"], r1["before"], r0["after"], r1["after"]):
        if b0 is None:  # a parameter without a gradient stays without one
            assert b1 is None and a0 is None and a1 is None
            continue
        assert not torch.equal(b0, b1)  # the ranks really had different gradients
        torch.testing.assert_close(a0, (b0 + b1) / 2, rtol=0, atol=1e-6)
        assert torch.equal(a0, a1)
        assert a0.shape == b0.shape
        n_reduced += 1
    assert n_reduced == 7


# ---------------------------------------------------------------------------- pooled statistics, large mean
def test_pooled_normalizer_does_not_cancel_a_small_spread_around_a_large_mean(results):
    xs = _ranks(results, "pooled", "x")
    mean, var, n = _concat_stats(xs)
    assert 0.04 < var.sqrt().min() < 0.06  # the data: mean ~1000, std ~0.05
    states = _ranks(results, "pooled", "norm")
    _assert_state_equal(states[0], states[1], "pooled normaliser")
    _assert_pooled(states[0], "", xs, "pooled normaliser")
    for r in range(WORLD_SIZE):  # the float64 moments themselves, before any float32 storage
        m, v, count = results[r]["pooled"]["moments"]
        assert count == n
        torch.testing.assert_close(m, mean, rtol=1e-12, atol=0)
        torch.testing.assert_close(v, var, rtol=1e-8, atol=0)


def test_pooled_normalizer_with_an_empty_rank(results):
    x0 = results[0]["pooled"]["x"]
    for r in range(WORLD_SIZE):  # rank 1 fed no samples: both ranks hold rank 0's statistics
        _assert_pooled(results[r]["pooled"]["empty"], "", [x0], f"rank {r} normaliser with an empty rank")


def test_pooled_advantage_normalization_with_a_large_mean(results):
    raw = _ranks(results, "pooled", "advantages")
    normalized = _ranks(results, "pooled", "normalized")
    both = torch.cat([y.double() for y in normalized])
    assert abs(both.mean().item()) < 1e-4 and both.std().item() == pytest.approx(1.0, abs=1e-3)
    for y in normalized:  # the ranks' data are offset by one std: each rank alone is far from mean 0
        assert abs(y.double().mean().item()) > 0.3
    expected = (torch.cat(raw).double() - torch.cat(raw).double().mean()) / torch.cat(raw).double().std()
    torch.testing.assert_close(both, expected, rtol=0, atol=2e-3)


# ---------------------------------------------------------------------------- PPO (+ RND) in lock-step
def test_ranks_and_seeds(results):
    for r in range(WORLD_SIZE):
        assert results[r]["rank"] == r and results[r]["ppo"]["world_size"] == WORLD_SIZE
    assert results[0]["ppo"]["iteration"] == results[1]["ppo"]["iteration"]
    assert results[1]["ppo"]["torch_seed"] == results[0]["ppo"]["torch_seed"] + 1  # the runner seeds seed + rank


@pytest.mark.parametrize("phase", ["init", "final"])  # init: the start-up broadcast; final: after the updates
def test_models_identical_across_ranks(results, phase):
    for model in ("actor", "critic", "reward_normalizer", "rnd"):
        _assert_state_equal(results[0]["ppo"][phase][model], results[1]["ppo"][phase][model], f"{phase}.{model}")


def test_models_learned(results):
    init, final = results[0]["ppo"]["init"], results[0]["ppo"]["final"]
    for model in ("actor", "critic"):
        params = [k for k in init[model] if "obs_normalizer" not in k]
        assert params
        changed = [k for k in params if not torch.equal(init[model][k], final[model][k])]
        assert len(changed) == len(params), f"{model}: unchanged parameters {set(params) - set(changed)}"
    predictor = [k for k in init["rnd"] if k.startswith("predictor.")]
    assert predictor and all(not torch.equal(init["rnd"][k], final["rnd"][k]) for k in predictor)
    assert all(torch.equal(init["rnd"][k], final["rnd"][k]) for k in init["rnd"] if k.startswith("target."))


@pytest.mark.parametrize(("model", "prefix", "inputs"), [
    ("actor", "obs_normalizer.", "actor"),
    ("critic", "obs_normalizer.", "critic"),
    ("rnd", "state_normalizer.", "rnd_state"),
])
def test_observation_normalizers_pooled_over_ranks(results, model, prefix, inputs):
    n, t, its = results[0]["num_envs"], results[0]["num_steps"], results[0]["iterations"]
    batches = _ranks(results, "ppo", "inputs", inputs)
    per_rank = n * (t + 1) + its * n * t  # warm-up rollout (t steps + the first observation), then the rollouts
    for r in range(WORLD_SIZE):
        assert sum(b.shape[0] for b in batches[r]) == per_rank
    state = results[0]["ppo"]["final"][model]
    _assert_pooled(state, prefix, batches[0] + batches[1], f"{model} {prefix}")
    own_mean = _concat_stats(batches[0])[0]  # ... and not those of rank 0 alone (the ranks' env seeds differ)
    assert not torch.allclose(state[f"{prefix}_mean"].squeeze(0).double(), own_mean, rtol=0, atol=1e-6)


@pytest.mark.parametrize(("model", "prefix", "inputs"), [
    ("reward_normalizer", "emp_norm.", "reward"),
    ("rnd", "reward_normalizer.emp_norm.", "rnd_reward"),
])
def test_reward_normalizers_pooled_over_ranks(results, model, prefix, inputs):
    """PPO's extrinsic and RND's intrinsic reward normalisers: every step's returns of both ranks together."""
    n, t, its = results[0]["num_envs"], results[0]["num_steps"], results[0]["iterations"]
    batches = _ranks(results, "ppo", "inputs", inputs)
    for r in range(WORLD_SIZE):
        assert len(batches[r]) == its * t and all(b.shape[0] == n for b in batches[r])  # one batch per env step
    for r in range(WORLD_SIZE):
        _assert_pooled(results[r]["ppo"]["final"][model], prefix, batches[0] + batches[1], f"rank {r} {model}")
    if inputs == "reward":  # rank 1's rewards are 5x rank 0's: each rank alone would scale differently
        std0, std1 = (_concat_stats(b)[1].sqrt().item() for b in batches)
        assert std1 > 3 * std0


def test_advantages_normalized_over_both_ranks(results):
    advantages = _ranks(results, "ppo", "advantages")
    assert len(advantages[0]) == results[0]["iterations"]
    for a0, a1 in zip(*advantages):
        both = torch.cat([a0.reshape(-1), a1.reshape(-1)]).double()
        assert abs(both.mean().item()) < 1e-5
        assert both.std().item() == pytest.approx(1.0, abs=1e-4)
        for a in (a0, a1):  # each rank's own advantages are not centred: the statistics were pooled
            assert abs(a.double().mean().item()) > 0.05


def test_kl_is_the_mean_over_ranks_and_drives_the_learning_rate(results):
    local = [torch.tensor(kl, dtype=torch.float64) for kl in _ranks(results, "ppo", "local_kl")]
    per_update = results[0]["ppo"]["num_mini_batches_per_update"]
    its = results[0]["iterations"]
    assert local[0].numel() == local[1].numel() == its * per_update
    assert not torch.allclose(local[0], local[1])  # the ranks' own KLs differ
    kl = (local[0] + local[1]) / 2
    for r in range(WORLD_SIZE):  # the logged KL is the global one, the same on every rank
        logged = [losses["kl"] for losses in results[r]["ppo"]["losses"]]
        torch.testing.assert_close(torch.tensor(logged, dtype=torch.float64), kl.view(its, per_update).mean(1),
                                   rtol=1e-5, atol=1e-9)
    lr = 1e-3  # the adaptive rule applied to the global KL of every mini-batch
    for value in kl.tolist():
        if value > 2 * 0.01:
            lr = max(1e-5, lr / 1.5)
        elif 0.0 < value < 0.5 * 0.01:
            lr = min(1e-2, lr * 1.5)
    lr0, lr1 = results[0]["ppo"]["learning_rate"], results[1]["ppo"]["learning_rate"]
    assert lr0 == lr1 and lr0 == pytest.approx(lr, rel=1e-6)
    assert results[0]["ppo"]["optimizer_lrs"] == results[1]["ppo"]["optimizer_lrs"] == [lr0]


def test_only_rank0_writes(results):
    outdir = results["outdir"]
    assert results[0]["ppo"]["log_dir"] == str(outdir / "logs_rank0")
    assert results[1]["ppo"]["log_dir"] is None
    assert Path(results[0]["checkpoint"]).is_file()
    assert Path(results[0]["checkpoint"]).name == f"model_{results[0]['ppo']['iteration']}.pt"
    assert not (outdir / "logs_rank1").exists()


# ---------------------------------------------------------------------------- distributed resume
def test_every_rank_resumes_its_own_env_state(results):
    """Before issue 40 only rank 0 restored its env; rank 1 started over (fresh episodes, curricula at 0)."""
    ckpt = torch.load(results[0]["checkpoint"], weights_only=True)
    assert len(ckpt["other_ranks"]) == 1 and ckpt["world_size"] == 2
    saved = [ckpt["env_state"]["episode_length_buf"], ckpt["other_ranks"][0]["env_state"]["episode_length_buf"]]
    # A fresh rank would start at random lengths (init_at_random_ep_len); a resumed one at its saved lengths.
    for rank in (0, 1):
        assert torch.equal(results[rank]["resume"]["own"]["episode_length_buf"], saved[rank]), f"rank {rank}"


def test_a_rank_without_state_in_the_checkpoint_starts_at_random_lengths(results):
    saved = torch.load(results[0]["checkpoint"], weights_only=True)["env_state"]["episode_length_buf"]
    assert torch.equal(results[0]["resume"]["fallback"]["episode_length_buf"], saved)  # rank 0 continues exactly
    resumed = results[1]["resume"]["fallback"]
    lengths = resumed["episode_length_buf"]  # rank 1's env is fresh: spread its time-outs
    assert lengths.unique().numel() > 10
    assert 0 <= int(lengths.min()) and int(lengths.max()) < resumed["max_episode_length"]


# ---------------------------------------------------------------------------- distillation
def test_distillation_in_lock_step(results):
    d0, d1 = results[0]["distillation"], results[1]["distillation"]
    for phase in ("init", "final", "teacher"):
        _assert_state_equal(d0[phase], d1[phase], f"distillation.{phase}")
    params = [k for k in d0["init"] if "obs_normalizer" not in k and not k.startswith("distribution.")]
    assert params and all(not torch.equal(d0["init"][k], d0["final"][k]) for k in params)
    actor = results[0]["ppo"]["final"]["actor"]  # the teacher is the PPO actor of the checkpoint
    for k, v in d0["teacher"].items():
        assert torch.equal(v, actor[k]), f"teacher.{k} is not the checkpoint's actor.{k}"
    _assert_pooled(d0["final"], "obs_normalizer.", d0["inputs"] + d1["inputs"], "student normaliser")
