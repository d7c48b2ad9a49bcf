"""``bench/learner_step_ab.py --tiny``: both steps run on the same mini-batches and the last line's ratio is theirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the bench script in a subprocess

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^learner_step_ab: case=mlp rlcore_step=(\S+) floor_step=(\S+) ratio=(\S+)$")


def test_tiny_run_prints_both_step_times_and_their_ratio():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "learner_step_ab.py"), "--tiny", "--threads", "1",
                           "--rounds", "2"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    match = LAST.match(lines[-1])
    assert match, lines[-1]
    a, b, r = (float(x) for x in match.groups())
    assert a > 0 and b > 0 and r == pytest.approx(a / b, rel=2e-3)
    assert "16 envs, mini-batch 96, 8 steps each, threads 1" in lines[-2]  # 16 envs x 24 steps / 4, 2 rounds x 4
