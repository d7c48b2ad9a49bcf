"""``bench/go2_update.py``: the floor has the run's network sizes and takes as many optimiser steps as PPO's update,
on the rollout in the storage; the last line's ratio is the two medians'."""

from __future__ import annotations

import contextlib
import io

import go2_update
import pytest
import torch
from time_to_walk import go2_training

from rlcore.runners import OnPolicyRunner

pytestmark = pytest.mark.slow  # trains Go2 iterations


def test_floor_has_the_runs_sizes_and_takes_the_same_steps():
    torch.set_num_threads(1)
    _, train_cfg, _, env = go2_training(1, ["task.num_envs=16"], threads=1)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    alg = runner.alg
    captured = {}

    def capture() -> dict:
        floor = go2_update.Floor(alg)
        captured["data"], captured["floor"] = floor.inputs(), floor
        floor.update(captured["data"])
        return alg.update.__wrapped__()

    capture.__wrapped__ = alg.update
    alg.update = capture
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn(1, init_at_random_ep_len=True)
    floor, data = captured["floor"], captured["data"]
    rows = 16 * train_cfg["num_steps_per_env"]
    assert data["x_a"].shape == (rows, alg.actor.obs_dim) and data["target"].shape == (rows, 3)
    assert data["x_c"].shape == (rows, alg.critic.obs_dim) and data["actions"].shape == (rows, 12)
    ours = [p.shape for m in (floor.head, floor.estimator, floor.critic) for p in m.parameters()]
    theirs = [p.shape for m in (alg.actor.mlp, alg.actor.estimator, alg.critic.mlp) for p in m.parameters()]
    assert ours == theirs
    steps = {int(s["step"]) for s in floor.optimizer.state.values()}
    assert steps == {alg.num_learning_epochs * alg.num_mini_batches}


def test_tiny_run_reports_both_medians_and_their_ratio(capsys):
    out = go2_update.main(["--tiny", "--threads", "1", "--iterations", "2", "--warmup", "1"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"go2_update: update={out['update']:.4g} floor={out['floor']:.4g} ratio={out['ratio']:.3f}"
    assert out["ratio"] == pytest.approx(out["update"] / out["floor"])
