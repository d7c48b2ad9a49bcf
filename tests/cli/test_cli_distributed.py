"""``torchrun --nproc_per_node=2 -m rlcore.train ...`` on CPU (Gloo): one run directory, written by rank 0."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from cli_helpers import TIMEOUT_S, TINY, cli_env, free_port

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                                   reason="torch.distributed with the Gloo backend is not available")]


def test_torchrun_two_processes(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", "-m", "rlcore.train", "task=pendulum", *TINY]
    # no hydra.run.dir: rank 0 picks logs/<task>/<time> and the other rank must follow it
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun did not finish within {TIMEOUT_S} s:\n{e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    runs = list((tmp_path / "logs" / "pendulum").iterdir())
    assert len(runs) == 1, runs
    run = runs[0]
    checkpoints = sorted(run.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    assert (run / ".hydra" / "config.yaml").is_file() and len(checkpoints) >= 2
    ckpt = torch.load(checkpoints[-1], weights_only=True)
    assert ckpt["train_cfg"]["multi_gpu"]["world_size"] == 2
    assert proc.stdout.count("run directory:") == 1  # only rank 0 reports
    # Both ranks' data reached the (synchronised) observation statistics: per rank 8 envs x (8 warm-up steps + the
    # first observation) and 2 rollouts of 8 x 8 steps; a run in which the ranks did not cooperate counts half.
    per_rank = 8 * (8 + 1) + 2 * 8 * 8
    for part in ("actor_state_dict", "critic_state_dict"):
        assert int(ckpt[part]["obs_normalizer.count"]) == 2 * per_rank
