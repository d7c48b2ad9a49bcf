"""LeggedGymVecEnv against a pure-torch env that follows legged_gym 1.0's API exactly (legged_gym_style_env.py)."""

from __future__ import annotations

import math

import pytest
import torch
from legged_gym_style_env import LeggedGymStyleEnv, make_cfg
from tensordict import TensorDict
from update_check import assert_each_update_improved, watch_updates

from rlcore.env import LeggedGymVecEnv, VecEnv
from rlcore.runners import OnPolicyRunner


def test_wiring_and_groups():
    raw = LeggedGymStyleEnv(make_cfg(num_envs=5))
    env = LeggedGymVecEnv(raw)
    assert isinstance(env, VecEnv)
    assert raw.num_steps == raw.cfg.control.decimation  # the adapter called env.reset() once, like rsl_rl 1.0.2
    assert (env.num_envs, env.num_actions, env.max_episode_length) == (5, 1, 10)
    assert isinstance(env.max_episode_length, int) and env.device == torch.device("cpu") and env.cfg is raw.cfg
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([5])
    assert sorted(obs.keys()) == ["critic", "policy"]
    torch.testing.assert_close(obs["policy"], raw.obs_buf)
    torch.testing.assert_close(obs["critic"], raw.privileged_obs_buf)
    assert obs["critic"].shape == (5, 4)
    obs, rewards, dones, extras = env.step(torch.zeros(5, 1))
    assert rewards.shape == (5,) and rewards.dtype == torch.float32
    assert dones.shape == (5,) and dones.dtype == torch.bool and not dones.any()
    assert "final_observations" not in extras  # legged_gym has none: nothing is invented
    torch.testing.assert_close(obs["policy"], raw.obs_buf)


def test_no_privileged_observations_means_no_critic_group():
    env = LeggedGymVecEnv(LeggedGymStyleEnv(make_cfg(num_privileged_obs=None)))
    assert list(env.get_observations().keys()) == ["policy"]
    assert list(env.step(torch.zeros(8, 1))[0].keys()) == ["policy"]


def test_returned_buffers_are_copies():
    """legged_gym rewrites rew_buf in place each step: what the adapter returned must not change."""
    raw = LeggedGymStyleEnv(make_cfg(num_envs=3))
    env = LeggedGymVecEnv(raw)
    _, rewards, _, _ = env.step(torch.ones(3, 1))
    kept = rewards.clone()
    env.step(-torch.ones(3, 1))
    torch.testing.assert_close(rewards, kept)
    assert not torch.equal(rewards, raw.rew_buf)


def test_time_outs_terminations_and_logs():
    raw = LeggedGymStyleEnv(make_cfg(num_envs=2, send_timeouts=True))
    env = LeggedGymVecEnv(raw)
    assert raw.episode_length_buf.tolist() == [1, 1]  # reset() steps once
    episode_sum = raw.rew_buf.clone()  # the reward of reset()'s step belongs to the episode
    zeros = torch.zeros(2, 1)
    for _ in range(9):  # zero force: the mass stays put, so the only end is the time limit (length > 10)
        _, rewards, dones, extras = env.step(zeros)
        episode_sum += rewards
        assert not dones.any()
        assert math.isnan(float(extras["log"]["/rew_tracking"]))  # no episode ended at this step
    _, rewards, dones, extras = env.step(zeros)
    episode_sum += rewards
    assert dones.tolist() == [True, True] and extras["time_outs"].tolist() == [True, True]
    assert set(extras["log"]) == {"/rew_tracking", "/rew_effort"}
    # the logged values are the env's own episode statistics ...
    for key in ("tracking", "effort"):
        assert float(extras["log"][f"/rew_{key}"]) == pytest.approx(float(raw.extras["episode"][f"rew_{key}"]))
    # ... which, without force (no effort cost), are the mean episode return per second of the episode limit
    assert float(extras["log"]["/rew_effort"]) == 0.0
    expected = (episode_sum.mean() / raw.max_episode_length_s).item()
    assert expected < -0.01 and float(extras["log"]["/rew_tracking"]) == pytest.approx(expected, rel=1e-5)
    # legged_gym refreshes extras["time_outs"] only on steps with a reset: the next step's raw value is stale.
    _, _, dones, extras = env.step(zeros)
    assert raw.extras["time_outs"].tolist() == [True, True]
    assert not dones.any() and not extras["time_outs"].any()
    # A large force throws env 0 out of bounds: a termination, not a time-out.
    for _ in range(5):
        _, _, dones, extras = env.step(torch.tensor([[100.0], [0.0]]))
        if dones.any():
            break
    assert dones.tolist() == [True, False] and extras["time_outs"].tolist() == [False, False]
    # env 0 alone ended: its statistics, not a mean with env 1's running episode
    assert float(extras["log"]["/rew_effort"]) == pytest.approx(float(raw.extras["episode"]["rew_effort"]))
    assert float(extras["log"]["/rew_effort"]) < 0.0


def test_without_send_timeouts_there_are_no_time_outs():
    env = LeggedGymVecEnv(LeggedGymStyleEnv(make_cfg(num_envs=2, send_timeouts=False)))
    for _ in range(10):
        _, _, dones, extras = env.step(torch.zeros(2, 1))
    assert dones.all() and "time_outs" not in extras


def test_episode_length_buf_is_the_envs():
    raw = LeggedGymStyleEnv(make_cfg(num_envs=4))
    env = LeggedGymVecEnv(raw)
    env.episode_length_buf = torch.tensor([0, 3, 6, 9])
    assert raw.episode_length_buf.tolist() == [0, 3, 6, 9]
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    _, _, dones, extras = env.step(torch.zeros(4, 1))  # env 3 reaches 11 > 10
    assert dones.tolist() == [False, False, False, True] and extras["time_outs"].tolist() == [False, False, False, True]
    assert env.episode_length_buf is raw.episode_length_buf


def test_not_a_legged_gym_env():
    with pytest.raises(TypeError, match="lacks .*get_privileged_observations"):
        LeggedGymVecEnv(object())


def test_runner_trains_with_privileged_critic():
    """The runner drives the adapted env: the critic reads the privileged group; random initial lengths reach it."""
    raw = LeggedGymStyleEnv(make_cfg(num_envs=16))
    env = LeggedGymVecEnv(raw)
    cfg = {
        "seed": 0, "num_steps_per_env": 12, "logger": "none",
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_mini_batches": 2, "num_learning_epochs": 2},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    assert runner.alg.actor.obs_dim == raw.num_obs and runner.alg.critic.obs_dim == raw.num_privileged_obs
    updates = watch_updates(runner.alg)
    steps_before = raw.num_steps
    runner.learn(2, init_at_random_ep_len=True)
    assert raw.num_steps > steps_before
    assert len(set(raw.episode_length_buf.tolist())) > 1  # spread by init_at_random_ep_len
    # the critic learned from the privileged group: the stored rollout holds it, and each update improved
    assert_each_update_improved(updates, 2)
