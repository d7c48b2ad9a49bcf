"""Fixtures of the report tests: one real short pendulum run for the session, and synthetic runs."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: 5 iterations of a tiny pendulum: a few seconds; TensorBoard logs (the default logger). 10-step episodes, so that
#: full episodes (those the return curve counts) end in every iteration.
TINY_TRAIN = ["task=pendulum", "runner.max_iterations=5", "task.num_envs=32", "task.env.max_episode_length=10",
              "runner.num_steps_per_env=16",
              "model.actor.hidden_dims=[16,16]", "model.critic.hidden_dims=[16,16]", "algorithm.num_mini_batches=2",
              "algorithm.num_learning_epochs=2", "runner.save_interval=100"]


def run_module(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m <module> args...`` in the repo root with one thread; returns the finished process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    for key in ("RLCORE_DEBUG", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="session")
def pendulum_run(tmp_path_factory) -> Path:
    """A real run directory of ``python -m rlcore.train task=pendulum`` (5 iterations)."""
    run_dir = tmp_path_factory.mktemp("report") / "pendulum"
    proc = run_module("rlcore.train", *TINY_TRAIN, f"hydra.run.dir={run_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def write_run(path: Path, curves: dict[str, list[tuple[int, float]]], config: dict | None = None) -> Path:
    """A run directory with TensorBoard event files holding ``curves`` and a ``config.yaml`` (when given)."""
    import yaml
    from torch.utils.tensorboard import SummaryWriter

    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (path / "config.yaml").write_text(yaml.safe_dump(config))
    writer = SummaryWriter(str(path))
    for tag, points in curves.items():
        for it, value in points:
            writer.add_scalar(tag, value, it)
    writer.close()
    return path


def seed_curves(seed: int, n: int = 60, lr: float = 1e-3) -> dict[str, list[tuple[int, float]]]:
    """Smooth curves that differ by seed (offset ``seed``) and learning rate."""
    return {
        "Episode/mean_return": [(it, 10 * (1 - math.exp(-it / 20)) + seed + 1000 * lr) for it in range(n)],
        "Loss/value": [(it, 0.5 + 0.01 * seed) for it in range(n)],
        "Policy/mean_std": [(it, 1.0 - it / (2 * n)) for it in range(n)],
    }


def seed_config(seed: int, lr: float = 1e-3) -> dict:
    return {"seed": seed, "task": {"name": "pendulum"}, "algorithm": {"learning_rate": lr, "schedule": "fixed"},
            "runner": {"max_iterations": 60}}
