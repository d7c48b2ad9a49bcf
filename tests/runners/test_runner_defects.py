"""Regression tests of runner defects found in review (issue 11): each fails on the code before its fix.

- a resume without restored env state (adapters without ``state_dict``) lost the random initial episode lengths,
  so every env timed out on the same step; a running env is never re-randomised;
- ``DistillationRunner.load(..., load_optimizer=False)`` loaded nothing;
- a teacher whose observation groups are the PPO actor's in another order (equal sizes) loaded silently.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from runner_helpers import GAUSSIAN, base_cfg, make_env

from rlcore.env.legged_gym import LeggedGymVecEnv
from rlcore.runners import DistillationRunner, OnPolicyRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))
from legged_gym_style_env import LeggedGymStyleEnv, make_cfg


class FirstStepLengths:
    """Wraps ``env.step`` to keep the episode lengths the env holds when ``learn`` first steps it."""

    def __init__(self, env) -> None:
        self.lengths = None
        step = env.step

        def recording_step(actions):
            if self.lengths is None:
                self.lengths = env.episode_length_buf.clone()
            return step(actions)

        env.step = recording_step


def _last_checkpoint(runner: OnPolicyRunner) -> str:
    return os.path.join(runner.log_dir, f"model_{runner.current_learning_iteration}.pt")


def _legged_gym_env() -> LeggedGymVecEnv:
    return LeggedGymVecEnv(LeggedGymStyleEnv(make_cfg(num_envs=64, episode_length_s=4.0)))  # 40 steps


def test_resume_without_env_state_starts_at_random_episode_lengths(tmp_path):
    cfg = base_cfg(obs_groups={"actor": ["policy"], "critic": ["critic"]})
    runner = OnPolicyRunner(_legged_gym_env(), cfg, log_dir=str(tmp_path))
    runner.learn(1, init_at_random_ep_len=True)
    path = _last_checkpoint(runner)
    assert "env_state" not in torch.load(path, weights_only=True)  # the adapter has no state_dict

    env = _legged_gym_env()
    resumed = OnPolicyRunner(env, cfg, log_dir=None)
    resumed.load(path)
    assert not resumed.fresh_start  # a full resume ...
    record = FirstStepLengths(env)
    resumed.learn(1, init_at_random_ep_len=True)
    assert record.lengths.unique().numel() > 10  # ... of a fresh env: time-outs spread over an episode
    assert int(record.lengths.max()) < env.max_episode_length

    # the same runner continuing: its episodes are under way and must not be re-drawn
    record = FirstStepLengths(env)
    running = env.episode_length_buf.clone()
    resumed.learn(1, init_at_random_ep_len=True)
    assert torch.equal(record.lengths, running)


def test_resume_with_env_state_keeps_the_saved_episode_lengths(tmp_path):
    runner = OnPolicyRunner(make_env(), base_cfg(), log_dir=str(tmp_path))
    runner.learn(1, init_at_random_ep_len=True)
    saved = runner.env.episode_length_buf.clone()
    env = make_env(seed=5)
    resumed = OnPolicyRunner(env, base_cfg(), log_dir=None)
    resumed.load(_last_checkpoint(runner))
    record = FirstStepLengths(env)
    resumed.learn(1, init_at_random_ep_len=True)
    assert saved.unique().numel() > 10 and torch.equal(record.lengths, saved)


# ---------------------------------------------------------------------------- distillation loading
def _teacher_checkpoint(tmp_path, actor_groups: list[str]) -> str:
    cfg = base_cfg(obs_groups={"actor": actor_groups, "critic": ["critic"]})
    runner = OnPolicyRunner(make_env("cartpole", num_envs=8), cfg, log_dir=str(tmp_path / "ppo"))
    runner.learn(1)
    return _last_checkpoint(runner)


def _distillation_cfg(teacher_groups: list[str]) -> dict:
    cfg = base_cfg(obs_groups={"student": ["policy"], "teacher": teacher_groups})
    del cfg["actor"], cfg["critic"]
    cfg["student"] = {"class_name": "MLPModel", "hidden_dims": [16], "distribution_cfg": dict(GAUSSIAN)}
    cfg["teacher"] = {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True}
    cfg["algorithm"] = {"class_name": "Distillation"}
    return cfg


def test_teacher_obs_groups_must_match_the_actor_groups_by_name(tmp_path):
    """Cart-pole's ``policy`` and ``critic`` groups are both ``[N, 4]``: only the names tell a swap."""
    path = _teacher_checkpoint(tmp_path, ["policy", "critic"])
    assert torch.load(path, weights_only=True)["obs_groups"]["actor"] == ["policy", "critic"]
    runner = DistillationRunner(make_env("cartpole", num_envs=8), _distillation_cfg(["critic", "policy"]))
    with pytest.raises(ValueError, match=r"its PPO actor was trained on observation groups \['policy', 'critic'\], "
                                         r"but obs_groups\['teacher'\] is \['critic', 'policy'\]; set"):
        runner.load(path)
    assert not runner.alg.teacher_loaded
    runner = DistillationRunner(make_env("cartpole", num_envs=8), _distillation_cfg(["policy", "critic"]))
    runner.load(path)
    assert runner.alg.teacher_loaded


def test_teacher_from_a_checkpoint_without_group_names_loads(tmp_path):
    """rsl_rl's checkpoints do not store group names: nothing to compare, the teacher loads."""
    path = _teacher_checkpoint(tmp_path, ["policy", "critic"])
    ckpt = torch.load(path, weights_only=True)
    plain = {k: v for k, v in ckpt.items() if k not in ("obs_groups", "train_cfg")}
    torch.save(plain, tmp_path / "rsl_rl_style.pt")
    runner = DistillationRunner(make_env("cartpole", num_envs=8), _distillation_cfg(["critic", "policy"]))
    runner.load(str(tmp_path / "rsl_rl_style.pt"))
    assert runner.alg.teacher_loaded


def test_distillation_load_without_optimizer_loads_the_models(tmp_path):
    teacher = _teacher_checkpoint(tmp_path, ["policy", "critic"])
    cfg = _distillation_cfg(["policy", "critic"])
    runner = DistillationRunner(make_env("cartpole", num_envs=8), cfg, log_dir=str(tmp_path / "distill"))
    runner.load(teacher)
    runner.learn(1)
    path = _last_checkpoint(runner)

    other = DistillationRunner(make_env("cartpole", num_envs=8), cfg, log_dir=None)
    optimizer_before = other.alg.optimizer.state_dict()
    other.load(path, load_optimizer=False)
    assert other.alg.teacher_loaded
    for name in ("student", "teacher"):
        saved, loaded = getattr(runner.alg, name).state_dict(), getattr(other.alg, name).state_dict()
        assert all(torch.equal(saved[k], loaded[k]) for k in saved), f"{name} not loaded"
    assert other.alg.optimizer.state_dict()["state"] == optimizer_before["state"] == {}  # optimiser left as it was
