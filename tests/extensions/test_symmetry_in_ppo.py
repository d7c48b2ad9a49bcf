"""Symmetry inside PPO: the loss PPO differentiates is the hand-written one over [batch; mirrored batch] plus
``mirror_loss_coeff`` x the mirror loss, and the adaptive learning rate reads the KL of the original block only.

A frozen, scripted rollout (one epoch, one mini-batch, ``optimizer.step`` a no-op that records the gradients),
a policy moved away from the rollout's (ratios outside the clip) and a toy mirror:
``policy [4]`` flips entries 1 and 3, ``privileged [2]`` entry 0, the action ``[2]`` entry 1.
"""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from torch.distributions import Normal, kl_divergence

from rlcore.algorithms import PPO
from rlcore.models import MLPModel
from rlcore.storage import RolloutStorage

N, T, CLIP, C_V, C_E = 8, 4, 0.2, 0.7, 0.3
SIGNS = {"policy": torch.tensor([1.0, -1.0, 1.0, -1.0]), "privileged": torch.tensor([-1.0, 1.0])}
ACT_SIGN = torch.tensor([1.0, -1.0])
GROUPS = {"actor": ["policy"], "critic": ["policy", "privileged"]}


def mirror_obs(obs: TensorDict) -> TensorDict:
    return TensorDict({k: obs[k] * s for k, s in SIGNS.items()}, batch_size=obs.batch_size)


def mirror(env=None, obs=None, actions=None):
    """rsl_rl-style augmentation: ``[original, mirrored]`` along the batch dimension."""
    obs_aug = None if obs is None else torch.cat([obs, mirror_obs(obs)])
    actions_aug = None if actions is None else torch.cat([actions, actions * ACT_SIGN])
    return obs_aug, actions_aug


def _obs(n: int = N) -> TensorDict:
    return TensorDict({k: torch.randn(n, s.numel()) for k, s in SIGNS.items()}, batch_size=[n])


def _ppo(coeff: float = 0.5, augmentation: bool = True, mirror_loss: bool = True, seed: int = 0, **kwargs) -> PPO:
    """PPO with the symmetry extension and one collected, scripted rollout; the policy is then moved."""
    torch.manual_seed(seed)
    obs = _obs()
    actor = MLPModel(obs, GROUPS, "actor", 2, hidden_dims=[16], init_gains=[2**0.5, 1.0],
                     distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0})
    critic = MLPModel(obs, GROUPS, "critic", 1, hidden_dims=[16], init_gains=[2**0.5, 1.0])
    settings = {"num_learning_epochs": 1, "num_mini_batches": 1, "clip_param": CLIP, "value_loss_coef": C_V,
                    "entropy_coef": C_E, "schedule": "fixed", "max_grad_norm": 1e9}
    settings.update(kwargs)
    sym = {"use_data_augmentation": augmentation, "use_mirror_loss": mirror_loss, "mirror_loss_coeff": coeff,
           "data_augmentation_func": mirror}
    ppo = PPO(actor, critic, RolloutStorage("rl", N, T, obs, [2]), symmetry_cfg=sym, **settings)
    with torch.inference_mode():
        for _ in range(T):
            ppo.act(obs)
            obs = _obs()
            ppo.process_env_step(obs, torch.randn(N), torch.zeros(N, dtype=torch.bool), {})
        ppo.compute_returns(obs)
    with torch.no_grad():
        ppo.actor.mlp[-1].weight.add_(0.5 * torch.randn_like(ppo.actor.mlp[-1].weight))
        ppo.actor.distribution.std_param.mul_(torch.tensor([0.7, 1.3]))
    return ppo


def _params(ppo: PPO) -> list[torch.nn.Parameter]:
    return [p for group in ppo.optimizer.param_groups for p in group["params"]]


def _update(ppo: PPO, monkeypatch) -> types.SimpleNamespace:
    """``ppo.update()`` with a no-op optimiser step; returns its output, the mini-batch and the gradients."""
    rec = types.SimpleNamespace(batches=[], grads=[])
    generator = ppo.storage.mini_batch_generator

    def batches(*args, **kwargs):
        for batch in generator(*args, **kwargs):
            rec.batches.append(batch)
            yield batch

    def step(*args, **kwargs):
        rec.grads.append(torch.cat([torch.zeros(p.numel()) if p.grad is None else p.grad.reshape(-1).clone()
                                    for p in _params(ppo)]))

    monkeypatch.setattr(ppo.storage, "mini_batch_generator", batches)
    monkeypatch.setattr(ppo.optimizer, "step", step)
    rec.out = ppo.update()
    assert len(rec.batches) == len(rec.grads) == 1
    rec.batch, rec.grad = rec.batches[0], rec.grads[0]
    return rec


def hand_ppo_loss(ppo: PPO, batch, augment: bool = True, mirror_labels: bool = True) -> torch.Tensor:
    """Surrogate + C_V value - C_E entropy over ``[batch; mirrored batch]`` (rollout terms repeated)."""
    obs, actions = batch.observations, batch.actions
    repeat = 1
    if augment:
        obs = torch.cat([obs, mirror_obs(obs)])
        actions = torch.cat([actions, actions * ACT_SIGN if mirror_labels else actions])
        repeat = 2
    old_log_prob, adv, old_values, returns = (
        x.repeat(repeat, 1) for x in (batch.old_actions_log_prob, batch.advantages, batch.values, batch.returns))
    dist = Normal(ppo.actor(obs), ppo.actor.distribution.std_param)
    ratio = torch.exp(dist.log_prob(actions).sum(-1) - old_log_prob.squeeze(-1))
    adv = adv.squeeze(-1)
    surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
    values = ppo.critic(obs)
    clipped = old_values + (values - old_values).clamp(-CLIP, CLIP)
    value = torch.max((values - returns) ** 2, (clipped - returns) ** 2).mean()
    return surrogate + C_V * value - C_E * dist.entropy().sum(-1).mean()


def hand_mirror_loss(ppo: PPO, batch) -> torch.Tensor:
    """``MSE(mu(mirror(o)), mirror(mu(o)).detach())``."""
    obs = batch.observations
    return F.mse_loss(ppo.actor(mirror_obs(obs)), (ppo.actor(obs) * ACT_SIGN).detach())


def grad(ppo: PPO, loss: torch.Tensor) -> torch.Tensor:
    grads = torch.autograd.grad(loss, _params(ppo), allow_unused=True)
    return torch.cat([torch.zeros(p.numel()) if g is None else g.reshape(-1) for p, g in zip(_params(ppo), grads)])


def assert_differ(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a - b).norm() > 1e-2 * b.norm()


def test_loss_is_the_augmented_ppo_loss_plus_coeff_times_mirror_loss(monkeypatch):
    coeff = 0.5
    ppo = _ppo(coeff)
    rec = _update(ppo, monkeypatch)
    batch = rec.batch
    expected = grad(ppo, hand_ppo_loss(ppo, batch) + coeff * hand_mirror_loss(ppo, batch))
    # the likely mistakes each change the gradient: the mirror term dropped, labels not mirrored, no augmentation
    assert_differ(grad(ppo, hand_ppo_loss(ppo, batch)), expected)
    assert_differ(grad(ppo, hand_ppo_loss(ppo, batch, mirror_labels=False) + coeff * hand_mirror_loss(ppo, batch)),
                  expected)
    assert_differ(grad(ppo, hand_ppo_loss(ppo, batch, augment=False) + coeff * hand_mirror_loss(ppo, batch)),
                  expected)
    torch.testing.assert_close(rec.grad, expected, rtol=1e-4, atol=1e-6)
    assert rec.out["symmetry"] == pytest.approx(hand_mirror_loss(ppo, batch).item(), rel=1e-5)


def test_augmentation_only_and_mirror_loss_only(monkeypatch):
    ppo = _ppo(augmentation=True, mirror_loss=False)
    rec = _update(ppo, monkeypatch)
    torch.testing.assert_close(rec.grad, grad(ppo, hand_ppo_loss(ppo, rec.batch)), rtol=1e-4, atol=1e-6)
    assert "symmetry" not in rec.out

    ppo = _ppo(coeff=0.8, augmentation=False, mirror_loss=True)
    rec = _update(ppo, monkeypatch)
    expected = grad(ppo, hand_ppo_loss(ppo, rec.batch, augment=False) + 0.8 * hand_mirror_loss(ppo, rec.batch))
    torch.testing.assert_close(rec.grad, expected, rtol=1e-4, atol=1e-6)


def test_gradient_moves_with_the_mirror_loss_coefficient(monkeypatch):
    """Same rollout, coefficients 0.5 and 2.0: the gradients differ by exactly 1.5 x grad(mirror loss)."""
    low = _update(_ppo(coeff=0.5, seed=3), monkeypatch)
    ppo = _ppo(coeff=2.0, seed=3)
    high = _update(ppo, monkeypatch)
    mirror_grad = grad(ppo, hand_mirror_loss(ppo, high.batch))
    assert mirror_grad.norm() > 1e-2 * high.grad.norm()
    torch.testing.assert_close(high.grad - low.grad, 1.5 * mirror_grad, rtol=1e-3, atol=1e-5)


def test_kl_of_the_adaptive_schedule_is_taken_on_the_original_block(monkeypatch):
    ppo = _ppo(schedule="adaptive", desired_kl=0.01)
    rec = _update(ppo, monkeypatch)
    batch = rec.batch
    old_mean, old_std = batch.old_distribution_params
    with torch.no_grad():
        new = Normal(ppo.actor(batch.observations), ppo.actor.distribution.std_param)
        kl = kl_divergence(Normal(old_mean, old_std), new).sum(-1).mean().item()
        mirrored = Normal(ppo.actor(mirror_obs(batch.observations)), ppo.actor.distribution.std_param)
        kl_mirrored = kl_divergence(Normal(old_mean, old_std), mirrored).sum(-1).mean().item()
    assert abs(kl_mirrored - kl) > 0.05 * kl  # a KL over [batch; mirrored] would differ
    assert rec.out["kl"] == pytest.approx(kl, rel=1e-4)
    assert kl > 0.02 and ppo.learning_rate == pytest.approx(1e-3 / 1.5)
