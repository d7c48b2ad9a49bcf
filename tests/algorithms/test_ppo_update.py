"""PPO's parameter update checked against autograd of the hand-written loss, on a frozen, scripted mini-batch.

Inside ``PPO.update()`` we record every mini-batch and, at ``optimizer.step``, the gradients the optimiser is about
to apply. ``optimizer.step`` is a no-op (the models stay frozen) unless a test says otherwise, so the hand-written

    loss = surrogate + C_V * value - C_E * entropy

evaluated on the recorded mini-batch with the same models must give the same gradients. The coefficients are
distinct and non-zero, the policy and critic are moved away from the rollout's so that the ratio clip and the
value clip are active for some samples, and each test first checks that the likely mistakes (a flipped sign, a
dropped clip or coefficient) would change its expected value, so the comparison can fail.
"""

from __future__ import annotations

import types

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from rlcore.algorithms import PPO

C_V, C_E, CLIP = 0.7, 0.3, 0.2
NUM_ENVS, STEPS = 8, 8
LR = 1e-3


# ============================================================================ helpers
def _ppo(kit, **kwargs) -> PPO:
    """A PPO with one rollout of ``STEPS`` x ``NUM_ENVS`` collected (terminals and a time-out included)."""
    env = kit.FakeEnv(num_envs=NUM_ENVS,
                      done_fn=kit.periodic_dones(NUM_ENVS, [3, 0, 2, 0, 4, 5, 0, 7], time_out_envs=(2,)))
    settings = {"num_learning_epochs": 1, "num_mini_batches": 1, "clip_param": CLIP, "value_loss_coef": C_V,
                    "entropy_coef": C_E, "schedule": "fixed", "max_grad_norm": 1e9, "learning_rate": LR}
    settings.update(kwargs)
    ppo = kit.make_ppo(env.get_observations(), STEPS, **settings)
    kit.collect(ppo, env, STEPS)
    return ppo


def _move_models(ppo: PPO, actor_scale: float = 0.5, critic_scale: float = 0.3) -> None:
    """Move actor mean, std and critic away from the rollout's: ratios leave [1 - eps, 1 + eps], values the clip."""
    with torch.no_grad():
        ppo.actor.mlp[-1].weight.add_(torch.randn_like(ppo.actor.mlp[-1].weight) * actor_scale)
        ppo.actor.distribution.std_param.mul_(torch.tensor([0.7, 1.3]))
        ppo.critic.mlp[-1].weight.add_(torch.randn_like(ppo.critic.mlp[-1].weight) * critic_scale)


def _params(ppo: PPO) -> list[torch.nn.Parameter]:
    return [p for group in ppo.optimizer.param_groups for p in group["params"]]


def _record(ppo: PPO, monkeypatch, step: bool = False) -> types.SimpleNamespace:
    """Record the mini-batches of the next update and the gradients present at each ``optimizer.step``.

    With ``step=False`` the step itself is skipped, so every mini-batch sees the models as they are now.
    """
    rec = types.SimpleNamespace(batches=[], grads=[])
    params = _params(ppo)
    generator = ppo.storage.mini_batch_generator

    def batches(*args, **kwargs):
        for batch in generator(*args, **kwargs):
            rec.batches.append(batch)
            yield batch

    real_step = ppo.optimizer.step

    def optimizer_step(*args, **kwargs):
        rec.grads.append([torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params])
        if step:
            return real_step(*args, **kwargs)
        return None

    monkeypatch.setattr(ppo.storage, "mini_batch_generator", batches)
    monkeypatch.setattr(ppo.optimizer, "step", optimizer_step)
    return rec


def _policy(ppo: PPO, obs) -> Normal:
    """The actor's Gaussian on ``obs``: mean from the deterministic forward, std from the scalar std parameter."""
    return Normal(ppo.actor(obs), ppo.actor.distribution.std_param)


def hand_loss(ppo: PPO, batch, c_v: float = C_V, c_e: float = C_E, clip_ratio: bool = True, clip_value: bool = True,
              advantages: torch.Tensor | None = None, surrogate_sign: float = 1.0) -> torch.Tensor:
    """``surrogate + c_v * value - c_e * entropy`` on ``batch``, written out (switches let tests make it wrong)."""
    dist = _policy(ppo, batch.observations)
    log_prob = dist.log_prob(batch.actions).sum(-1)
    entropy = dist.entropy().sum(-1)
    ratio = torch.exp(log_prob - batch.old_actions_log_prob.squeeze(-1))
    adv = (batch.advantages if advantages is None else advantages).squeeze(-1)
    surrogate = -adv * ratio
    if clip_ratio:
        surrogate = torch.max(surrogate, -adv * torch.clamp(ratio, 1.0 - CLIP, 1.0 + CLIP))
    values, old_values, returns = ppo.critic(batch.observations), batch.values, batch.returns
    value_loss = (values - returns) ** 2
    if clip_value:
        clipped = old_values + torch.clamp(values - old_values, -CLIP, CLIP)
        value_loss = torch.max(value_loss, (clipped - returns) ** 2)
    return surrogate_sign * surrogate.mean() + c_v * value_loss.mean() - c_e * entropy.mean()


def hand_grads(ppo: PPO, loss: torch.Tensor) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, _params(ppo), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(_params(ppo), grads)]


def flat(grads: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in grads])


def assert_grads_equal(got: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    torch.testing.assert_close(flat(got), flat(expected), rtol=1e-4, atol=1e-6)


def assert_grads_differ(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    """The test can tell ``a`` from ``b``: they differ by far more than its tolerance."""
    assert (flat(a) - flat(b)).norm() > 1e-2 * flat(b).norm()


def _model_norm(ppo: PPO, grads: list[torch.Tensor], model: torch.nn.Module) -> torch.Tensor:
    ids = {id(p) for p in model.parameters()}
    return flat([g for p, g in zip(_params(ppo), grads) if id(p) in ids]).norm()


# ============================================================================ the loss and its gradient
def test_gradients_match_the_hand_written_loss(kit, monkeypatch):
    """Two mini-batches of a frozen model: each applied gradient is autograd of the hand-written loss."""
    ppo = _ppo(kit, num_mini_batches=2)
    _move_models(ppo)
    rec = _record(ppo, monkeypatch)
    out = ppo.update()
    assert len(rec.batches) == len(rec.grads) == 2

    for batch, got in zip(rec.batches, rec.grads):
        expected = hand_grads(ppo, hand_loss(ppo, batch))
        # The scripted batch exercises every branch: each likely mistake changes the expected gradient.
        with torch.no_grad():
            ratio = torch.exp(_policy(ppo, batch.observations).log_prob(batch.actions).sum(-1)
                              - batch.old_actions_log_prob.squeeze(-1))
            adv = batch.advantages.squeeze(-1)
            dv = ppo.critic(batch.observations) - batch.values
        assert ((ratio > 1 + CLIP) & (adv > 0)).any() and ((ratio < 1 - CLIP) & (adv < 0)).any()
        assert (dv.abs() > CLIP).any() and (dv.abs() < CLIP).any()
        for wrong in ({"surrogate_sign": -1.0}, {"c_e": -C_E}, {"c_v": 1.0}, {"clip_ratio": False},
                      {"clip_value": False}, {"c_e": 0.0}):
            assert_grads_differ(hand_grads(ppo, hand_loss(ppo, batch, **wrong)), expected)
        assert_grads_equal(got, expected)

    # The reported losses are the batch means of the same terms.
    with torch.no_grad():
        entropies = [_policy(ppo, b.observations).entropy().sum(-1).mean() for b in rec.batches]
    assert out["entropy"] == pytest.approx(torch.stack(entropies).mean().item(), rel=1e-5)


def test_old_log_prob_comes_from_the_rollout(kit, monkeypatch):
    """The ratio's denominator is the rollout's log-probability, a constant: with the policy moved, the gradient
    of a ratio built on the current log-probability (ratio 1) would differ."""
    ppo = _ppo(kit)
    _move_models(ppo)
    rec = _record(ppo, monkeypatch)
    ppo.update()
    batch = rec.batches[0]
    with torch.no_grad():
        current = _policy(ppo, batch.observations).log_prob(batch.actions).sum(-1, keepdim=True)
    assert (current - batch.old_actions_log_prob).abs().max() > 0.1
    fake = types.SimpleNamespace(**{**vars(batch), "old_actions_log_prob": current})
    assert_grads_differ(hand_grads(ppo, hand_loss(ppo, fake)), hand_grads(ppo, hand_loss(ppo, batch)))
    assert_grads_equal(rec.grads[0], hand_grads(ppo, hand_loss(ppo, batch)))


def test_applied_step_is_minus_lr_times_the_gradient(kit, monkeypatch):
    """With SGD the parameters move by exactly ``-lr * grad`` of the hand-written loss (one mini-batch)."""
    ppo = _ppo(kit, optimizer="sgd", learning_rate=0.05)
    _move_models(ppo)
    rec = _record(ppo, monkeypatch, step=True)
    before = [p.detach().clone() for p in _params(ppo)]
    ppo.update()
    batch = rec.batches[0]
    after = [p.detach().clone() for p in _params(ppo)]
    with torch.no_grad():  # back to the pre-step models for the hand gradient
        for p, b in zip(_params(ppo), before):
            p.copy_(b)
    expected = hand_grads(ppo, hand_loss(ppo, batch))
    moved = [a - b for a, b in zip(after, before)]
    torch.testing.assert_close(flat(moved), -0.05 * flat(expected), rtol=1e-4, atol=1e-7)
    assert flat(moved).abs().max() > 1e-3


# ============================================================================ gradient clipping
def test_gradient_norm_is_clipped_per_model_by_default(kit, monkeypatch):
    """rsl_rl 5.5.1 clips actor and critic separately: each model's applied gradient has norm max_grad_norm,
    pointing the way of its own unclipped gradient."""
    bound = 1e-3
    ppo = _ppo(kit, max_grad_norm=bound)
    _move_models(ppo)
    rec = _record(ppo, monkeypatch)
    ppo.update()
    expected = hand_grads(ppo, hand_loss(ppo, rec.batches[0]))
    got = rec.grads[0]
    actor_norm, critic_norm = (_model_norm(ppo, expected, m) for m in (ppo.actor, ppo.critic))
    assert actor_norm > 100 * bound and critic_norm > 100 * bound
    assert abs(actor_norm / critic_norm - 1) > 0.1  # a joint clip would give other norms
    for model, norm in ((ppo.actor, actor_norm), (ppo.critic, critic_norm)):
        assert _model_norm(ppo, got, model).item() == pytest.approx(bound, rel=1e-4)
        ids = {id(p) for p in model.parameters()}
        scaled = [g * (bound / norm) for p, g in zip(_params(ppo), expected) if id(p) in ids]
        applied = [g for p, g in zip(_params(ppo), got) if id(p) in ids]
        torch.testing.assert_close(flat(applied), flat(scaled), rtol=1e-3, atol=1e-9)


def test_gradient_norm_is_clipped_jointly_on_request(kit, monkeypatch):
    """``clip_gradients_jointly=True``: one clip over actor and critic together (norm of the whole = bound)."""
    bound = 1e-3
    ppo = _ppo(kit, max_grad_norm=bound, clip_gradients_jointly=True)
    _move_models(ppo)
    rec = _record(ppo, monkeypatch)
    ppo.update()
    expected = hand_grads(ppo, hand_loss(ppo, rec.batches[0]))
    total = flat(expected).norm()
    assert total > 100 * bound
    assert flat(rec.grads[0]).norm().item() == pytest.approx(bound, rel=1e-4)
    torch.testing.assert_close(flat(rec.grads[0]), flat(expected) * (bound / total), rtol=1e-3, atol=1e-9)


# ============================================================================ advantage normalisation
def _advantages_seen(ppo: PPO, monkeypatch) -> list[torch.Tensor]:
    """The advantages the surrogate uses, read off its gradient: at ratio 1 (unclipped),
    ``d surrogate / d log_prob_i = -A_i / b``. Needs an unmoved policy and a frozen optimiser."""
    seen: list[torch.Tensor] = []
    original = ppo.actor.get_output_log_prob

    def log_prob(actions):
        out = original(actions)
        if out.requires_grad:
            b = out.shape[0]
            out.register_hook(lambda g: seen.append(-g.detach().clone() * b))
        return out

    monkeypatch.setattr(ppo.actor, "get_output_log_prob", log_prob)
    return seen


def test_per_mini_batch_advantages_have_mean_0_and_std_1(kit, monkeypatch):
    ppo = _ppo(kit, num_mini_batches=2, normalize_advantage_per_mini_batch=True)
    with torch.no_grad():  # scripted raw advantages, far from normalised
        ppo.storage.advantages.mul_(3.0).add_(10.0)
    seen = _advantages_seen(ppo, monkeypatch)
    rec = _record(ppo, monkeypatch)
    ppo.update()
    assert len(seen) == len(rec.batches) == 2
    for batch, adv in zip(rec.batches, seen):
        raw = batch.advantages.squeeze(-1)
        assert abs(raw.mean().item()) > 1.0 and abs(raw.std().item() - 1.0) > 0.5
        assert adv.mean().item() == pytest.approx(0.0, abs=1e-5)
        assert adv.std().item() == pytest.approx(1.0, abs=1e-4)
        torch.testing.assert_close(adv, (raw - raw.mean()) / raw.std(), rtol=1e-4, atol=1e-5)


def test_rollout_normalised_advantages_are_used_as_stored(kit, monkeypatch):
    """Without per-mini-batch normalisation the rollout-wide normalised advantages go to the loss unchanged."""
    ppo = _ppo(kit, num_mini_batches=2)
    seen = _advantages_seen(ppo, monkeypatch)
    rec = _record(ppo, monkeypatch)
    ppo.update()
    for batch, adv in zip(rec.batches, seen):
        torch.testing.assert_close(adv, batch.advantages.squeeze(-1), rtol=1e-4, atol=1e-5)
        assert abs(adv.mean().item()) > 1e-3  # a half of the rollout is not itself normalised


# ============================================================================ adaptive learning rate
def _kl_after_move(kit, monkeypatch, scale: float, lr: float = LR, desired_kl: float = 0.01):
    """One update with the real KL of a moved policy (frozen optimiser); returns (hand KL, reported KL, new lr)."""
    ppo = _ppo(kit, schedule="adaptive", desired_kl=desired_kl, learning_rate=lr)
    with torch.no_grad():
        ppo.actor.mlp[-1].weight.add_(torch.randn_like(ppo.actor.mlp[-1].weight) * scale)
    rec = _record(ppo, monkeypatch)
    out = ppo.update()
    batch = rec.batches[0]
    old_mean, old_std = batch.old_distribution_params
    with torch.no_grad():
        kl = kl_divergence(Normal(old_mean, old_std), _policy(ppo, batch.observations)).sum(-1).mean().item()
    assert all(g["lr"] == ppo.learning_rate for g in ppo.optimizer.param_groups)
    return kl, out["kl"], ppo.learning_rate


@pytest.mark.parametrize("scale, factor", [(0.3, 1 / 1.5), (0.01, 1.5)], ids=["kl_above_2x_target", "kl_below_half"])
def test_adaptive_learning_rate_follows_the_real_kl(kit, monkeypatch, scale, factor):
    kl, reported, lr = _kl_after_move(kit, monkeypatch, scale)
    assert reported == pytest.approx(kl, rel=1e-4)
    assert (kl > 0.02) if factor < 1 else (0 < kl < 0.005)
    assert lr == pytest.approx(LR * factor, rel=1e-12)


def test_adaptive_learning_rate_stays_within_its_bounds(kit, monkeypatch):
    _, _, lr = _kl_after_move(kit, monkeypatch, 0.01, lr=9e-3)
    assert lr == pytest.approx(1e-2)
    _, _, lr = _kl_after_move(kit, monkeypatch, 0.3, lr=1.2e-5)
    assert lr == pytest.approx(1e-5)
