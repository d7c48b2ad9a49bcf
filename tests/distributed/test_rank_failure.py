"""An exception in rank 0's evaluation ends every rank at once (issue 40).

Before the fix the other ranks waited at the ``stop_at`` broadcast (or the next gradient all-reduce) until Gloo's
timeout (30 minutes). Now rank 0 announces its failure at that collective: rank 1 raises naming rank 0, and the
whole torchrun job ends well within 60 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

WORKER = Path(__file__).with_name("eval_failure_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                                   reason="torch.distributed with the Gloo backend is not available")]


def test_rank_0_evaluation_error_ends_every_rank(tmp_path):
    from test_multiprocess import _free_port

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                             "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", str(WORKER), str(tmp_path)]
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a rank was still waiting for rank 0 after 60 s")
    assert proc.returncode != 0
    assert (tmp_path / "rank0.txt").read_text() == "RuntimeError: injected evaluation bug"
    assert "rank 0 failed" in (tmp_path / "rank1.txt").read_text()
