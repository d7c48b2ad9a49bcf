"""Tests for the pure-torch classic tasks and the task registry.

Dynamics and rewards are checked against independent float64 hand computations; episode bookkeeping
(time-outs, terminals, final observations, per-env resets, seeding) against the VecEnv contract.
"""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rlcore.env import VecEnv
from rlcore.env.task import list_tasks, make_task, register_task
from rlcore_tasks.classic import CartPole, PendulumSwingUp


# ---------------------------------------------------------------------------- hand computations
def pendulum_step_ref(th: float, thdot: float, a: float) -> tuple[float, float, float]:
    """One Pendulum-v1 step in plain python: returns (new th, new thdot, reward)."""
    u = max(-1.0, min(1.0, a)) * 2.0
    th_n = ((th + math.pi) % (2 * math.pi)) - math.pi
    reward = -(th_n**2 + 0.1 * thdot**2 + 0.001 * u**2)
    new_thdot = thdot + (3 * 10.0 / 2 * math.sin(th) + 3.0 * u) * 0.05
    new_thdot = max(-8.0, min(8.0, new_thdot))
    return th + new_thdot * 0.05, new_thdot, reward


def pendulum_obs_ref(th: float, thdot: float) -> list[float]:
    return [math.cos(th), math.sin(th), thdot / 8.0]


def cartpole_step_ref(s: list[float], a: float) -> list[float]:
    """One CartPole-v1 Euler step in plain python with a continuous force."""
    x, x_dot, th, th_dot = s
    force = max(-1.0, min(1.0, a)) * 10.0
    total, pml = 1.1, 0.1 * 0.5
    c, si = math.cos(th), math.sin(th)
    temp = (force + pml * th_dot**2 * si) / total
    th_acc = (9.8 * si - c * temp) / (0.5 * (4 / 3 - 0.1 * c**2 / total))
    x_acc = temp - pml * th_acc * c / total
    return [x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc]


def close(a: torch.Tensor, b, atol: float = 1e-5) -> bool:
    return torch.allclose(a.double(), torch.as_tensor(b, dtype=torch.float64), atol=atol, rtol=1e-5)


# ---------------------------------------------------------------------------- contract / shapes
@pytest.mark.parametrize("cls, dim", [(PendulumSwingUp, 3), (CartPole, 4)])
def test_contract_shapes_and_dtypes(cls, dim):
    env = cls(num_envs=5, seed=0)
    assert isinstance(env, VecEnv) and env.num_actions == 1 and isinstance(env.cfg, dict)
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([5])
    assert obs["policy"].shape == (5, dim) and obs["critic"].shape == (5, dim)
    obs, rew, done, extras = env.step(torch.zeros(5, 1))
    assert rew.shape == (5,) and rew.dtype == torch.float32
    assert done.shape == (5,) and done.dtype == torch.bool
    assert extras["time_outs"].dtype == torch.bool
    assert extras["final_observations"].batch_size == torch.Size([5])
    assert all(k.startswith("/") for k in extras["log"])
    assert env.episode_length_buf.dtype == torch.long and env.episode_length_buf.tolist() == [1] * 5


# ---------------------------------------------------------------------------- dynamics and reward
def test_pendulum_one_step_matches_hand_computation():
    env = PendulumSwingUp(num_envs=4, seed=0)
    states = [(0.3, -0.5), (3.0, 7.9), (-2.5, 1.0), (10.0, -7.5)]  # 10 rad exercises angle wrapping
    actions = [0.4, 3.0, -0.7, -5.0]  # +-3, +-5 exercise the action clip; row 1 hits the speed clip
    env.state = torch.tensor(states)
    obs, rew, done, extras = env.step(torch.tensor(actions).unsqueeze(-1))
    refs = [pendulum_step_ref(th, td, a) for (th, td), a in zip(states, actions)]
    assert close(env.state, [[r[0], r[1]] for r in refs])
    assert close(rew, [r[2] for r in refs])
    assert close(obs["policy"], [pendulum_obs_ref(r[0], r[1]) for r in refs])
    assert refs[1][1] == 8.0 and abs(env.state[1, 1].item() - 8.0) < 1e-6  # speed clip active


def test_pendulum_reward_formula():
    env = PendulumSwingUp(num_envs=3, seed=0)
    th = torch.tensor([0.0, math.pi - 0.1, 4.0])
    thdot = torch.tensor([0.0, 2.0, -3.0])
    u = torch.tensor([0.0, 1.5, -2.0])  # torques; actions are u / 2
    env.state = torch.stack((th, thdot), -1)
    _, rew, _, _ = env.step((u / 2.0).unsqueeze(-1))
    th_norm = torch.tensor([0.0, math.pi - 0.1, 4.0 - 2 * math.pi])
    expected = -(th_norm**2 + 0.1 * thdot**2 + 0.001 * u**2)
    assert close(rew, expected)
    assert rew[0].item() == 0.0  # upright, still, no torque: the best possible reward


def test_cartpole_one_step_matches_hand_computation():
    env = CartPole(num_envs=3, seed=0)
    states = [[0.1, -0.2, 0.05, 0.3], [-1.0, 1.5, -0.15, -1.0], [2.0, 0.5, 0.1, 2.0]]
    actions = [0.5, -2.0, 1.0]
    env.state = torch.tensor(states)
    obs, rew, done, extras = env.step(torch.tensor(actions).unsqueeze(-1))
    refs = [cartpole_step_ref(s, a) for s, a in zip(states, actions)]
    assert not done.any()
    assert close(env.state, refs) and close(obs["policy"], refs) and close(obs["critic"], refs)
    assert rew.tolist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------------------- episode bookkeeping
def test_pendulum_all_envs_time_out_after_max_episode_length():
    T = 6
    env = PendulumSwingUp(num_envs=4, max_episode_length=T, seed=1)
    actions = torch.tensor([[0.5], [-0.5], [1.0], [0.0]])
    for t in range(1, T + 1):
        pre = env.state.clone()
        obs, rew, done, extras = env.step(actions)
        if t < T:
            assert not done.any() and not extras["time_outs"].any()
            assert env.episode_length_buf.tolist() == [t] * 4
    assert done.all() and extras["time_outs"].all()
    refs = [pendulum_step_ref(th, td, a) for (th, td), a in zip(pre.tolist(), actions[:, 0].tolist())]
    final_ref = [pendulum_obs_ref(r[0], r[1]) for r in refs]
    assert close(extras["final_observations"]["policy"], final_ref)
    assert close(extras["final_observations"]["critic"], final_ref)
    # Every row restarted from a fresh random state, so the returned obs differs from the final one.
    assert ((obs["critic"] - extras["final_observations"]["critic"]).abs().amax(-1) > 1e-3).all()
    assert close(obs["critic"], torch.stack((env.state[:, 0].cos(), env.state[:, 0].sin(), env.state[:, 1] / 8), -1))
    assert env.episode_length_buf.tolist() == [0] * 4


def test_pendulum_overwritten_counter_resets_only_finished_envs():
    T = 6
    env = PendulumSwingUp(num_envs=4, max_episode_length=T, seed=1)
    env.episode_length_buf = torch.tensor([0, 0, 3, 5])  # runner-style random initial lengths
    actions = torch.zeros(4, 1)
    obs, _, done, extras = env.step(actions)  # env 3 reaches T
    assert done.tolist() == [False, False, False, True] and extras["time_outs"].tolist() == done.tolist()
    assert env.episode_length_buf.tolist() == [1, 1, 4, 0]
    assert torch.equal(obs["critic"][:3], extras["final_observations"]["critic"][:3])  # unfinished rows
    for _ in range(2):
        _, _, done, _ = env.step(actions)
    assert done.tolist() == [False, False, True, False]  # env 2 reaches T on the 3rd step
    assert env.episode_length_buf.tolist() == [3, 3, 0, 2]


def test_cartpole_push_leads_to_terminal_and_only_that_env_resets():
    env = CartPole(num_envs=3, max_episode_length=500, seed=2)
    env.state = torch.zeros(3, 4)  # exact equilibrium: with zero force rows 1, 2 never move
    actions = torch.tensor([[1.0], [0.0], [0.0]])
    for t in range(1, 100):
        pre = env.state.clone()
        obs, rew, done, extras = env.step(actions)
        if done[0]:
            break
        assert not done.any()
    else:
        pytest.fail("pushing hard never made the pole fall")
    assert done.tolist() == [True, False, False] and not extras["time_outs"].any()
    final = extras["final_observations"]["critic"][0]
    assert close(final, cartpole_step_ref(pre[0].tolist(), 1.0))
    assert final[2].item() < -12 * math.pi / 180  # pushing right makes the pole fall to the left
    assert env.state[0].abs().max().item() <= 0.05 and close(obs["critic"][0], env.state[0])
    assert env.state[1:].abs().max().item() == 0.0  # untouched
    assert env.episode_length_buf.tolist() == [0, t, t]


def test_cartpole_time_out_is_not_terminal():
    env = CartPole(num_envs=2, max_episode_length=4, seed=3)
    env.state = torch.zeros(2, 4)
    for _ in range(3):
        _, _, done, _ = env.step(torch.zeros(2, 1))
        assert not done.any()
    obs, _, done, extras = env.step(torch.zeros(2, 1))
    assert done.all() and extras["time_outs"].all()
    assert extras["final_observations"]["critic"].abs().max().item() == 0.0  # still at equilibrium
    assert obs["critic"].abs().max().item() > 0.0  # fresh random start
    assert env.episode_length_buf.tolist() == [0, 0]
    assert close(extras["log"]["/episode_return_mean"], 4.0)


def test_cartpole_terminal_on_the_time_limit_step_is_not_a_time_out():
    env = CartPole(num_envs=2, max_episode_length=1, seed=4)
    env.state = torch.tensor([[2.39, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # row 0 leaves the track
    _, _, done, extras = env.step(torch.zeros(2, 1))
    assert done.tolist() == [True, True]
    assert extras["time_outs"].tolist() == [False, True]


# ---------------------------------------------------------------------------- observation groups
@pytest.mark.parametrize("cls, full, hidden", [(PendulumSwingUp, 3, 2), (CartPole, 4, 2)])
def test_hide_velocity_changes_policy_only(cls, full, hidden):
    env_full = cls(num_envs=4, seed=5)
    env_hidden = cls(num_envs=4, seed=5, hide_velocity=True)
    o_full, o_hid = env_full.get_observations(), env_hidden.get_observations()
    assert o_full["policy"].shape == (4, full) and o_hid["policy"].shape == (4, hidden)
    assert o_hid["critic"].shape == (4, full)
    assert torch.equal(o_hid["critic"], o_full["critic"])  # same seed, same full state
    if cls is CartPole:
        assert torch.equal(o_hid["policy"], env_hidden.state[:, [0, 2]])  # (x, theta)
    else:
        assert torch.equal(o_hid["policy"], o_full["critic"][:, :2])  # (cos, sin)
    o_hid, *_ = env_hidden.step(torch.zeros(4, 1))
    assert o_hid["policy"].shape == (4, hidden) and o_hid["critic"].shape == (4, full)


# ---------------------------------------------------------------------------- seeding
@pytest.mark.parametrize("cls", [PendulumSwingUp, CartPole])
def test_seeding_is_reproducible_and_independent_of_global_rng(cls):
    def rollout(seed: int) -> torch.Tensor:
        env = cls(num_envs=8, max_episode_length=5, seed=seed)  # short episodes: resets draw from the rng
        torch.manual_seed(seed + 100)  # perturb the global rng differently per run
        acts = torch.sin(torch.arange(12.0)).view(12, 1, 1).expand(12, 8, 1)
        return torch.stack([env.step(a)[0]["critic"] for a in acts])

    a, b, c = rollout(7), rollout(7), rollout(8)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


# ---------------------------------------------------------------------------- registry
def test_registry_make_and_unknown_name():
    assert {"pendulum", "cartpole", "go2", "go2_rough", "gym"} <= set(list_tasks())
    env = make_task("pendulum", num_envs=4, seed=0)
    assert isinstance(env, PendulumSwingUp) and env.num_envs == 4
    assert env.get_observations()["policy"].shape == (4, 3)
    assert isinstance(make_task("cartpole", num_envs=2, hide_velocity=True), CartPole)
    with pytest.raises((KeyError, ValueError)) as info:
        make_task("pendullum")
    assert "cartpole" in str(info.value) and "pendulum" in str(info.value)
    with pytest.raises(ValueError):
        register_task("pendulum", PendulumSwingUp)


def test_unknown_cfg_key_rejected():
    with pytest.raises(TypeError):
        PendulumSwingUp(num_envs=2, gravity=9.8)  # the pendulum calls it "g"
    env = PendulumSwingUp(num_envs=2, g=9.81, seed=0)
    assert env.cfg["g"] == 9.81 and env.cfg["max_episode_length"] == 200


# ---------------------------------------------------------------------------- state_dict / load_state_dict
def _drive(env, actions: torch.Tensor) -> list[torch.Tensor]:
    """Step ``env`` through ``actions [K, N, 1]``; everything it returned, flattened into a list of tensors."""
    out = []
    for a in actions:
        obs, rew, done, extras = env.step(a)
        out += [obs["policy"], obs["critic"], rew, done, extras["time_outs"], extras["final_observations"]["critic"],
                extras["log"]["/episode_return_mean"], extras["log"]["/episode_length_mean"],
                env.episode_length_buf.clone()]
    return out


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equal, NaN matching NaN (the last-episode statistics start as NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    same = a == b
    if a.is_floating_point():
        same |= a.isnan() & b.isnan()
    return bool(same.all())


@pytest.mark.parametrize("cls", [PendulumSwingUp, CartPole])
def test_state_dict_round_trip_continues_bit_identically(cls, tmp_path):
    n, T = 16, 5  # short episodes: the continuation resets envs, so it draws from the private generator
    env = cls(num_envs=n, max_episode_length=T, seed=11)
    gen = torch.Generator().manual_seed(0)
    warm = 2.0 * torch.rand(7, n, 1, generator=gen) - 1.0
    cont = 2.0 * torch.rand(9, n, 1, generator=gen) - 1.0
    _drive(env, warm)  # some episodes finished: last-episode statistics are set
    assert not torch.isnan(env._last_return).all()
    env.episode_length_buf = torch.randint(0, T, (n,))  # runners may replace the buffer; the new one is saved
    state = env.state_dict()
    torch.save(state, tmp_path / "env.pt")
    loaded = torch.load(tmp_path / "env.pt", weights_only=True)  # checkpoints are loaded code-free
    assert set(loaded) >= {"state", "episode_length_buf", "episode_return", "_last_return", "_last_length",
                           "generator_state"}
    assert torch.equal(loaded["episode_length_buf"], env.episode_length_buf)
    expected = _drive(env, cont)
    assert any(bool(t.any()) for t in expected[3::9])  # the continuation does reset envs
    assert torch.equal(state["state"], loaded["state"])  # state_dict returned a copy, not live buffers

    other = cls(num_envs=n, max_episode_length=T, seed=99)  # different physical state and generator
    other.load_state_dict(loaded)
    got = _drive(other, cont)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert identical(a, b)

    # Without the generator's state the reset draws differ, so the restored generator is what made it exact.
    third = cls(num_envs=n, max_episode_length=T, seed=99)
    third.load_state_dict({**loaded, "generator_state": torch.Generator().manual_seed(5).get_state()})
    diverged = _drive(third, cont)
    assert not all(identical(a, b) for a, b in zip(diverged, expected))


@pytest.mark.parametrize("cls", [PendulumSwingUp, CartPole])
def test_load_state_dict_does_not_alias_the_saved_tensors(cls):
    env = cls(num_envs=4, seed=0)
    state = env.state_dict()
    saved = {k: v.clone() for k, v in state.items() if isinstance(v, torch.Tensor)}
    env.load_state_dict(state)
    env.step(torch.ones(4, 1))
    env.step(torch.ones(4, 1))
    for k, v in saved.items():
        assert identical(state[k], v), k


def test_load_state_dict_rejects_other_task_or_size():
    pend = PendulumSwingUp(num_envs=4, seed=0)
    with pytest.raises(ValueError, match="CartPole"):
        pend.load_state_dict(CartPole(num_envs=4, seed=0).state_dict())
    with pytest.raises(ValueError, match="num_envs=8"):
        pend.load_state_dict(PendulumSwingUp(num_envs=8, seed=0).state_dict())
    bad = pend.state_dict()
    del bad["generator_state"]
    with pytest.raises(ValueError, match="generator_state"):
        pend.load_state_dict(bad)
    before = pend.state.clone()
    bad = pend.state_dict()
    bad["state"] = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="state"):
        pend.load_state_dict(bad)
    assert torch.equal(pend.state, before)  # a rejected state changes nothing
