"""``bench/time_to_walk_vs_rsl_rl.py``: the rsl_rl config it derives, and its ``--tiny`` run's last line."""

from __future__ import annotations

import inspect
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rsl_rl")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import time_to_walk_vs_rsl_rl as bench  # noqa: E402

LAST = re.compile(r"^time_to_walk_vs_rsl_rl: rlcore_minutes=(\S+) rsl_rl_minutes=(\S+) ratio=(\S+) "
                  r"rlcore_steps=(\S+) rsl_rl_steps=(\S+)$")


def test_rsl_rl_config_keeps_the_shared_hyperparameters_and_lists_the_rest():
    from rsl_rl.algorithms import PPO

    cfg = {
        "seed": 3, "num_steps_per_env": 24, "save_interval": 50, "obs_groups": {"actor": ["policy"]},
        "normalizer_warmup_steps": None, "stop_at": None,
        "algorithm": {"class_name": "PPO", "learning_rate": 5e-4, "entropy_coef": 0.005, "reshuffle_each_epoch": True},
        "actor": {"class_name": "MLPModel", "hidden_dims": [128, 128], "init_gains": None,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.5, "std_type": "log"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [128, 128], "obs_normalization": True},
    }
    out, dropped = bench.rsl_rl_train_cfg(cfg)
    assert out["algorithm"] == {"class_name": "PPO", "learning_rate": 5e-4, "entropy_coef": 0.005}
    assert set(out["algorithm"]) - {"class_name"} <= set(inspect.signature(PPO.__init__).parameters)
    assert out["actor"] == {"class_name": "MLPModel", "hidden_dims": [128, 128],
                            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.5,
                                                 "std_type": "log"}}
    assert out["critic"]["obs_normalization"] is True
    assert dropped == {"algorithm.reshuffle_each_epoch": True, "actor.init_gains": None}
    assert {k: out[k] for k in ("seed", "num_steps_per_env", "save_interval")} == {
        "seed": 3, "num_steps_per_env": 24, "save_interval": 50}
    assert "normalizer_warmup_steps" not in out and "stop_at" not in out


@pytest.mark.slow
def test_tiny_run_reports_both_libraries():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "time_to_walk_vs_rsl_rl.py"), "--tiny", "--threads",
                           "1", "--seeds", "1"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    match = LAST.match(proc.stdout.strip().splitlines()[-1])
    assert match, proc.stdout[-2000:]
    a, b, ratio, s, t = (float(x) for x in match.groups())
    for value in (a, b, ratio, s, t):
        assert math.isfinite(value) and value > 0
    assert ratio == pytest.approx(a / b, rel=2e-3)  # all three are printed to 4 significant figures
    # --tiny: 16 envs x 24 steps, one iteration, then the (always met) threshold. rsl_rl steps the env exactly
    # that often; rlcore's count also holds its normaliser warm-up rollout.
    assert t == 16 * 24
    assert s >= t and s % 16 == 0
