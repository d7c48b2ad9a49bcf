"""Helpers shared by the runner tests: tiny train configs on the classic tasks."""

from __future__ import annotations

import copy

from rlcore.env.task import make_task

NUM_ENVS = 64
GAUSSIAN = {"class_name": "GaussianDistribution", "init_std": 1.0}


def base_cfg(**runner_keys) -> dict:
    """A tiny PPO train config (16-unit MLPs, 8-step rollouts, 2x2 mini-batches) with runner keys overridden."""
    cfg = {
        "seed": 3,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "logger": "none",
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True,
                  "distribution_cfg": dict(GAUSSIAN)},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2, "learning_rate": 1e-3,
                      "gamma": 0.95, "lam": 0.95, "schedule": "adaptive", "desired_kl": 0.01},
    }
    cfg.update(copy.deepcopy(runner_keys))
    return cfg


def make_env(task: str = "pendulum", num_envs: int = NUM_ENVS, seed: int = 0, **kwargs):
    return make_task(task, num_envs=num_envs, seed=seed, **kwargs)
