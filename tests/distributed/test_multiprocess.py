"""Two CPU processes under torchrun (Gloo): PPO stays in lock-step across ranks.

One module-scoped torchrun launch of ``ddp_worker.py`` (2 ranks, 3 PPO iterations on the pendulum, each
rank with its own env seed) produces ``rank<r>.pt`` files; the tests below compare them:

- gradient all-reduce in tiny buckets gives every rank the mean of both ranks' gradients;
- models (parameters and normaliser buffers) are identical across ranks, and differ from the start;
- normaliser statistics were pooled over both ranks (count = both ranks' samples, mean/var = pooled);
- the adaptive learning rate agrees; only rank 0 writes a log dir and checkpoints; seeds are seed + rank.
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
TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with the Gloo backend is not available")


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
        assert torch.equal(a[k], b[k]), f"{what}.{k} differs across ranks"


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


# ---------------------------------------------------------------------------- PPO in lock-step
def test_ranks_and_seeds(results):
    for r in range(WORLD_SIZE):
        assert results[r]["rank"] == r and results[r]["world_size"] == WORLD_SIZE
        assert results[r]["iteration"] == results[r]["iterations"]
    assert results[1]["torch_seed"] == results[0]["torch_seed"] + 1  # the runner seeds seed + rank


def test_models_identical_across_ranks(results):
    for phase in ("init", "final"):  # init: the start-up broadcast; final: after 3 updates
        for model in ("actor", "critic"):
            _assert_state_equal(results[0][phase][model], results[1][phase][model], f"{phase}.{model}")


def test_models_learned(results):
    for model in ("actor", "critic"):
        init, final = results[0]["init"][model], results[0]["final"][model]
        params = [k for k in init if "obs_normalizer" not in k]
        assert params
        changed = [k for k in params if not torch.equal(init[k], final[k])]
        assert len(changed) == len(params), f"{model}: unchanged parameters {set(params) - set(changed)}"
        assert not torch.equal(init["obs_normalizer._mean"], final["obs_normalizer._mean"])


def test_normalizer_statistics_pooled_over_ranks(results):
    n, t, its = results[0]["num_envs"], results[0]["num_steps"], results[0]["iterations"]
    # warm-up rollout (t steps + the initial observation) then one rollout per iteration, on every rank
    per_rank = n * (t + 1) + its * n * t
    for model, group in (("actor", "policy"), ("critic", "critic")):
        for r in range(WORLD_SIZE):
            assert results[r]["local_obs_moments"][group]["n"] == per_rank
        state = results[0]["final"][model]
        count = int(state["obs_normalizer.count"])
        assert count == WORLD_SIZE * per_rank, f"{model} normaliser saw {count} samples, both ranks {WORLD_SIZE * per_rank}"
        # the merged statistics are those of both ranks' observations together
        moments = [results[r]["local_obs_moments"][group] for r in range(WORLD_SIZE)]
        total = sum(m["n"] for m in moments)
        mean = sum(m["sum"] for m in moments) / total
        var = sum(m["sumsq"] for m in moments) / total - mean.square()
        torch.testing.assert_close(state["obs_normalizer._mean"].squeeze(0).double(), mean, rtol=0, atol=1e-5)
        torch.testing.assert_close(state["obs_normalizer._var"].squeeze(0).double(), var, rtol=1e-4, atol=1e-5)
        # ... and not those of rank 0 alone (the ranks' env seeds differ)
        local_mean = moments[0]["sum"] / moments[0]["n"]
        assert not torch.allclose(state["obs_normalizer._mean"].squeeze(0).double(), local_mean, rtol=0, atol=1e-6)


def test_learning_rate_agrees(results):
    lr0, lr1 = results[0]["learning_rate"], results[1]["learning_rate"]
    assert lr0 == lr1
    assert results[0]["optimizer_lrs"] == results[1]["optimizer_lrs"] == [lr0]


def test_only_rank0_writes(results):
    outdir = results["outdir"]
    assert results[0]["log_dir"] == str(outdir / "logs_rank0")
    assert results[1]["log_dir"] is None
    assert (outdir / "logs_rank0" / f"model_{results[0]['iterations']}.pt").is_file()
    assert not (outdir / "logs_rank1").exists()
