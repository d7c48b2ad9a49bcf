"""Tests of rlcore.extensions.rnd.RandomNetworkDistillation."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlcore.extensions import RandomNetworkDistillation

pytestmark = pytest.mark.usefixtures("seed")

GROUPS = {"a": 3, "b": 2}  # RND state = concat(a, b): D = 5


def _obs(*batch: int, scale: float = 1.0, shift: float = 0.0) -> TensorDict:
    return TensorDict({g: shift + scale * torch.randn(*batch, d) for g, d in GROUPS.items()}, batch_size=list(batch))


def _x(obs: TensorDict) -> torch.Tensor:
    return torch.cat([obs["a"], obs["b"]], dim=-1)


def _rnd(**kw) -> RandomNetworkDistillation:
    cfg = dict(num_states=5, obs_groups=["a", "b"], num_outputs=8, predictor_hidden_dims=(32, 32),
               target_hidden_dims=(32, 32), weight=0.7, step_dt=0.02)
    cfg.update(kw)
    return RandomNetworkDistillation(**cfg)


def _manual_mlp(mlp: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """ELU MLP forward written out layer by layer from the Linear weights."""
    layers = [m for m in mlp if isinstance(m, torch.nn.Linear)]
    for i, layer in enumerate(layers):
        x = x @ layer.weight.T + layer.bias
        if i < len(layers) - 1:
            x = torch.where(x > 0, x, torch.expm1(x))
    return x


# ---------------------------------------------------------------------------- reward
def test_intrinsic_reward_equals_hand_computation():
    rnd = _rnd()
    obs = _obs(6)
    x = _x(obs)
    expected = 0.7 * 0.02 * (_manual_mlp(rnd.target, x) - _manual_mlp(rnd.predictor, x)).square().sum(-1).sqrt()
    reward = rnd.get_intrinsic_reward(obs)
    assert reward.shape == (6,)
    assert not reward.requires_grad
    torch.testing.assert_close(reward, expected, rtol=1e-5, atol=1e-7)
    assert rnd.update_counter == 1


def test_target_output_not_tiny_and_networks_differ():
    """Output-layer gain 1 (not the MLP default 0.01): the random target's embedding is O(1)."""
    rnd = _rnd()
    x = _x(_obs(256))
    assert rnd.target(x).std() > 0.2
    assert rnd.prediction_error(_obs(256)).mean() > 0.5
    assert all(not p.requires_grad for p in rnd.target.parameters())
    assert all(p.requires_grad for p in rnd.predictor.parameters())
    opt_params = {id(p) for g in rnd.optimizer.param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in rnd.predictor.parameters()}


def test_obs_groups_dict_is_accepted():
    rnd = _rnd(obs_groups={"rnd_state": ["a", "b"], "actor": ["a"]})
    assert rnd.obs_groups == ["a", "b"]
    obs = _obs(3)
    assert rnd.get_rnd_state(obs).shape == (3, 5)


# ---------------------------------------------------------------------------- learning
def test_train_step_reduces_error_and_keeps_target_fixed():
    rnd = _rnd(learning_rate=1e-3)
    obs = _obs(64)
    target_before = copy.deepcopy(rnd.target.state_dict())
    predictor_before = copy.deepcopy(rnd.predictor.state_dict())
    err0 = rnd.prediction_error(obs).mean().item()
    loss0 = rnd.compute_loss(obs).item()
    losses = [rnd.train_step(obs) for _ in range(200)]
    err1 = rnd.prediction_error(obs).mean().item()
    assert losses[0] == pytest.approx(loss0, rel=1e-6)
    assert losses[-1] < 0.05 * losses[0]
    assert err1 < 0.25 * err0
    for k, v in rnd.target.state_dict().items():
        assert torch.equal(v, target_before[k]), k
    assert any(not torch.equal(v, predictor_before[k]) for k, v in rnd.predictor.state_dict().items())


def test_loss_is_mse_over_embedding():
    rnd = _rnd()
    obs = _obs(10)
    x = _x(obs)
    expected = (rnd.predictor(x) - rnd.target(x)).square().mean()
    torch.testing.assert_close(rnd.compute_loss(obs), expected)


def test_train_step_with_padded_leading_dims():
    """Recurrent mini-batches are ``[T, K]``: flattened into T*K samples."""
    rnd = _rnd()
    obs = _obs(4, 3)
    flat = TensorDict({k: v.reshape(12, -1) for k, v in obs.items()}, batch_size=[12])
    torch.testing.assert_close(rnd.compute_loss(obs), rnd.compute_loss(flat))
    twin = copy.deepcopy(rnd)
    loss = rnd.train_step(obs, multi_gpu=True)  # no process group: the all-reduce is a no-op
    loss_flat = twin.train_step(flat)
    assert loss == pytest.approx(loss_flat, rel=1e-6)
    for p, q in zip(rnd.predictor.parameters(), twin.predictor.parameters()):
        torch.testing.assert_close(p, q)


# ---------------------------------------------------------------------------- weight schedule
def test_constant_schedule():
    for sched in (None, {"mode": "constant"}):
        rnd = _rnd(weight=0.3, weight_schedule=sched)
        assert rnd.weight == 0.3
        assert rnd.weight_at(0) == rnd.weight_at(10**6) == 0.3


def test_step_schedule():
    rnd = _rnd(weight=0.3, weight_schedule={"mode": "step", "final_step": 10, "final_value": 0.05})
    assert rnd.weight_at(0) == 0.3
    assert rnd.weight_at(9) == 0.3
    assert rnd.weight_at(10) == 0.05
    assert rnd.weight_at(1000) == 0.05


def test_linear_schedule():
    rnd = _rnd(weight=1.0, weight_schedule={"mode": "linear", "initial_step": 100, "final_step": 300,
                                            "final_value": 0.2})
    assert rnd.weight_at(0) == 1.0
    assert rnd.weight_at(100) == 1.0
    assert rnd.weight_at(200) == pytest.approx(0.6)
    assert rnd.weight_at(150) == pytest.approx(0.8)
    assert rnd.weight_at(300) == pytest.approx(0.2)
    assert rnd.weight_at(10**5) == pytest.approx(0.2)


def test_schedule_follows_reward_calls():
    """The step counter advances once per get_intrinsic_reward call and scales that call's reward."""
    rnd = _rnd(weight=0.5, step_dt=0.1, weight_schedule={"mode": "step", "final_step": 3, "final_value": 2.0})
    obs = _obs(5)
    error = rnd.prediction_error(obs).detach()
    rewards = [rnd.get_intrinsic_reward(obs) for _ in range(4)]
    for r, w in zip(rewards, (0.5, 0.5, 2.0, 2.0)):  # steps 1, 2, 3, 4
        torch.testing.assert_close(r, w * 0.1 * error)
    assert rnd.update_counter == 4 and rnd.weight == 2.0


def test_unknown_schedule_mode():
    with pytest.raises(ValueError, match="constant, linear, step"):
        _rnd(weight_schedule={"mode": "cosine"})


def test_schedule_missing_keys():
    with pytest.raises(ValueError, match="final_value"):
        _rnd(weight_schedule={"mode": "step", "final_step": 3})


# ---------------------------------------------------------------------------- normalisation
def test_state_normalization_statistics_and_input():
    rnd = _rnd(state_normalization=True)
    rollout = _obs(7, 9, scale=3.0, shift=2.0)  # [T, N]
    rnd.update_normalization(rollout)
    x = _x(rollout).reshape(-1, 5).double().numpy()
    norm = rnd.state_normalizer
    np.testing.assert_allclose(norm.mean.numpy(), x.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), x.var(0), rtol=1e-4, atol=1e-5)
    assert int(norm.count) == 63

    obs = _obs(4, scale=3.0, shift=2.0)
    mean, std = torch.tensor(x.mean(0), dtype=torch.float32), torch.tensor(x.std(0), dtype=torch.float32)
    xn = (_x(obs) - mean) / (std + norm.eps)
    expected = 0.7 * 0.02 * torch.linalg.vector_norm(rnd.target(xn) - rnd.predictor(xn), dim=-1)
    torch.testing.assert_close(rnd.get_intrinsic_reward(obs), expected, rtol=1e-4, atol=1e-6)
    # the loss sees the same normalised input and leaves the statistics unchanged
    torch.testing.assert_close(rnd.compute_loss(obs), (rnd.predictor(xn) - rnd.target(xn)).square().mean(),
                               rtol=1e-4, atol=1e-6)
    rnd.train_step(obs)
    assert int(norm.count) == 63


def test_state_normalization_off_ignores_updates():
    rnd = _rnd()
    obs = _obs(4)
    r0 = rnd.prediction_error(obs)
    rnd.update_normalization(_obs(8, shift=5.0))
    torch.testing.assert_close(rnd.prediction_error(obs), r0)
    assert isinstance(rnd.state_normalizer, torch.nn.Identity)


def test_reward_normalization_divides_by_discounted_return_std():
    rnd = _rnd(reward_normalization=True)
    obs = _obs(32)
    error = rnd.prediction_error(obs).detach()
    reward = rnd.get_intrinsic_reward(obs)  # first step: discounted return = error
    std = error.double().std(unbiased=False).float()
    torch.testing.assert_close(reward, 0.7 * 0.02 * error / (std + 1e-2), rtol=1e-4, atol=1e-7)
    # eval mode: statistics frozen
    rnd.eval()
    stats = copy.deepcopy(rnd.reward_normalizer.state_dict())
    rnd.get_intrinsic_reward(_obs(32))
    for k, v in rnd.reward_normalizer.state_dict().items():
        assert torch.equal(v, stats[k]), k


# ---------------------------------------------------------------------------- persistence
def test_state_dict_round_trip_gives_identical_rewards():
    cfg = dict(state_normalization=True, reward_normalization=True,
               weight_schedule={"mode": "linear", "initial_step": 0, "final_step": 10, "final_value": 0.1})
    rnd = _rnd(**cfg)
    with torch.inference_mode():  # as during collection
        for _ in range(3):
            rnd.get_intrinsic_reward(_obs(16))
    rnd.update_normalization(_obs(3, 16, shift=1.0))
    rnd.train_step(_obs(16))
    state = copy.deepcopy(rnd.state_dict())
    for key in ("predictor.0.weight", "target.0.weight", "state_normalizer._mean", "reward_normalizer.emp_norm._std",
                "reward_normalizer.disc_return", "step_count"):
        assert key in state, key

    torch.manual_seed(123)
    other = _rnd(**cfg)
    with torch.inference_mode():  # its lazily sized buffer is now an inference tensor of another size
        other.get_intrinsic_reward(_obs(5))
    other.load_state_dict(state)
    assert other.update_counter == rnd.update_counter == 3
    for k, v in rnd.target.state_dict().items():
        assert torch.equal(v, other.target.state_dict()[k])
    obs = _obs(16)
    with torch.inference_mode():
        torch.testing.assert_close(other.get_intrinsic_reward(obs), rnd.get_intrinsic_reward(obs), rtol=0, atol=0)
    assert other.weight == rnd.weight


def test_load_accepts_checkpoint_without_step_counter():
    rnd = _rnd()
    state = {k: v for k, v in rnd.state_dict().items() if k != "step_count"}
    other = _rnd()
    other.load_state_dict(state)
    obs = _obs(4)
    torch.testing.assert_close(other.get_intrinsic_reward(obs), rnd.get_intrinsic_reward(obs))


def test_built_from_factory_config():
    """The dict the factory hands over (user rnd_cfg + obs_groups, num_states, step_dt) builds the module."""
    from rlcore.algorithms.factory import _extension_cfgs

    class Env:
        step_dt = 0.02

    alg_cfg = {"rnd_cfg": {"weight": 1.5, "num_outputs": 4, "predictor_hidden_dims": [8],
                           "target_hidden_dims": [8], "state_normalization": True}}
    obs = _obs(3)
    alg_cfg = _extension_cfgs(alg_cfg, obs, {"rnd_state": ["a", "b"]}, Env())
    rnd = RandomNetworkDistillation(device="cpu", **alg_cfg["rnd_cfg"])
    assert rnd.num_states == 5 and rnd.step_dt == 0.02
    torch.testing.assert_close(rnd.get_intrinsic_reward(obs), 1.5 * 0.02 * rnd.prediction_error(obs))


# ---------------------------------------------------------------------------- issue 11: control step, padding
def test_step_dt_is_required():
    """No silent 1 s: a missing control step would scale the bonus by 1 / step_dt (50x at 50 Hz)."""
    with pytest.raises(ValueError, match=r"^RND needs the env's control step \(got step_dt=None\): set env.step_dt"):
        _rnd(step_dt=None)


def test_loss_with_masks_counts_real_rows_only():
    """A padded recurrent mini-batch ``[T, K]``: the loss is the MSE over the rows its masks mark, nothing else."""
    rnd = _rnd(state_normalization=True)
    rnd.update_normalization(_obs(64, shift=2.0))
    obs = _obs(5, 3)
    masks = torch.tensor([[1, 1, 1], [1, 0, 1], [1, 0, 1], [0, 0, 1], [0, 0, 0]], dtype=torch.bool)
    obs[~masks] = obs[~masks].apply(torch.zeros_like)  # padding rows hold zeros, as split_and_pad_trajectories makes
    x = rnd.state_normalizer(_x(obs)[masks])
    expected = (_manual_mlp(rnd.predictor, x) - _manual_mlp(rnd.target, x)).square().mean()
    torch.testing.assert_close(rnd.compute_loss(obs, masks), expected, rtol=1e-5, atol=1e-7)
    assert not torch.allclose(rnd.compute_loss(obs), expected)  # the padding would change it
    before = copy.deepcopy(rnd.predictor.state_dict())
    reference = copy.deepcopy(rnd)
    rnd.train_step(obs, masks=masks)
    reference.train_step(obs[masks])  # the same step on the real rows, flattened
    for k, v in rnd.predictor.state_dict().items():
        assert not torch.equal(v, before[k])
        torch.testing.assert_close(v, reference.predictor.state_dict()[k], rtol=1e-6, atol=1e-7)
