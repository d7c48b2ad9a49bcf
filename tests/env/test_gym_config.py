"""``task=gym``: the Hydra task file composes and its task section builds a GymnasiumVecEnv through the registry."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

pytest.importorskip("gymnasium", minversion="1.1")

from hydra import compose, initialize_config_dir

from rlcore.env import GymnasiumVecEnv
from rlcore.env.task import make_task

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "conf")


def compose_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        return compose(config_name="config", overrides=overrides)


def test_task_gym_composes():
    cfg = compose_cfg(["task=gym", "env_id=Pendulum-v1", "num_envs=4"])
    assert cfg.task.name == "gym" and cfg.task.num_envs == 4
    env_cfg = OmegaConf.to_container(cfg.task.env, resolve=True)
    assert env_cfg["env_id"] == "Pendulum-v1" and env_cfg["vectorization_mode"] == "sync"
    assert OmegaConf.to_container(cfg.task.obs_groups) == {"actor": ["policy"], "critic": ["policy"]}
    assert cfg.runner.num_steps_per_env == 32 and cfg.algorithm.gamma == 0.98
    other = compose_cfg(["task=gym", "env_id=HalfCheetah-v5", "num_envs=2"])
    assert other.task.env.env_id == "HalfCheetah-v5" and other.task.num_envs == 2


def test_task_gym_builds_through_the_registry():
    cfg = compose_cfg(["task=gym", "env_id=Pendulum-v1", "num_envs=4"])
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True)
    env = make_task(cfg.task.name, num_envs=int(cfg.task.num_envs), device="cpu", seed=0, **env_kwargs)
    assert isinstance(env, GymnasiumVecEnv)
    assert (env.num_envs, env.num_actions, env.max_episode_length) == (4, 1, 200)
    assert env.get_observations()["policy"].shape == (4, 3)
    env.close()
