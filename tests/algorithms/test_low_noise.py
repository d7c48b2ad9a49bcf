"""PPO with its exploration schedule (rlcore.extensions.exploration, ``exploration_cfg``): the per-env exploration
scale (``low_noise_fraction``, ``low_noise_std_scale``, ``low_noise_start``) and the std ceiling (``std_max_schedule``).

Env ``i`` acts with ``N(mu(s), (k_i sigma)^2)``: ``k = low_noise_std_scale`` in the last ``round(fraction * N)`` envs,
1 elsewhere. Checked: the sampled spread per env, the stored log-probabilities (``torch.distributions.Normal`` with
the env's std), the stored distribution parameters (the policy's own), the update's gradient against a hand-written
loss with per-sample std, the KL of the adaptive schedule (the policy's own), the recurrent mini-batches, symmetry's
augmentation, the configuration errors, and the iteration schedule of both.
"""

from __future__ import annotations

import types

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from rlcore.errors import ConfigError
from rlcore.extensions.exploration import LEGACY_KEYS, ExplorationSchedule

N, T, K = 16, 64, 0.25
CLIP = 0.2


def _ppo(kit, steps: int = T, **kwargs):
    env = kit.FakeEnv(num_envs=N, done_fn=kit.periodic_dones(N, [5, 0, 3, 7] * 4, time_out_envs=(3,)))
    settings = {"num_learning_epochs": 1, "num_mini_batches": 1, "clip_param": CLIP, "schedule": "fixed",
                "max_grad_norm": 1e9, "entropy_coef": 0.3, "value_loss_coef": 0.7}
    exploration = {"low_noise_fraction": 0.25, "low_noise_std_scale": K}
    for key, value in kwargs.items():
        (exploration if key in LEGACY_KEYS else settings)[key] = value
    ppo = kit.make_ppo(env.get_observations(), steps, extensions=[ExplorationSchedule(**exploration)], **settings)
    kit.collect(ppo, env, steps)
    return ppo


def _schedule(ppo) -> ExplorationSchedule:
    return next(ext for ext in ppo.extensions if isinstance(ext, ExplorationSchedule))


def _scales() -> torch.Tensor:
    return torch.tensor([1.0] * 12 + [K] * 4)


def test_the_last_envs_sample_with_the_scaled_std_and_store_its_log_prob(kit):
    ppo = _ppo(kit)
    st = ppo.storage
    mean, std = st.distribution_params
    sigma = ppo.actor.distribution.std_param.detach()
    # The stored parameters are the policy's own (no scale): the KL of the schedule compares policies.
    torch.testing.assert_close(std, sigma.expand_as(std))
    torch.testing.assert_close(st.noise_scale[..., 0], _scales().expand(T, N))
    # Spread of the sampled actions about the mean, per env, in units of the policy's std: k.
    spread = ((st.actions - mean) / std).square().mean(dim=(0, 2)).sqrt()
    assert spread[:12].min() > 0.8 and spread[:12].max() < 1.25
    assert spread[12:].min() > 0.8 * K and spread[12:].max() < 1.25 * K
    # log pi_old(a|s) under N(mean, k sigma).
    expected = Normal(mean, std * _scales().view(1, N, 1)).log_prob(st.actions).sum(-1, keepdim=True)
    torch.testing.assert_close(st.actions_log_prob, expected)
    wrong = Normal(mean, std).log_prob(st.actions).sum(-1, keepdim=True)
    assert (wrong - expected)[:, 12:].abs().max() > 1.0


def _hand_loss(ppo, batch, scaled: bool = True):
    """surrogate + c_v value - c_e entropy with log pi under the sample's std (``scaled=False``: the policy's)."""
    mean, sigma = ppo.actor(batch.observations), ppo.actor.distribution.std_param
    k = batch.noise_scale if scaled else torch.ones_like(batch.noise_scale)
    log_prob = Normal(mean, sigma * k).log_prob(batch.actions).sum(-1)
    entropy = Normal(mean, sigma).entropy().sum(-1)
    ratio = torch.exp(log_prob - batch.old_actions_log_prob.squeeze(-1))
    adv = batch.advantages.squeeze(-1)
    surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
    values = ppo.critic(batch.observations)
    clipped = batch.values + (values - batch.values).clamp(-CLIP, CLIP)
    value = torch.max((values - batch.returns).square(), (clipped - batch.returns).square()).mean()
    return surrogate + 0.7 * value - 0.3 * entropy.mean()


def test_update_gradient_uses_each_samples_std(kit, monkeypatch):
    ppo = _ppo(kit, steps=8)
    with torch.no_grad():  # move the policy so that ratios leave 1 and the clip is active
        ppo.actor.mlp[-1].weight.add_(torch.randn_like(ppo.actor.mlp[-1].weight) * 0.3)
        ppo.actor.distribution.std_param.mul_(torch.tensor([0.8, 1.2]))
    params = [p for g in ppo.optimizer.param_groups for p in g["params"]]
    rec = types.SimpleNamespace(batch=None, grads=None)
    generator = ppo.storage.mini_batch_generator

    def batches(*args, **kwargs):
        for b in generator(*args, **kwargs):
            rec.batch = b
            yield b

    def step(*args, **kwargs):
        rec.grads = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params]

    monkeypatch.setattr(ppo.storage, "mini_batch_generator", batches)
    monkeypatch.setattr(ppo.optimizer, "step", step)
    out = ppo.update()
    batch = rec.batch
    assert batch.noise_scale.shape == (8 * N, 1) and set(batch.noise_scale.unique().tolist()) == {K, 1.0}

    def grads(loss):
        g = torch.autograd.grad(loss, params, allow_unused=True)
        return torch.cat([(torch.zeros_like(p) if x is None else x).reshape(-1) for p, x in zip(params, g)])

    got = torch.cat([g.reshape(-1) for g in rec.grads])
    expected = grads(_hand_loss(ppo, batch))
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    assert (grads(_hand_loss(ppo, batch, scaled=False)) - expected).norm() > 1e-2 * expected.norm()
    # The logged KL is the policy's own: KL(N(mu_old, sigma_old) || N(mu, sigma)), no per-env scale.
    old_mean, old_std = batch.old_distribution_params
    with torch.no_grad():
        new = Normal(ppo.actor(batch.observations), ppo.actor.distribution.std_param)
        kl = kl_divergence(Normal(old_mean, old_std), new).sum(-1).mean()
        k = batch.noise_scale
        kl_scaled = kl_divergence(Normal(old_mean, old_std * k), Normal(new.mean, new.stddev * k)).sum(-1).mean()
    assert out["kl"] == pytest.approx(kl.item(), rel=1e-5)
    assert kl_scaled.item() > 1.5 * kl.item()


def test_first_ratio_is_one_in_recurrent_and_feed_forward_mini_batches(kit):
    """Before any step the recomputed log pi equals the stored one in every env (ratio 1), only if the update
    scales the std per sample as the rollout did; recurrent mini-batches carry ``noise_scale`` as ``[T, n, 1]``."""
    for actor_rnn in (None, "gru"):
        ppo = _ppo(kit, steps=8, actor_rnn=actor_rnn, num_mini_batches=2)
        gen = ppo._mini_batches()
        batch = next(gen)
        expected_shape = (8, N // 2, 1) if actor_rnn else (8 * N // 2, 1)
        assert batch.noise_scale.shape == expected_shape
        with torch.no_grad():
            log_prob, _, _, _ = ppo._evaluate(batch)
        old = batch.old_actions_log_prob.squeeze(-1)
        torch.testing.assert_close(log_prob, old, rtol=1e-5, atol=1e-5)
        unscaled = types.SimpleNamespace(**{**vars(batch), "noise_scale": None})
        with torch.no_grad():
            wrong, _, _, _ = ppo._evaluate(unscaled)
        assert (wrong - old).abs().max() > 1.0


def test_symmetry_augmentation_repeats_the_noise_scale(kit):
    from rlcore.extensions.symmetry import Symmetry

    ppo = _ppo(kit, steps=8)
    batch = next(ppo._mini_batches())

    def mirror(obs=None, actions=None, env=None):
        return (None if obs is None else torch.cat([obs, obs]), None if actions is None else torch.cat([actions, -actions]))

    ext = Symmetry(use_data_augmentation=True, data_augmentation_func=mirror)
    aug = ext.augment_mini_batch(batch)
    assert aug.noise_scale.shape[0] == 2 * batch.noise_scale.shape[0]
    torch.testing.assert_close(aug.noise_scale, batch.noise_scale.repeat(2, 1))


@pytest.mark.parametrize("kwargs, message", [
    ({"low_noise_fraction": 1.5}, "low_noise_fraction must be in [0, 1]"),
    ({"low_noise_std_scale": 0.0}, "low_noise_std_scale must be in (0, 1]"),
    ({"actor_kwargs": {"distribution_cfg": {"class_name": "BetaDistribution"}}}, "BetaDistribution"),
    ({"low_noise_fraction": 0.0, "std_max_schedule": [[1, 0.1]],
      "actor_kwargs": {"distribution_cfg": {"class_name": "BetaDistribution"}}},
     "std_max_schedule needs a Gaussian action distribution; the actor's is BetaDistribution"),
])
def test_bad_settings_say_what_is_wrong(kit, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _ppo(kit, steps=2, **kwargs)


def test_off_by_default_and_with_a_scale_of_one(kit):
    """No scale stored when every env explores with the policy's std (the update is then PPO's unchanged)."""
    for kwargs in ({"low_noise_fraction": 0.0}, {"low_noise_std_scale": 1.0}, {"low_noise_fraction": 0.01}):
        ppo = _ppo(kit, steps=2, **kwargs)
        assert _schedule(ppo).noise_scale is None and ppo.storage.noise_scale is None


def test_std_ceiling_follows_the_schedule_piecewise_linearly(kit):
    """No ceiling before the first point, linear between points, the last value after; the learned std itself is
    kept (a ceiling above it changes nothing) and the sampled actions spread with the capped std."""
    ppo = _ppo(kit, steps=2, low_noise_fraction=0.0, std_max_schedule=[[10, 0.6], [20, 0.2]])
    dist = ppo.actor.distribution
    with torch.no_grad():
        dist.std_param.copy_(torch.tensor([0.9, 0.3]))
    for it, expected in ((0, [0.9, 0.3]), (9, [0.9, 0.3]), (10, [0.6, 0.3]), (15, [0.4, 0.3]), (20, [0.2, 0.2]),
                         (500, [0.2, 0.2])):
        ppo.set_iteration(it)
        torch.testing.assert_close(dist.current_std(), torch.tensor(expected))
    torch.testing.assert_close(dist.std_param.detach(), torch.tensor([0.9, 0.3]))
    env = kit.FakeEnv(num_envs=N)
    ppo.storage.clear()
    kit.collect(ppo, env, 2)
    torch.testing.assert_close(ppo.storage.distribution_params[1], torch.full((2, N, 2), 0.2))


def test_low_noise_starts_at_its_iteration_and_later_rollouts_refill_the_buffer(kit):
    ppo = _ppo(kit, steps=4, low_noise_start=5)
    assert _schedule(ppo).noise_scale is None and ppo.storage.noise_scale is None  # iteration 0: not yet
    ppo.set_iteration(5)
    env = kit.FakeEnv(num_envs=N)
    ppo.storage.clear()
    kit.collect(ppo, env, 4)
    torch.testing.assert_close(ppo.storage.noise_scale[..., 0], _scales().expand(4, N))
    ppo.update()
    ppo.set_iteration(4)  # (a schedule never goes back; the buffer must still not keep stale factors)
    kit.collect(ppo, env, 4)
    assert (ppo.storage.noise_scale == 1).all()


@pytest.mark.parametrize("schedule, message", [
    ([[300]], "list of \\[iteration, value\\] pairs"),
    ([[300, 0.1], [200, 0.2]], "iterations must increase"),
    ([[300, 0.0]], "values be positive"),
])
def test_bad_std_schedules_are_refused(kit, schedule, message):
    with pytest.raises(ConfigError, match=message):
        _ppo(kit, steps=2, std_max_schedule=schedule)


# ---------------------------------------------------------------------------- where the schedule is configured
def test_ppo_takes_no_exploration_arguments_its_schedule_is_an_extension(kit):
    """The schedule is not in PPO's constructor (rsl_rl's arguments, in rsl_rl's order, then rlcore's few)."""
    import inspect

    from rlcore.algorithms import PPO

    params = list(inspect.signature(PPO.__init__).parameters)[1:]
    assert params[:23] == ["actor", "critic", "storage", "num_learning_epochs", "num_mini_batches", "clip_param",
                           "gamma", "lam", "value_loss_coef", "entropy_coef", "learning_rate", "max_grad_norm",
                           "optimizer", "use_clipped_value_loss", "schedule", "desired_kl",
                           "normalize_advantage_per_mini_batch", "use_mixed_precision", "device", "rnd_cfg",
                           "symmetry_cfg", "multi_gpu_cfg", "grad_reduce_bucket_mb"]
    assert not set(params) & set(LEGACY_KEYS)
    env = kit.FakeEnv(num_envs=N)
    with pytest.raises(TypeError, match="low_noise_fraction"):
        kit.make_ppo(env.get_observations(), 2, low_noise_fraction=0.25)


def _train_cfg(algorithm: dict) -> dict:
    return {"num_steps_per_env": 8, "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
            "actor": {"class_name": "MLPModel", "hidden_dims": [16],
                      "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
            "critic": {"class_name": "MLPModel", "hidden_dims": [16]},
            "algorithm": {"class_name": "PPO", "num_mini_batches": 2, **algorithm}}


def _factory_run(kit, algorithm: dict):
    """Build PPO by the factory from a train config, run 3 iterations (the schedule applies from iteration 1): the
    stored per-env factors and actions of the last rollout, and the weights after it."""
    from rlcore.algorithms import construct_algorithm

    torch.manual_seed(0)
    env = kit.FakeEnv(num_envs=N, done_fn=kit.periodic_dones(N, [5, 0, 3, 7] * 4, time_out_envs=(3,)))
    ppo = construct_algorithm(env.get_observations(), env, _train_cfg(algorithm), "cpu")
    for it in range(3):
        ppo.set_iteration(it)
        kit.collect(ppo, env, 8)
        if it < 2:
            ppo.update()
    scale = ppo.storage.noise_scale
    return ppo, (None if scale is None else scale.clone(), ppo.storage.actions.clone(),
                 {k: v.clone() for k, v in ppo.actor.state_dict().items()})


def test_exploration_cfg_and_the_older_flat_keys_train_identically(kit):
    """``algorithm.exploration_cfg`` builds the schedule; a train_cfg that holds its settings directly in ``algorithm``
    (older configs and the checkpoints they wrote) trains bit-identically; no schedule at all differs."""
    settings = {"std_max_schedule": [[1, 0.5], [2, 0.3]], "low_noise_fraction": 0.25, "low_noise_start": 1}
    ppo, new = _factory_run(kit, {"exploration_cfg": settings})
    schedule = _schedule(ppo)
    assert (schedule.std_max_schedule, schedule.low_noise_fraction, schedule.low_noise_start) == (
        [(1, 0.5), (2, 0.3)], 0.25, 1)
    torch.testing.assert_close(new[0][..., 0], _scales().expand(8, N), rtol=0, atol=0)
    torch.testing.assert_close(ppo.actor.distribution.current_std(), torch.full((2,), 0.3))
    _, old = _factory_run(kit, settings)
    torch.testing.assert_close(old, new, rtol=0, atol=0)
    plain, _ = _factory_run(kit, {})
    assert not any(isinstance(ext, ExplorationSchedule) for ext in plain.extensions)
    assert plain.storage.noise_scale is None


def test_a_setting_given_both_ways_is_refused(kit):
    with pytest.raises(ConfigError, match="low_noise_fraction given both in exploration_cfg and directly"):
        _factory_run(kit, {"exploration_cfg": {"low_noise_fraction": 0.25}, "low_noise_fraction": 0.5})
