"""GymnasiumVecEnv: wiring, action rescaling, autoreset bookkeeping (hand-checked), errors, MuJoCo envs.

The bookkeeping tests drive the deterministic ``rlcore_test/Counter-v0`` (gym_test_envs.py) with one constant
action per env, so every episode end, final observation and logged statistic is known by hand:

====  ====================  ===================================================================
env   env action (policy)   episodes
====  ====================  ===================================================================
0     2.0 (policy 1 / 5)    terminates after 2 steps (sum 4), return 4
1     0.0 (policy -1 / -7)  never terminates: truncated by the 5-step time limit, return 0
2     1.0 (policy 0)        terminates after 3 steps (sum 3), return 3
3     0.6 (policy -0.4)     terminates on step 5, the time-limit step too: not a time-out, return 3
====  ====================  ===================================================================
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict

gym = pytest.importorskip("gymnasium", minversion="1.1")

from gym_test_envs import (  # noqa: E402
    COUNTER_ID,
    DICT_COUNTER_ID,
    IMAGE_HW,
    CounterEnv,
    register_test_envs,
)
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from update_check import assert_each_update_improved, watch_updates  # noqa: E402

from rlcore.env import GymnasiumVecEnv, VecEnv  # noqa: E402
from rlcore.env.gymnasium import NO_TIME_LIMIT  # noqa: E402
from rlcore.env.task import make_task  # noqa: E402

register_test_envs()

ACTIONS = torch.tensor([[5.0], [-7.0], [0.0], [-0.4]])  # policy space; clipped, then rescaled onto [0, 2]
F, T = False, True
# Expected (dones, time_outs, final obs of the done envs, mean return / length of the episodes ended) per step.
EXPECTED = [
    ([F, F, F, F], [F, F, F, F], {}, None),
    ([T, F, F, F], [F, F, F, F], {0: [2, 4]}, (4.0, 2.0)),
    ([F, F, T, F], [F, F, F, F], {2: [3, 3]}, (3.0, 3.0)),
    ([T, F, F, F], [F, F, F, F], {0: [2, 4]}, (4.0, 2.0)),
    ([F, T, F, T], [F, T, F, F], {1: [5, 0], 3: [5, 3]}, (1.5, 5.0)),
    ([T, F, T, F], [F, F, F, F], {0: [2, 4], 2: [3, 3]}, (3.5, 2.5)),
]
# Observations returned at each step (after the resets): [steps into the episode, sum of actions].
EXPECTED_OBS = [
    [[1, 2], [1, 0], [1, 1], [1, 0.6]],
    [[0, 0], [2, 0], [2, 2], [2, 1.2]],
    [[1, 2], [3, 0], [0, 0], [3, 1.8]],
    [[0, 0], [4, 0], [1, 1], [4, 2.4]],
    [[1, 2], [0, 0], [2, 2], [0, 0]],
    [[0, 0], [1, 0], [0, 0], [1, 0.6]],
]


def counter_vec(mode: str, num_envs: int = 4, vectorization: str = "sync"):
    """A vector env of the counter in the given autoreset mode (``"single"``: one plain gymnasium.Env)."""
    if mode == "single":
        return gym.make(COUNTER_ID)
    return gym.make_vec(COUNTER_ID, num_envs=num_envs, vectorization_mode=vectorization,
                        vector_kwargs={"autoreset_mode": AutoresetMode(mode)})


def check_step(step: int, out, expected_obs=EXPECTED_OBS, expected=EXPECTED) -> None:
    obs, rewards, dones, extras = out
    exp_dones, exp_time_outs, exp_final, exp_log = expected[step]
    assert dones.dtype == torch.bool and extras["time_outs"].dtype == torch.bool
    assert dones.tolist() == exp_dones, f"step {step + 1}"
    assert extras["time_outs"].tolist() == exp_time_outs, f"step {step + 1}"
    torch.testing.assert_close(obs["policy"], torch.tensor(expected_obs[step], dtype=torch.float32), atol=1e-5,
                               rtol=0)
    for env, final in exp_final.items():
        torch.testing.assert_close(extras["final_observations"]["policy"][env],
                                   torch.tensor(final, dtype=torch.float32), atol=1e-5, rtol=0)
    log = extras["log"]
    if exp_log is None:
        assert math.isnan(log["/episode_return"]) and math.isnan(log["/episode_length"])
    else:
        assert log["/episode_return"] == pytest.approx(exp_log[0], abs=1e-5)
        assert log["/episode_length"] == pytest.approx(exp_log[1])


# ---------------------------------------------------------------------------- wiring
def test_pendulum_wiring():
    env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=3, seed=0)
    assert isinstance(env, VecEnv)
    assert (env.num_envs, env.num_actions, env.max_episode_length) == (3, 1, 200)
    assert env.autoreset_mode == AutoresetMode.SAME_STEP
    assert env.episode_length_buf.tolist() == [0, 0, 0] and env.episode_length_buf.dtype == torch.long
    assert env.cfg["env_id"] == "Pendulum-v1" and env.cfg["num_envs"] == 3
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([3]) and list(obs.keys()) == ["policy"]
    assert obs["policy"].shape == (3, 3) and obs["policy"].dtype == torch.float32
    # cos^2 + sin^2 = 1 on Pendulum's observation, |theta_dot| <= 1 at reset
    torch.testing.assert_close(obs["policy"][:, :2].square().sum(-1), torch.ones(3))
    obs, rewards, dones, extras = env.step(torch.zeros(3, 1))
    assert rewards.shape == (3,) and rewards.dtype == torch.float32 and (rewards <= 0).all()
    assert dones.shape == (3,) and not dones.any() and not extras["time_outs"].any()
    assert env.episode_length_buf.tolist() == [1, 1, 1]
    env.close()


def test_pendulum_seeding_and_async_match_sync():
    """Same seed, same actions: sync envs reproduce themselves, and async envs give the same numbers."""
    runs = []
    for mode in ("sync", "sync", "async"):
        env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=2, seed=7, vectorization_mode=mode)
        actions = torch.linspace(-1, 1, 2).unsqueeze(-1)
        seen = [env.get_observations()["policy"]]
        for _ in range(5):
            seen.append(env.step(actions)[0]["policy"])
        env.close()
        runs.append(torch.stack(seen))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    torch.testing.assert_close(runs[0], runs[2], rtol=0, atol=0)
    other = GymnasiumVecEnv.make("Pendulum-v1", num_envs=2, seed=8)
    assert not torch.equal(other.get_observations()["policy"], runs[0][0])


def test_action_rescaling_and_clipping():
    """Policy [-1, 1] -> Pendulum's torque [-2, 2], clipped: the reward's 0.001 u^2 term shows the applied torque."""
    env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=4, seed=0)
    a = env._actions_to_numpy(torch.tensor([[-1.0], [0.5], [3.0], [-9.0]]))
    assert a.dtype == np.float32 and a.shape == (4, 1)
    np.testing.assert_allclose(a[:, 0], [-2.0, 1.0, 2.0, -2.0])
    env = GymnasiumVecEnv.make("Pendulum-v1", num_envs=1, seed=0, rescale_actions=False)
    np.testing.assert_allclose(env._actions_to_numpy(torch.tensor([[1.5]]))[:, 0], [1.5])
    np.testing.assert_allclose(env._actions_to_numpy(torch.tensor([[7.0]]))[:, 0], [2.0])


# ---------------------------------------------------------------------------- autoreset bookkeeping
@pytest.mark.parametrize("mode, vectorization", [("SameStep", "sync"), ("NextStep", "sync"), ("Disabled", "sync"),
                                                 ("SameStep", "async"), ("NextStep", "async")])
def test_counter_bookkeeping_hand_checked(mode, vectorization):
    """Every autoreset mode gives the same-step contract: reset obs after a done, final obs, time-outs, logs."""
    env = GymnasiumVecEnv(counter_vec(mode, vectorization=vectorization), seed=0)
    assert env.max_episode_length == 5 and env.num_actions == 1
    assert env.get_observations()["policy"].tolist() == [[0, 0]] * 4
    for step in range(len(EXPECTED)):
        check_step(step, env.step(ACTIONS))
    assert env.episode_length_buf.tolist() == [0, 1, 0, 1]
    env.close()


def test_counter_via_make_and_single_env():
    env = GymnasiumVecEnv.make(COUNTER_ID, num_envs=4, seed=0)
    for step in range(len(EXPECTED)):
        check_step(step, env.step(ACTIONS))
    # A single gymnasium.Env is vectorised as one env: env 0's column of the table.
    single = GymnasiumVecEnv(counter_vec("single"))
    assert single.num_envs == 1
    for step in range(len(EXPECTED)):
        obs, _, dones, extras = single.step(ACTIONS[:1])
        assert dones.tolist() == EXPECTED[step][0][:1]
        assert obs["policy"].tolist() == EXPECTED_OBS[step][:1]


def test_rewards_and_time_limit_override():
    env = GymnasiumVecEnv.make(COUNTER_ID, num_envs=4, seed=0, max_episode_steps=3)
    assert env.max_episode_length == 3
    _, rewards, _, _ = env.step(ACTIONS)
    torch.testing.assert_close(rewards, torch.tensor([2.0, 0.0, 1.0, 0.6]))
    env.step(ACTIONS)
    _, _, dones, extras = env.step(ACTIONS)  # step 3: env 2 terminates, envs 1 and 3 hit the 3-step limit
    assert dones.tolist() == [F, T, T, T] and extras["time_outs"].tolist() == [F, T, F, T]


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_random_initial_episode_lengths_cut_episodes(mode):
    """init_at_random_ep_len sets episode_length_buf: the adapter ends those episodes early, as time-outs."""
    env = GymnasiumVecEnv(counter_vec(mode), seed=0)
    env.episode_length_buf = torch.tensor([0, 3, 0, 0])  # env 1 (never terminates) is cut at 5 - 3 = 2 steps
    env.step(ACTIONS)
    obs, _, dones, extras = env.step(ACTIONS)
    assert dones.tolist() == [T, T, F, F] and extras["time_outs"].tolist() == [F, T, F, F]
    assert extras["final_observations"]["policy"][1].tolist() == [2, 0]
    assert obs["policy"][1].tolist() == [0, 0]
    assert extras["log"]["/episode_length"] == pytest.approx(2.0)  # env 0 (2 steps) and env 1 (2 real steps)
    for step in range(3, 8):  # env 1's next episode runs the full 5 steps (ends at step 7)
        _, _, dones, extras = env.step(ACTIONS)
        assert bool(dones[1]) == (step == 7) and bool(extras["time_outs"][1]) == (step == 7)


def test_dict_observations_are_groups():
    env = GymnasiumVecEnv.make(DICT_COUNTER_ID, num_envs=4, seed=0)
    obs = env.get_observations()
    assert sorted(obs.keys()) == ["count", "pixels"]
    assert obs["count"].shape == (4, 2) and obs["pixels"].shape == (4, 1, *IMAGE_HW)  # H x W x C -> C x H x W
    assert obs["pixels"].dtype == torch.float32
    env.step(ACTIONS)
    obs, _, dones, extras = env.step(ACTIONS)
    assert dones.tolist() == [T, F, F, F]
    final = extras["final_observations"]
    assert final["count"][0].tolist() == [2, 4] and (final["pixels"][0] == 2).all()
    assert obs["count"][0].tolist() == [0, 0] and (obs["pixels"][0] == 0).all() and (obs["pixels"][1] == 2).all()
    chw = GymnasiumVecEnv.make(DICT_COUNTER_ID, num_envs=1, channels_last=False)
    assert chw.get_observations()["pixels"].shape == (1, *IMAGE_HW, 1)


def test_registry_builds_gym_task():
    env = make_task("gym", env_id="Pendulum-v1", num_envs=2, seed=0, device="cpu")
    assert isinstance(env, GymnasiumVecEnv) and env.num_envs == 2 and env.max_episode_length == 200
    env = make_task("gym", env_id=COUNTER_ID, num_envs=3, seed=0, max_episode_steps=2, env_kwargs={})
    assert env.max_episode_length == 2


# ---------------------------------------------------------------------------- errors
def test_unsupported_spaces_give_clear_errors():
    with pytest.raises(ValueError, match=r"action space Discrete\(2\).*supported are Box action spaces"):
        GymnasiumVecEnv.make("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ValueError, match=r"observation space Discrete\(16\).*supported are Box"):
        GymnasiumVecEnv.make("FrozenLake-v1", num_envs=1)

    class Unbounded(CounterEnv):
        action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    vec = SyncVectorEnv([Unbounded], autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(ValueError, match="unbounded.*rescale_actions=False"):
        GymnasiumVecEnv(vec)
    assert GymnasiumVecEnv(vec, rescale_actions=False).num_actions == 1
    assert GymnasiumVecEnv(vec, rescale_actions=False).max_episode_length == NO_TIME_LIMIT
    with pytest.raises(ValueError, match="cannot make Gymnasium env 'NoSuchEnv-v0'"):
        GymnasiumVecEnv.make("NoSuchEnv-v0")
    with pytest.raises(ValueError, match="vectorization_mode"):
        GymnasiumVecEnv.make("Pendulum-v1", vectorization_mode="threads")
    with pytest.raises(TypeError, match="gymnasium.vector.VectorEnv"):
        GymnasiumVecEnv(object())


def test_next_step_env_without_partial_reset_is_refused_clearly():
    class NoPartialReset(gym.vector.VectorWrapper):
        def reset(self, *, seed=None, options=None):
            if options:
                raise TypeError("options are not supported")
            return self.env.reset(seed=seed, options=options)

    env = GymnasiumVecEnv(NoPartialReset(counter_vec("NextStep")), seed=0)
    env.step(ACTIONS)
    with pytest.raises(RuntimeError, match="same-step autoreset mode"):
        env.step(ACTIONS)


# ---------------------------------------------------------------------------- MuJoCo
@pytest.fixture
def mujoco_envs(tmp_path, monkeypatch):
    pytest.importorskip("mujoco", reason="the MuJoCo Gymnasium envs need `pip install 'gymnasium[mujoco]'`")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes warnings (HalfCheetah's deprecated settotalmass) to ./MUJOCO_LOG.TXT


def test_half_cheetah_wiring_and_runner(mujoco_envs):
    from rlcore.runners import OnPolicyRunner

    env = GymnasiumVecEnv.make("HalfCheetah-v5", num_envs=2, seed=0)
    assert (env.num_actions, env.max_episode_length) == (6, 1000)
    assert env.get_observations()["policy"].shape == (2, 17)
    cfg = {"seed": 0, "num_steps_per_env": 8, "logger": "none",
           "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
           "actor": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                     "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
           "critic": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True},
           "algorithm": {"class_name": "PPO", "num_mini_batches": 2, "num_learning_epochs": 1}}
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    updates = watch_updates(runner.alg)
    runner.learn(2, init_at_random_ep_len=True)
    assert len(set(env.episode_length_buf.tolist())) == 2  # spread by init_at_random_ep_len
    assert_each_update_improved(updates, 2)  # each update learned from the adapted rollout the right way
    env.close()


def test_hopper_terminations_are_not_time_outs(mujoco_envs):
    """Hopper falls under random actions: dones without time-outs, an unhealthy final obs, a fresh reset obs."""
    env = GymnasiumVecEnv.make("Hopper-v5", num_envs=4, seed=0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        obs, _, dones, extras = env.step(torch.rand(4, 3, generator=gen) * 2 - 1)
        if dones.any():
            break
    assert dones.any() and not extras["time_outs"].any()
    i = int(dones.nonzero()[0])
    final = extras["final_observations"]["policy"][i]
    height, angle = float(final[0]), float(final[1])  # Hopper-v5 obs: z, torso angle, ...
    assert height <= 0.7 or abs(angle) >= 0.2 or final[1:].abs().max() >= 100.0  # Hopper's healthy ranges
    assert abs(float(obs["policy"][i, 0]) - 1.25) < 0.01 and abs(float(obs["policy"][i, 1])) < 0.01
    assert int(env.episode_length_buf[i]) == 0
    env.close()
