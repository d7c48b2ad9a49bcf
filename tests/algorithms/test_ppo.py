"""Tests for rlcore.algorithms.PPO: returns, time-out bootstrap, losses, lr schedule, recurrence, checkpoints.

Every test compares against a value computed independently here (by hand formulas on the stored data), so that
a wrong sign, a swapped constant or an off-by-one step in the implementation changes the result.
"""

from __future__ import annotations

import io
import math
import sys
import types

import numpy as np
import pytest
import torch

from rlcore.algorithms import PPO, construct_algorithm
from rlcore.modules import EmpiricalDiscountedVariationNormalization

T, N, GAMMA, LAM = 5, 3, 0.9, 0.8


# ============================================================================ helpers
def _first_batch_capture(ppo: PPO, monkeypatch) -> dict:
    """Record, during update(), the first mini-batch and the first recomputed log-probs / values."""
    cap: dict = {}
    storage = ppo.storage
    for name in ("mini_batch_generator", "recurrent_mini_batch_generator"):
        original = getattr(storage, name)

        def wrapper(*args, _original=original, **kwargs):
            for batch in _original(*args, **kwargs):
                cap.setdefault("batch", batch)
                yield batch

        monkeypatch.setattr(storage, name, wrapper)
    original_log_prob = ppo.actor.get_output_log_prob

    def log_prob(actions):
        out = original_log_prob(actions)
        cap.setdefault("log_prob", out.detach().clone())
        return out

    monkeypatch.setattr(ppo.actor, "get_output_log_prob", log_prob)
    def hook(module, inputs, output):
        cap.setdefault("values", output.detach().clone())  # returns None: the output is not replaced

    cap["hook"] = ppo.critic.register_forward_hook(hook)  # remove with cap["hook"].remove()
    return cap


def _freeze_optimizer(ppo: PPO, monkeypatch) -> list[int]:
    """Make optimizer.step a no-op (the models stay as they are for every mini-batch); returns a step counter."""
    calls: list[int] = []
    monkeypatch.setattr(ppo.optimizer, "step", lambda *a, **k: calls.append(1))
    return calls


def _scripted_rollout(kit, with_final_obs: bool = True, **ppo_kwargs):
    """Drive process_env_step with fixed rewards / values / dones for T=5 steps of N=3 envs.

    env 0: terminal (not a time-out) after step 1; env 1: time-out after step 2; env 2: time-out after the last step 4.
    The critic's output is made O(1) so that bootstrapped values are not negligible.
    """
    obs_seq = [kit.make_obs(N) for _ in range(T + 1)]
    final_obs = [kit.make_obs(N) for _ in range(T)]
    ppo = kit.make_ppo(obs_seq[0], T, gamma=GAMMA, lam=LAM, critic_kwargs={"init_gains": [1.0, 1.0]}, **ppo_kwargs)
    with torch.no_grad():
        ppo.critic.mlp[-1].bias.fill_(2.0)
    rewards = torch.tensor(
        [[1.0, -0.5, 0.25], [0.5, 2.0, -1.0], [-1.5, 0.75, 0.5], [2.5, -0.25, 1.25], [0.125, 1.5, -2.0]]
    )
    values = torch.tensor(
        [[0.3, -0.2, 1.1], [0.7, 0.4, -0.6], [-0.9, 1.3, 0.2], [0.1, -1.2, 0.8], [0.6, 0.05, -0.4]]
    )
    dones = torch.zeros(T, N, dtype=torch.bool)
    dones[1, 0] = dones[2, 1] = dones[4, 2] = True
    time_outs = dones.clone()
    time_outs[1, 0] = False  # env 0 terminates
    with torch.inference_mode():
        for t in range(T):
            ppo.act(obs_seq[t])
            ppo.transition.values = values[t].unsqueeze(-1).clone()
            extras = {"time_outs": time_outs[t]}
            if with_final_obs:
                extras["final_observations"] = final_obs[t]
            ppo.process_env_step(obs_seq[t + 1], rewards[t].clone(), dones[t], extras)
        v_final = torch.stack([ppo.critic(o).squeeze(-1) for o in final_obs])  # [T, N]
        last_v = ppo.critic(obs_seq[T]).squeeze(-1)  # [N]
    return types.SimpleNamespace(ppo=ppo, rewards=rewards, values=values, dones=dones, time_outs=time_outs,
                                 v_final=v_final, last_v=last_v, last_obs=obs_seq[T], obs_seq=obs_seq)


def _hand_gae(r_eff, values, dones, last_v, gamma, lam):
    """A_t = sum_{k=t}^{e(t)} (gamma lam)^(k-t) delta_k with e(t) the episode end (first done >= t) or T-1."""
    r_eff, values, dones, last_v = (np.asarray(x, dtype=np.float64) for x in (r_eff, values, dones, last_v))
    steps, envs = r_eff.shape
    v_ext = np.concatenate([values, last_v[None]], axis=0)
    delta = r_eff + gamma * v_ext[1:] * (1.0 - dones) - values
    adv = np.zeros_like(values)
    for n in range(envs):
        for t in range(steps):
            k = t
            while True:
                adv[t, n] += (gamma * lam) ** (k - t) * delta[k, n]
                if dones[k, n] or k == steps - 1:
                    break
                k += 1
    return adv, adv + values


# ============================================================================ 1, 2: GAE, returns, time-outs
def test_gae_and_returns_match_hand_computation(kit):
    s = _scripted_rollout(kit, normalize_advantage_per_mini_batch=True)
    st = s.ppo.storage
    r_eff = s.rewards + GAMMA * s.v_final * s.time_outs
    s.ppo.compute_returns(s.last_obs)
    adv, ret = _hand_gae(r_eff, s.values, s.dones.float(), s.last_v, GAMMA, LAM)
    torch.testing.assert_close(st.returns.squeeze(-1), torch.tensor(ret, dtype=torch.float32), atol=1e-5, rtol=1e-5)
    # normalize_advantage_per_mini_batch keeps the raw advantages in the storage
    torch.testing.assert_close(st.advantages.squeeze(-1), torch.tensor(adv, dtype=torch.float32), atol=1e-5, rtol=1e-5)
    # spot checks of the last step: not done -> r + gamma V(last obs); time-out at the last step -> r_eff only
    assert st.returns[4, 0, 0].item() == pytest.approx(s.rewards[4, 0].item() + GAMMA * s.last_v[0].item(), abs=1e-5)
    assert st.returns[4, 2, 0].item() == pytest.approx(r_eff[4, 2].item(), abs=1e-5)
    # terminal step of env 0 (step 1): return is the reward alone plus nothing after it
    assert st.returns[1, 0, 0].item() == pytest.approx(s.rewards[1, 0].item(), abs=1e-6)

    # Rollout-wide normalisation: the same raw advantages, now with mean 0 and std 1.
    s.ppo.normalize_advantage_per_mini_batch = False
    s.ppo.compute_returns(s.last_obs)
    a = st.advantages.squeeze(-1)
    assert a.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert a.std().item() == pytest.approx(1.0, abs=1e-5)
    raw = torch.tensor(adv, dtype=torch.float32)
    torch.testing.assert_close(a, (raw - raw.mean()) / raw.std(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(st.returns.squeeze(-1), torch.tensor(ret, dtype=torch.float32), atol=1e-5, rtol=1e-5)


def test_time_out_bootstraps_from_final_observation_only_for_time_outs(kit):
    s = _scripted_rollout(kit)
    stored = s.ppo.storage.rewards.squeeze(-1)
    assert s.v_final.abs().min() > 0.1  # the bootstrap is not negligible
    expected = s.rewards.clone()
    expected[2, 1] += GAMMA * s.v_final[2, 1]
    expected[4, 2] += GAMMA * s.v_final[4, 2]
    torch.testing.assert_close(stored, expected, atol=1e-6, rtol=1e-6)
    assert stored[1, 0] == s.rewards[1, 0]  # terminal: no bootstrap
    assert s.ppo.storage.dones.squeeze(-1).bool().equal(s.dones)


def test_time_out_without_final_observations_bootstraps_from_step_value(kit):
    s = _scripted_rollout(kit, with_final_obs=False)
    stored = s.ppo.storage.rewards.squeeze(-1)
    expected = s.rewards + GAMMA * s.values * s.time_outs
    torch.testing.assert_close(stored, expected, atol=1e-6, rtol=1e-6)
    assert stored[1, 0] == s.rewards[1, 0]


def test_time_out_at_last_step_does_not_bootstrap_from_last_values(kit):
    s = _scripted_rollout(kit, normalize_advantage_per_mini_batch=True)
    s.ppo.compute_returns(s.last_obs)
    returns_a = s.ppo.storage.returns.clone()
    other_obs = kit.make_obs(N, offset=3.0)
    with torch.inference_mode():
        other_v = s.ppo.critic(other_obs).squeeze(-1)
    assert (other_v - s.last_v).abs().min() > 1e-3
    s.ppo.compute_returns(other_obs)
    returns_b = s.ppo.storage.returns
    # env 2 timed out at the last step: its returns come from the folded bootstrap, not from V(last obs)
    torch.testing.assert_close(returns_a[:, 2], returns_b[:, 2], atol=0, rtol=0)
    assert returns_b[4, 2, 0].item() == pytest.approx(s.rewards[4, 2].item() + GAMMA * s.v_final[4, 2].item(), abs=1e-5)
    # envs 0 and 1 are mid-episode at the end: their last return does use V(last obs)
    for n in (0, 1):
        assert returns_b[4, n, 0].item() == pytest.approx(s.rewards[4, n].item() + GAMMA * other_v[n].item(), abs=1e-5)


def test_recurrent_critic_bootstraps_from_its_running_state_without_advancing_it(kit):
    obs = kit.make_obs(N)
    ppo = kit.make_ppo(obs, 3, gamma=GAMMA, critic_rnn="gru", critic_kwargs={"init_gains": [1.0, 1.0]})
    final = kit.make_obs(N)
    rewards = torch.tensor([1.0, 2.0, 3.0])
    dones, time_outs = torch.tensor([False, True, True]), torch.tensor([False, True, False])
    with torch.inference_mode():
        ppo.act(obs)
        ppo.process_env_step(obs, rewards, torch.zeros(N, dtype=torch.bool), {})
        ppo.act(obs)
        state = ppo.critic.get_hidden_state().clone()  # after obs of step 1, before the env step's reset
        v_expected = ppo.critic(final).squeeze(-1)
        ppo.critic.reset(hidden_state=None)
        v_zero = ppo.critic(final).squeeze(-1)
        ppo.critic.reset(hidden_state=state.clone())
        assert (v_expected - v_zero).abs()[1] > 1e-4  # the episode's memory matters for V(final obs)
        ppo.process_env_step(obs, rewards, dones, {"time_outs": time_outs, "final_observations": final})
        # the bootstrap peeked: the carried state only had the done rows zeroed
        torch.testing.assert_close(ppo.critic.get_hidden_state(), state * (~dones).view(1, -1, 1).float())
        expected = rewards + GAMMA * v_expected * time_outs
        torch.testing.assert_close(ppo.storage.rewards[1].squeeze(-1), expected)
        ppo.act(obs)
        ppo.process_env_step(obs, rewards, torch.zeros(N, dtype=torch.bool), {})
        before = ppo.critic.get_hidden_state().clone()
        ppo.compute_returns(obs)
        assert torch.equal(ppo.critic.get_hidden_state(), before)


def test_final_observations_of_other_rows_are_never_read(kit):
    """The env contract: only done rows of final_observations are meaningful; others may hold garbage (NaN)."""
    obs = kit.make_obs(N)
    ppo = kit.make_ppo(obs, 2, gamma=GAMMA)
    final = kit.make_obs(N)
    final["policy"][0] = float("nan")  # env 0: not done
    final["privileged"][1] = float("inf")  # env 1: terminal (done, no time-out): no bootstrap, V is not needed
    rewards = torch.tensor([1.0, 2.0, 3.0])
    with torch.inference_mode():
        ppo.act(obs)
        v2 = ppo.critic(final[2:]).squeeze(-1)
        ppo.process_env_step(obs, rewards, torch.tensor([False, True, True]),
                             {"time_outs": torch.tensor([False, False, True]), "final_observations": final})
    stored = ppo.storage.rewards[0].squeeze(-1)
    assert torch.isfinite(stored).all(), stored
    torch.testing.assert_close(stored, torch.tensor([1.0, 2.0, 3.0 + GAMMA * v2.item()]))


def test_without_time_outs_no_bootstrap(kit):
    obs = kit.make_obs(N)
    ppo = kit.make_ppo(obs, 1)
    rewards = torch.tensor([1.0, -2.0, 0.5])
    with torch.inference_mode():
        ppo.act(obs)
        ppo.process_env_step(obs, rewards, torch.tensor([True, False, True]), {})
    assert ppo.storage.rewards[0].squeeze(-1).equal(rewards)


# ============================================================================ 10: reward normalisation
def test_reward_normalization_divides_by_discounted_return_std(kit):
    steps = 6
    obs = kit.make_obs(N)
    ppo = kit.make_ppo(obs, steps, gamma=GAMMA, reward_normalization=True)
    rewards = torch.randn(steps, N) * 3.0 + 1.0
    dones = torch.zeros(steps, N, dtype=torch.bool)
    dones[2, 0] = dones[3, 2] = True
    reference = EmpiricalDiscountedVariationNormalization(gamma=GAMMA)
    with torch.inference_mode():
        for t in range(steps):
            ppo.act(obs)
            ppo.process_env_step(obs, rewards[t].clone(), dones[t], {})
    expected_ref = torch.stack([reference(rewards[t], dones[t]) for t in range(steps)])
    stored = ppo.storage.rewards.squeeze(-1)
    torch.testing.assert_close(stored, expected_ref)

    # independent computation: r_t / (std of every discounted return seen so far + eps), return reset at dones
    disc, seen, expected = np.zeros(N), [], []
    for t in range(steps):
        disc = GAMMA * disc + rewards[t].numpy()
        seen.extend(disc.tolist())
        expected.append(rewards[t].numpy() / (np.std(seen) + 1e-2))
        disc = disc * (1.0 - dones[t].numpy())
    torch.testing.assert_close(stored, torch.tensor(np.array(expected), dtype=torch.float32), atol=1e-5, rtol=1e-5)
    scale = rewards / stored
    assert (scale > 0).all() and not torch.allclose(scale, torch.ones_like(scale))


# ============================================================================ 3: adaptive KL schedule
def _update_with_kl(kit, monkeypatch, kl: float, lr: float, schedule: str = "adaptive", desired_kl: float = 0.25):
    env = kit.FakeEnv(num_envs=4)
    ppo = kit.make_ppo(env.get_observations(), 4, learning_rate=lr, schedule=schedule, desired_kl=desired_kl,
                       num_learning_epochs=1, num_mini_batches=2)
    kit.collect(ppo, env, 4)
    monkeypatch.setattr(ppo.actor, "get_kl_divergence", lambda old, new: torch.full((old[0].shape[0],), kl))
    out = ppo.update()
    assert out["learning_rate"] == ppo.learning_rate
    assert all(g["lr"] == ppo.learning_rate for g in ppo.optimizer.param_groups)
    assert out["kl"] == pytest.approx(kl)
    return ppo.learning_rate


@pytest.mark.parametrize(
    "kl, factor",
    [
        (1.0, 1 / 1.5**2),  # > 2 * desired: divide by 1.5 at each of the 2 mini-batches
        (0.6, 1 / 1.5**2),
        (0.5, 1.0),  # == 2 * desired: unchanged (strict)
        (0.25, 1.0),  # == desired
        (0.125, 1.0),  # == desired / 2: unchanged (strict)
        (0.1, 1.5**2),  # < desired / 2: multiply by 1.5
        (0.0, 1.0),  # exactly zero KL (nothing moved): unchanged, as in rsl_rl
    ],
)
def test_adaptive_schedule(kit, monkeypatch, kl, factor):
    assert _update_with_kl(kit, monkeypatch, kl, 1e-3) == pytest.approx(1e-3 * factor, rel=1e-12)


def test_adaptive_schedule_clamps(kit, monkeypatch):
    assert _update_with_kl(kit, monkeypatch, 0.01, 8e-3) == pytest.approx(1e-2)  # 8e-3 * 1.5 > 1e-2
    assert _update_with_kl(kit, monkeypatch, 5.0, 1.2e-5) == pytest.approx(1e-5)  # 1.2e-5 / 1.5 < 1e-5


@pytest.mark.parametrize("kl", [5.0, 0.01])
def test_fixed_schedule_never_changes_lr(kit, monkeypatch, kl):
    assert _update_with_kl(kit, monkeypatch, kl, 1e-3, schedule="fixed") == 1e-3


def test_unknown_schedule_raises(kit):
    with pytest.raises(ValueError, match="adaptive, fixed"):
        kit.make_ppo(kit.make_obs(N), 2, schedule="linear")


# ============================================================================ 4, 6: value and surrogate losses
def _frozen_rollout(kit, monkeypatch, **ppo_kwargs):
    env = kit.FakeEnv(num_envs=6, done_fn=kit.periodic_dones(6, [3, 0, 2, 0, 4, 5], time_out_envs=(2,)))
    ppo = kit.make_ppo(env.get_observations(), 4, schedule="fixed", num_learning_epochs=2, num_mini_batches=3,
                       clip_param=0.2, **ppo_kwargs)
    kit.collect(ppo, env, 4)
    calls = _freeze_optimizer(ppo, monkeypatch)
    return ppo, calls


@pytest.mark.parametrize("clipped", [True, False])
def test_value_loss_matches_hand_formula(kit, monkeypatch, clipped):
    ppo, calls = _frozen_rollout(kit, monkeypatch, use_clipped_value_loss=clipped)
    with torch.no_grad():  # move the critic so that v - v_old spreads around +-clip
        ppo.critic.mlp[-1].weight.add_(torch.randn_like(ppo.critic.mlp[-1].weight) * 0.1)
    st = ppo.storage
    flat_obs = st.observations.reshape(-1)
    with torch.no_grad():
        v = ppo.critic(flat_obs)
    v_old, ret = st.values.reshape(-1, 1), st.returns.reshape(-1, 1)
    diff = v - v_old
    assert (diff.abs() > 0.2).any() and (diff.abs() < 0.2).any()
    unclipped = (v - ret).square()
    v_clipped = v_old + diff.clamp(-0.2, 0.2)
    hand_clipped = torch.max(unclipped, (v_clipped - ret).square()).mean()
    hand_plain = unclipped.mean()
    assert not torch.isclose(hand_clipped, hand_plain, rtol=1e-3)
    out = ppo.update()
    assert len(calls) == 6
    # equal-size mini-batches over an unchanged model: the mean of the batch losses is the rollout mean
    assert out["value"] == pytest.approx((hand_clipped if clipped else hand_plain).item(), rel=1e-5)


def test_surrogate_and_kl_match_hand_formula_with_clipping(kit, monkeypatch):
    ppo, _ = _frozen_rollout(kit, monkeypatch)
    st = ppo.storage
    old_log_prob = st.actions_log_prob.reshape(-1)
    old_mean, old_std = (p.reshape(-1, p.shape[-1]) for p in st.distribution_params)
    with torch.no_grad():  # move the policy: ratios well outside [1 - eps, 1 + eps] for some transitions
        ppo.actor.mlp[-1].weight.add_(torch.randn_like(ppo.actor.mlp[-1].weight) * 0.5)
        ppo.actor.distribution.std_param.mul_(torch.tensor([0.7, 1.3]))
        ppo.actor(st.observations.reshape(-1), stochastic_output=True)
        new_log_prob = ppo.actor.get_output_log_prob(st.actions.reshape(-1, 2))
        new_mean, new_std = ppo.actor.output_mean, ppo.actor.output_std
    ratio = torch.exp(new_log_prob - old_log_prob)
    assert (ratio > 1.2).any() and (ratio < 0.8).any() and ((ratio - 1).abs() < 0.2).any()
    adv = st.advantages.reshape(-1)
    hand_surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
    hand_unclipped = (-adv * ratio).mean()
    assert not torch.isclose(hand_surrogate, hand_unclipped, rtol=1e-3)
    var_ratio = (old_std / new_std) ** 2
    hand_kl = (0.5 * (var_ratio + ((old_mean - new_mean) / new_std) ** 2 - 1 - torch.log(var_ratio))).sum(-1).mean()
    out = ppo.update()
    assert out["surrogate"] == pytest.approx(hand_surrogate.item(), rel=1e-5, abs=1e-6)
    assert out["kl"] == pytest.approx(hand_kl.item(), rel=1e-5)


def test_first_mini_batch_surrogate_is_minus_mean_advantage(kit, monkeypatch):
    """Ratio 1 at the first mini-batch: surrogate = -mean(A). Advantages kept raw (normaliser patched to identity)
    so the expected value is not trivially 0."""
    import rlcore.algorithms.ppo as ppo_module

    monkeypatch.setattr(ppo_module, "_normalize", lambda x: x)
    env = kit.FakeEnv(num_envs=4, obs_offset=1.0)
    ppo = kit.make_ppo(env.get_observations(), 5, num_learning_epochs=1, num_mini_batches=1,
                       actor_kwargs={"obs_normalization": True})
    kit.collect(ppo, env, 5)
    expected = -ppo.storage.advantages.mean().item()
    assert abs(expected) > 1e-3
    out = ppo.update()
    assert out["surrogate"] == pytest.approx(expected, rel=1e-5)


# ============================================================================ 5: ratio 1 and normalisers
def test_first_ratio_is_one_with_obs_normalization_and_normalizers_update_after(kit, monkeypatch):
    steps, envs = 4, 6
    env = kit.FakeEnv(num_envs=envs, obs_offset=2.0)
    ppo = kit.make_ppo(env.get_observations(), steps, num_learning_epochs=2, num_mini_batches=3,
                       actor_kwargs={"obs_normalization": True}, critic_kwargs={"obs_normalization": True})
    seen = []  # normaliser statistics at every optimiser step
    original_step = ppo.optimizer.step

    def step(*a, **k):
        seen.append((ppo.actor.obs_normalizer.count.item(), ppo.critic.obs_normalizer.count.item(),
                     ppo.actor.obs_normalizer.mean))
        return original_step(*a, **k)

    monkeypatch.setattr(ppo.optimizer, "step", step)
    for iteration in range(2):
        kit.collect(ppo, env, steps)
        counts_before = (ppo.actor.obs_normalizer.count.item(), ppo.critic.obs_normalizer.count.item())
        mean_before = ppo.actor.obs_normalizer.mean
        seen.clear()
        cap = _first_batch_capture(ppo, monkeypatch)
        rollout_policy = ppo.storage.observations["policy"].reshape(-1, 5).clone()
        ppo.update()
        cap["hook"].remove()
        old = cap["batch"].old_actions_log_prob.squeeze(-1)
        torch.testing.assert_close(cap["log_prob"], old, atol=1e-6, rtol=0)
        torch.testing.assert_close(cap["values"], cap["batch"].values, atol=1e-6, rtol=0)
        assert len(seen) == 6
        for a_count, c_count, mean in seen:  # unchanged during the update
            assert (a_count, c_count) == counts_before
            assert torch.equal(mean, mean_before)
        after = (ppo.actor.obs_normalizer.count.item(), ppo.critic.obs_normalizer.count.item())
        assert after == (counts_before[0] + steps * envs, counts_before[1] + steps * envs)
        if iteration == 0:
            torch.testing.assert_close(ppo.actor.obs_normalizer.mean, rollout_policy.mean(0))
            torch.testing.assert_close(ppo.actor.obs_normalizer.var, rollout_policy.var(0, unbiased=False))


# ============================================================================ 8: recurrent PPO
@pytest.mark.parametrize("actor_rnn, critic_rnn", [("gru", "gru"), ("lstm", "lstm"), ("lstm", None)])
def test_recurrent_ppo_replays_hidden_states_exactly(kit, monkeypatch, actor_rnn, critic_rnn):
    steps, envs = 6, 4
    env = kit.FakeEnv(num_envs=envs, done_fn=kit.periodic_dones(envs, [2, 0, 3, 4], time_out_envs=(2,)))
    ppo = kit.make_ppo(env.get_observations(), steps, actor_rnn=actor_rnn, critic_rnn=critic_rnn,
                       num_learning_epochs=2, num_mini_batches=2, actor_kwargs={"obs_normalization": True})
    assert ppo.is_recurrent
    for _ in range(2):  # the second rollout starts from a carried (non-zero) state
        kit.collect(ppo, env, steps)
        st = ppo.storage
        assert st.dones.sum() > 0
        # the state entering the step after a done is the zero state (both models were reset), any other is not
        after_done = st.dones[:-1].squeeze(-1).bool()  # [T-1, N]
        for buffers in (st.saved_hidden_state_a, st.saved_hidden_state_c):
            if buffers is None:  # feed-forward critic
                assert critic_rnn is None
                continue
            for buffer in buffers:  # [T, L, N, H]
                per_env = buffer[1:].permute(0, 2, 1, 3).abs().flatten(2).sum(-1)  # [T-1, N]
                assert (per_env[after_done] == 0).all() and (per_env[~after_done] > 0).all()
        cap = _first_batch_capture(ppo, monkeypatch)
        out = ppo.update()
        cap["hook"].remove()
        batch = cap["batch"]
        assert batch.masks is not None and batch.observations.shape[1] > envs // 2  # several trajectories per env
        assert cap["log_prob"].shape == (steps, envs // 2)
        torch.testing.assert_close(cap["log_prob"], batch.old_actions_log_prob.squeeze(-1), atol=1e-5, rtol=0)
        torch.testing.assert_close(cap["values"], batch.values, atol=1e-5, rtol=0)
        assert all(math.isfinite(v) for v in out.values())


# ============================================================================ 7: shared CNN encoder
def _cnn_cfg(share: bool) -> dict:
    model = {"class_name": "CNNModel", "hidden_dims": [8], "cnn_cfg": {"output_channels": [4], "kernel_size": 3}}
    return {
        "num_steps_per_env": 3,
        "obs_groups": {"actor": ["policy", "height_scan"], "critic": ["policy", "privileged", "height_scan"]},
        "actor": {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": dict(model),
        "algorithm": {"class_name": "PPO", "share_cnn_encoders": share, "num_mini_batches": 1,
                      "num_learning_epochs": 1},
    }


def test_shared_cnn_encoder_is_optimised_once(kit):
    shapes = {"policy": (5,), "privileged": (3,), "height_scan": (1, 6, 6)}
    env = kit.FakeEnv(num_envs=2, shapes=shapes)
    ppo = construct_algorithm(env.get_observations(), env, _cnn_cfg(True), "cpu")
    assert ppo.critic.cnns["height_scan"] is ppo.actor.cnns["height_scan"]
    opt_params = [p for g in ppo.optimizer.param_groups for p in g["params"]]
    ids = [id(p) for p in opt_params]
    assert len(ids) == len(set(ids))
    actor_ids, critic_ids = {id(p) for p in ppo.actor.parameters()}, {id(p) for p in ppo.critic.parameters()}
    cnn_ids = {id(p) for p in ppo.actor.cnns.parameters()}
    assert set(ids) == actor_ids | critic_ids
    assert len(ids) == len(actor_ids) + len(critic_ids) - len(cnn_ids)
    # the encoder learns from both losses and the update runs
    kit.collect(ppo, env, 3)
    before = [p.detach().clone() for p in ppo.actor.cnns.parameters()]
    ppo.update()
    assert any(not torch.equal(b, p) for b, p in zip(before, ppo.actor.cnns.parameters()))

    separate = construct_algorithm(env.get_observations(), env, _cnn_cfg(False), "cpu")
    assert separate.critic.cnns["height_scan"] is not separate.actor.cnns["height_scan"]
    n_separate = sum(len(g["params"]) for g in separate.optimizer.param_groups)
    assert n_separate == len(list(separate.actor.parameters())) + len(list(separate.critic.parameters()))
    assert n_separate == len(ids) + len(cnn_ids)


# ============================================================================ 9: checkpoints
def test_save_load_round_trip(kit):
    env = kit.FakeEnv(num_envs=4)
    kwargs = dict(num_learning_epochs=2, num_mini_batches=2, desired_kl=1e-6, reward_normalization=True,
                  actor_kwargs={"obs_normalization": True})
    ppo = kit.make_ppo(env.get_observations(), 4, **kwargs)
    kit.collect(ppo, env, 4)
    ppo.update()
    assert ppo.learning_rate != 1e-3  # the adaptive schedule moved it
    buffer = io.BytesIO()
    torch.save(ppo.save(), buffer)
    buffer.seek(0)
    state = torch.load(buffer)

    torch.manual_seed(123)
    other = kit.make_ppo(env.get_observations(), 4, **kwargs)
    assert not torch.equal(other.actor.mlp[0].weight, ppo.actor.mlp[0].weight)
    assert other.load(state) is True
    pairs = ((ppo.actor, other.actor), (ppo.critic, other.critic), (ppo.reward_normalizer, other.reward_normalizer))
    for a, b in pairs:
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k
    assert other.learning_rate == ppo.learning_rate
    assert [g["lr"] for g in other.optimizer.param_groups] == [ppo.learning_rate]
    s1, s2 = ppo.optimizer.state_dict()["state"], other.optimizer.state_dict()["state"]
    assert s1.keys() == s2.keys() and len(s1) > 0
    for i in s1:
        for k in s1[i]:
            assert torch.equal(torch.as_tensor(s1[i][k]), torch.as_tensor(s2[i][k])), (i, k)
    # the same gradient step from both gives the same parameters (moments and step counts restored)
    for p1, p2 in zip(ppo._params(), other._params()):
        g = torch.randn_like(p1)
        p1.grad, p2.grad = g, g.clone()
    ppo.optimizer.step()
    other.optimizer.step()
    for p1, p2 in zip(ppo._params(), other._params()):
        assert torch.equal(p1, p2)

    partial = kit.make_ppo(env.get_observations(), 4, **kwargs)
    assert partial.load(state, load_cfg={"optimizer": False}) is False
    assert partial.learning_rate == 1e-3 and len(partial.optimizer.state_dict()["state"]) == 0


def test_load_checkpoint_of_other_model_size_names_the_difference(kit):
    from rlcore.algorithms.distillation import load_model_state

    obs = kit.make_obs(N)
    state = kit.make_ppo(obs, 2).save()
    bigger = kit.make_ppo(obs, 2, actor_kwargs={"hidden_dims": [32]})
    with pytest.raises((RuntimeError, ValueError), match=r"mlp\.0\.weight"):
        bigger.load(state)
    with pytest.raises(ValueError, match=r"shape mismatch mlp\.0\.weight: checkpoint \(16, 5\) vs model \(32, 5\)"):
        load_model_state(bigger.actor, state["actor_state_dict"], "actor")
    deeper = kit.make_model(obs, "actor", 2, stochastic=True, hidden_dims=[16, 16])
    with pytest.raises(ValueError, match=r"missing in checkpoint \['mlp\.4\.bias', 'mlp\.4\.weight'\]"):
        load_model_state(deeper, state["actor_state_dict"], "actor")


# ============================================================================ 11: symmetry and recurrence
def test_symmetry_refuses_recurrent_models_before_using_the_extension(kit, monkeypatch):
    """A stub stands in for rlcore.extensions.symmetry: the check must fire before Symmetry is constructed."""
    stub = types.ModuleType("rlcore.extensions.symmetry")

    class Symmetry:
        def __init__(self, **kwargs):
            raise AssertionError("Symmetry must not be built for a recurrent model")

    stub.Symmetry = Symmetry
    monkeypatch.setitem(sys.modules, "rlcore.extensions.symmetry", stub)
    obs = kit.make_obs(N)
    for actor_rnn, critic_rnn in (("gru", None), (None, "lstm")):
        with pytest.raises(ValueError, match="symmetry.*recurrent"):
            kit.make_ppo(obs, 2, actor_rnn=actor_rnn, critic_rnn=critic_rnn,
                         symmetry_cfg={"use_data_augmentation": True})


def test_ppo_needs_a_stochastic_actor(kit):
    obs = kit.make_obs(N)
    from rlcore.storage import RolloutStorage

    actor = kit.make_model(obs, "actor", 2)
    critic = kit.make_model(obs, "critic", 1)
    with pytest.raises(ValueError, match="distribution_cfg"):
        PPO(actor, critic, RolloutStorage("rl", N, 2, obs, [2]))


# ============================================================================ end to end
def test_pendulum_iteration_through_factory(kit):
    from rlcore_tasks.classic.pendulum import PendulumSwingUp

    env = PendulumSwingUp(num_envs=8, max_episode_length=5, seed=0)
    cfg = {
        "num_steps_per_env": 8,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16], "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16]},
        "algorithm": {"class_name": "PPO", "num_mini_batches": 2, "num_learning_epochs": 2, "gamma": 0.95},
    }
    ppo = construct_algorithm(env.get_observations(), env, cfg, "cpu")
    assert isinstance(ppo, PPO) and ppo.gamma == 0.95
    assert ppo.storage.actions.shape == (8, 8, 1)
    for _ in range(2):
        kit.collect(ppo, env, 8)
        st = ppo.storage
        obs, actions = st.observations.reshape(-1).clone(), st.actions.reshape(-1, 1).clone()
        old_log_prob, adv, ret = (x.reshape(-1).clone() for x in (st.actions_log_prob, st.advantages, st.returns))
        stats = {k: v.clone() for k, v in ppo.actor.state_dict().items() if "normalizer" in k}
        with torch.no_grad():
            value_before = (ppo.critic(obs).squeeze(-1) - ret).square().mean().item()
        out = ppo.update()
        # Each update moved the models the right way on its own rollout (evaluated with the observation
        # statistics it trained under): the clipped surrogate fell below its ratio-1 value, the value loss fell.
        stats_after = {k: v.clone() for k, v in ppo.actor.state_dict().items() if "normalizer" in k}
        ppo.actor.load_state_dict(stats, strict=False)
        with torch.no_grad():
            ppo.actor(obs, stochastic_output=True)
            ratio = torch.exp(ppo.actor.get_output_log_prob(actions) - old_log_prob)
            surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean().item()
            value_after = (ppo.critic(obs).squeeze(-1) - ret).square().mean().item()
        ppo.actor.load_state_dict(stats_after, strict=False)
        assert surrogate < -adv.mean().item() - 1e-4 and value_after < value_before
    assert set(out) == {"value", "surrogate", "entropy", "kl", "learning_rate"}
    assert all(math.isfinite(v) for v in out.values())
    assert ppo.actor.obs_normalizer.count.item() == 2 * 8 * 8


def test_bf16_autocast_update_matches_float32_losses(kit):
    """bf16 autocast changes precision, not the maths: the losses of one update agree with float32's."""
    results = []
    for use_bf16 in (False, True):
        torch.manual_seed(0)
        env = kit.FakeEnv(num_envs=8, seed=0)
        ppo = kit.make_ppo(env.get_observations(), num_steps=6, use_bf16=use_bf16, num_learning_epochs=1,
                           num_mini_batches=2, schedule="fixed")
        torch.manual_seed(1)
        kit.collect(ppo, env, 6)
        torch.manual_seed(2)
        results.append(ppo.update())
    fp32, bf16 = results
    assert bf16["value"] == pytest.approx(fp32["value"], rel=0.05)
    assert bf16["entropy"] == pytest.approx(fp32["entropy"], rel=0.05)
    assert abs(bf16["surrogate"] - fp32["surrogate"]) < 0.05
