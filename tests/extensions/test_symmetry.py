"""Tests of rlcore.extensions.symmetry.Symmetry with a toy left/right mirror.

Observations ``{"policy": [N, 4]}`` mirror by flipping the sign of entries 1 and 3; actions ``[N, 2]`` by flipping
the sign of action 1. A policy ``mu`` is symmetric when ``mu(mirror_obs(o)) == mirror_act(mu(o))``.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore.extensions import Symmetry
from rlcore.extensions.symmetry import resolve_function
from rlcore.models import MLPModel

pytestmark = pytest.mark.usefixtures("seed")

OBS_SIGN = torch.tensor([1.0, -1.0, 1.0, -1.0])
ACT_SIGN = torch.tensor([1.0, -1.0])


class ToyEnv:
    num_actions = 2


def mirror_fn(env=None, obs: TensorDict | None = None, actions: torch.Tensor | None = None):
    """rsl_rl-style augmentation: ``[original, mirrored]`` along the batch dimension."""
    obs_aug = None
    if obs is not None:
        obs_aug = TensorDict({"policy": torch.cat([obs["policy"], obs["policy"] * OBS_SIGN])},
                             batch_size=[2 * obs.batch_size[0]])
    actions_aug = None if actions is None else torch.cat([actions, actions * ACT_SIGN])
    return obs_aug, actions_aug


def mirror_twice_fn(env=None, obs=None, actions=None):
    """k = 2: ``[original, mirrored, original]`` (the identity is a valid symmetry too)."""
    obs_aug = None
    if obs is not None:
        p = obs["policy"]
        obs_aug = TensorDict({"policy": torch.cat([p, p * OBS_SIGN, p])}, batch_size=[3 * obs.batch_size[0]])
    actions_aug = None if actions is None else torch.cat([actions, actions * ACT_SIGN, actions])
    return obs_aug, actions_aug


def _obs(n: int = 8) -> TensorDict:
    return TensorDict({"policy": torch.randn(n, 4)}, batch_size=[n])


def _actor(hidden=(16, 16), init_gains=None) -> MLPModel:
    return MLPModel(_obs(2), {"actor": ["policy"]}, "actor", 2, hidden_dims=hidden,
                    distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0}, init_gains=init_gains)


def _random_actor() -> MLPModel:
    return _actor(init_gains=[2**0.5, 2**0.5, 1.0])  # O(1) outputs, clearly asymmetric


def _sym(**kw) -> Symmetry:
    cfg = {"use_mirror_loss": True, "mirror_loss_coeff": 0.5, "data_augmentation_func": mirror_fn}
    cfg.update(kw)
    return Symmetry(ToyEnv(), **cfg)


def _hand_mirror_loss(actor: MLPModel, obs: TensorDict) -> torch.Tensor:
    with torch.no_grad():
        mu = actor(obs)
        mu_mirrored_obs = actor(TensorDict({"policy": obs["policy"] * OBS_SIGN}, batch_size=obs.batch_size))
    return (mu_mirrored_obs - mu * ACT_SIGN).square().mean()


# ---------------------------------------------------------------------------- augmentation
def test_augment_exact_values():
    sym = _sym(use_data_augmentation=True, use_mirror_loss=False)
    obs = TensorDict({"policy": torch.tensor([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, -2.0]])}, batch_size=[2])
    actions = torch.tensor([[0.1, 0.2], [-0.3, -0.4]])
    obs_aug, act_aug = sym.augment(obs, actions)
    assert obs_aug.batch_size == torch.Size([4])
    torch.testing.assert_close(obs_aug["policy"], torch.tensor([
        [1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, -2.0],
        [1.0, -2.0, 3.0, -4.0], [-1.0, -0.5, 0.0, 2.0]]))
    torch.testing.assert_close(act_aug, torch.tensor([[0.1, 0.2], [-0.3, -0.4], [0.1, -0.2], [-0.3, 0.4]]))
    assert sym.use_data_augmentation and not sym.use_mirror_loss


def test_augment_with_two_mirrors():
    sym = _sym(use_data_augmentation=True, data_augmentation_func=mirror_twice_fn)
    obs, actions = _obs(5), torch.randn(5, 2)
    obs_aug, act_aug = sym.augment(obs, actions)
    assert obs_aug.batch_size[0] == 15 and act_aug.shape == (15, 2)
    torch.testing.assert_close(act_aug[5:10], actions * ACT_SIGN)


def test_augment_rejects_bad_outputs():
    def same_size(env=None, obs=None, actions=None):
        return obs, actions

    def originals_last(env=None, obs=None, actions=None):
        o, a = mirror_fn(env, obs, actions)
        return o.flip(0), a.flip(0)

    with pytest.raises(ValueError, match="multiple"):
        _sym(use_data_augmentation=True, data_augmentation_func=same_size).augment(_obs(4), torch.randn(4, 2))
    with pytest.raises(ValueError, match="original samples first"):
        _sym(use_data_augmentation=True, data_augmentation_func=originals_last).augment(_obs(4), torch.randn(4, 2))


# ---------------------------------------------------------------------------- mirror loss
def test_mirror_loss_zero_for_symmetric_policy():
    """mean = W x + c with action 0 reading only the even (unflipped) inputs, action 1 only the odd ones."""
    actor = _actor(hidden=())
    layer = actor.mlp.linear_layers[0]
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.7, 0.0, -1.2, 0.0], [0.0, 1.5, 0.0, -0.4]]))
        layer.bias.copy_(torch.tensor([0.3, 0.0]))
    loss = _sym().mirror_loss(actor, _obs(32))
    assert loss.item() < 1e-12


def test_mirror_loss_equals_hand_computation_for_random_actor():
    actor = _random_actor()
    obs = _obs(32)
    loss = _sym().mirror_loss(actor, obs)
    assert loss.dim() == 0 and loss.requires_grad
    expected = _hand_mirror_loss(actor, obs)
    assert expected > 1e-2
    torch.testing.assert_close(loss.detach(), expected)


def test_mirror_loss_with_two_mirrors_averages_over_mirrored_blocks():
    """Blocks: [mirror, identity]; the identity block has zero error, so the loss is half the k=1 loss."""
    actor = _random_actor()
    obs = _obs(16)
    loss2 = _sym(data_augmentation_func=mirror_twice_fn).mirror_loss(actor, obs)
    torch.testing.assert_close(loss2.detach(), 0.5 * _hand_mirror_loss(actor, obs))


def test_mirror_loss_gradient_only_through_mirrored_branch():
    actor = _random_actor()
    obs = _obs(8)
    _sym().mirror_loss(actor, obs).backward()
    grads = {n: p.grad for n, p in actor.named_parameters() if p.grad is not None}
    assert grads and all(torch.isfinite(g).all() for g in grads.values())
    # the target mu(o) is detached: the same gradient as with a hand-written detached target
    actor2 = _random_actor()
    actor2.load_state_dict(actor.state_dict())
    with torch.no_grad():
        target = actor2(obs) * ACT_SIGN
    mirrored = TensorDict({"policy": obs["policy"] * OBS_SIGN}, batch_size=[8])
    (actor2(mirrored) - target).square().mean().backward()
    for n, p in actor2.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[n], p.grad)


def test_mirror_loss_keeps_distribution_of_earlier_stochastic_call():
    actor = _random_actor()
    obs = _obs(6)
    actor(obs, stochastic_output=True)
    mean_before = actor.output_mean.clone()
    _sym().mirror_loss(actor, obs)
    assert actor.output_mean.shape == (6, 2)
    torch.testing.assert_close(actor.output_mean, mean_before)


def test_mirror_loss_training_makes_policy_symmetric():
    actor = _random_actor()
    sym = _sym()
    obs = _obs(128)
    opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
    first = None
    for _ in range(300):
        loss = sym.mirror_loss(actor, obs)
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    final = _hand_mirror_loss(actor, obs).item()
    assert first > 0.5
    assert final < 0.005 * first


# ---------------------------------------------------------------------------- configuration
def test_string_path_resolution():
    for path in (f"{__name__}:mirror_fn", f"{__name__}.mirror_fn"):
        sym = _sym(data_augmentation_func=path)
        assert sym.data_augmentation_func is mirror_fn
    assert resolve_function("torch.nn.functional:relu") is torch.nn.functional.relu
    assert resolve_function("torch.nn.functional.relu") is torch.nn.functional.relu
    assert resolve_function("torch:Tensor.abs") is torch.Tensor.abs
    assert resolve_function(mirror_fn) is mirror_fn
    assert resolve_function(None) is None
    # resolved path behaves like the function
    obs, actions = _obs(3), torch.randn(3, 2)
    _, act_aug = _sym(use_data_augmentation=True, data_augmentation_func=f"{__name__}:mirror_fn").augment(obs, actions)
    torch.testing.assert_close(act_aug[3:], actions * ACT_SIGN)


def test_the_env_reaches_the_augmentation_function_through_the_factory():
    """The factory hands the env to Symmetry, which passes it to every call of the augmentation function.
    (How PPO uses the flags and the coefficient is checked on its gradients in test_symmetry_in_ppo.py.)"""
    from rlcore.algorithms import construct_algorithm

    calls = []

    def recording_mirror(env=None, obs=None, actions=None):
        calls.append(env)
        return mirror_fn(env, obs, actions)

    class Env(ToyEnv):
        num_envs, max_episode_length, device, cfg = 4, 10, "cpu", {}

        def get_observations(self):
            return _obs(4)

    env = Env()
    cfg = {"num_steps_per_env": 2, "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
           "actor": {"class_name": "MLPModel", "hidden_dims": [8],
                     "distribution_cfg": {"class_name": "GaussianDistribution"}},
           "critic": {"class_name": "MLPModel", "hidden_dims": [8]},
           "algorithm": {"class_name": "PPO", "symmetry_cfg": {"use_data_augmentation": True, "use_mirror_loss": True,
                                                               "data_augmentation_func": recording_mirror}}}
    ppo = construct_algorithm(env.get_observations(), env, cfg, "cpu")
    ppo.symmetry.augment(_obs(3), torch.randn(3, 2))
    ppo.symmetry.mirror_loss(ppo.actor, _obs(3))
    assert len(calls) == 3 and all(e is env for e in calls)


class StepEnv(ToyEnv):
    """4 envs with random observations and rewards, never done."""

    num_envs, max_episode_length, device, cfg, step_dt = 4, 100, "cpu", {}, 0.02

    def __init__(self):
        self.gen = torch.Generator().manual_seed(3)
        self.episode_length_buf = torch.zeros(4, dtype=torch.long)

    def get_observations(self):
        return TensorDict({"policy": torch.randn(4, 4, generator=self.gen)}, batch_size=[4])

    def step(self, actions):
        return self.get_observations(), torch.randn(4, generator=self.gen), torch.zeros(4, dtype=torch.bool), {}


def test_both_flags_off_is_a_no_op():
    """rsl_rl accepts symmetry_cfg with both uses off (nothing changes in learning): PPO then updates exactly like
    PPO without symmetry_cfg, and the augmentation function is never called."""
    from rlcore.algorithms import construct_algorithm

    sym = Symmetry(ToyEnv(), mirror_fn)  # rsl_rl's positional order: env, data_augmentation_func
    assert (sym.use_data_augmentation, sym.use_mirror_loss, sym.data_augmentation_func) == (False, False, mirror_fn)
    calls = []

    def spy(env=None, obs=None, actions=None):
        calls.append(1)
        return mirror_fn(env, obs, actions)

    params = []
    for sym_cfg in (None, {"use_data_augmentation": False, "use_mirror_loss": False, "data_augmentation_func": spy}):
        torch.manual_seed(0)
        env = StepEnv()
        cfg = {"num_steps_per_env": 4, "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
               "actor": {"class_name": "MLPModel", "hidden_dims": [8],
                         "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
               "critic": {"class_name": "MLPModel", "hidden_dims": [8]},
               "algorithm": {"class_name": "PPO", "num_mini_batches": 2, "symmetry_cfg": sym_cfg}}
        ppo = construct_algorithm(env.get_observations(), env, cfg, "cpu")
        obs = env.get_observations()
        with torch.inference_mode():
            for _ in range(4):
                obs, rewards, dones, extras = env.step(ppo.act(obs))
                ppo.process_env_step(obs, rewards, dones, extras)
            ppo.compute_returns(obs)
        losses = ppo.update()
        assert "symmetry" not in losses
        params.append([p.detach().clone() for p in ppo.actor.parameters()])
    assert calls == []
    assert all(torch.equal(a, b) for a, b in zip(*params))


def test_error_missing_function():
    with pytest.raises(ValueError, match="data_augmentation_func is required"):
        Symmetry(ToyEnv(), use_mirror_loss=True)


@pytest.mark.parametrize("path, match", [
    ("no_such_package_xyz.mirror:fn", "cannot import module 'no_such_package_xyz.mirror'"),
    (f"{__name__}:no_such_function", "has no attribute 'no_such_function'"),
    ("justaname", "not a 'package.module:function' path"),
    ("math:pi", "non-callable"),
])
def test_error_unresolvable_path(path, match):
    with pytest.raises(ValueError, match=match):
        Symmetry(ToyEnv(), use_data_augmentation=True, data_augmentation_func=path)
