"""Tests of MLPModel, CNNModel and RNNModel: group selection, shapes/dtypes, distributions, recurrence, sharing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from tensordict import TensorDict
from torch.distributions import Beta, Normal

from rlcore.models import MODELS, CNNModel, MLPModel, RNNModel
from rlcore.modules import CNN, EmpiricalNormalization
from rlcore.utils.trajectories import split_and_pad_trajectories

pytestmark = pytest.mark.usefixtures("seed")

N, A = 5, 3
HIDDEN = [16, 16]
CNN_CFG = dict(output_channels=[4, 4], kernel_size=3, stride=2)
# 1D-only sets (MLPModel, RNNModel): actor and critic read different groups
GROUPS_1D = {"actor": ["policy"], "critic": ["policy", "privileged"]}
# sets with 2D groups (CNNModel)
GROUPS_2D = {"actor": ["policy", "height_scan"], "critic": ["privileged", "height_scan", "camera"]}
BETA_RANGE = (-2.0, 3.0)

DIST_CFGS = {
    "deterministic": None,
    "gauss_scalar": {"class_name": "GaussianDistribution", "init_std": 0.7, "std_type": "scalar"},
    "gauss_log": {"class_name": "GaussianDistribution", "init_std": 0.7, "std_type": "log"},
    "hetero": {"class_name": "HeteroscedasticGaussianDistribution", "init_std": 0.7},
    "beta": {"class_name": "BetaDistribution", "action_range": BETA_RANGE},
}

# per-env latent size of each model/obs set: 1D part + CNN part
# height_scan [1, 9, 11] with two k3 s2 convs (4 channels): 9x11 -> 5x6 -> 3x3 -> 36
# camera [2, 8, 8]: 8x8 -> 4x4 -> 2x2 -> 16
CNN_OUT = {"height_scan": 36, "camera": 16}


def build(kind: str, obs: TensorDict, obs_set: str = "actor", dist: str = "deterministic", **kw):
    """A small model of kind 'mlp', 'cnn', 'gru' or 'lstm'."""
    common = dict(hidden_dims=HIDDEN, distribution_cfg=DIST_CFGS[dist])
    common.update(kw)
    if kind == "mlp":
        return MLPModel(obs, GROUPS_1D, obs_set, A, **common)
    if kind == "cnn":
        common.setdefault("cnn_cfg", CNN_CFG)
        return CNNModel(obs, GROUPS_2D, obs_set, A, **common)
    common.setdefault("rnn_hidden_dim", 8)
    return RNNModel(obs, GROUPS_1D, obs_set, A, rnn_type=kind, **common)


def perturb(model: nn.Module, scale: float = 0.2) -> None:
    """Move every parameter away from its (small, structured) initial value so outputs are O(1)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))


def concat(obs: TensorDict, groups: list[str]) -> torch.Tensor:
    return torch.cat([obs[g] for g in groups], dim=-1)


# ---------------------------------------------------------------------------- group selection and input dims
def test_registry():
    assert MODELS == {"MLPModel": MLPModel, "CNNModel": CNNModel, "RNNModel": RNNModel}
    assert not MLPModel.is_recurrent and not CNNModel.is_recurrent and RNNModel.is_recurrent


def test_mlp_model_actor_and_critic_dims(make_obs):
    obs = make_obs(N)
    actor = build("mlp", obs, "actor")
    critic = MLPModel(obs, GROUPS_1D, "critic", 1, hidden_dims=HIDDEN)
    assert actor.obs_groups_1d == ["policy"] and actor.obs_groups_2d == []
    assert critic.obs_groups == ["policy", "privileged"]
    assert actor.obs_dim == 7 and critic.obs_dim == 10
    assert actor.mlp.linear_layers[0].in_features == 7
    assert critic.mlp.linear_layers[0].in_features == 10
    assert actor.mlp.linear_layers[-1].out_features == A and critic.mlp.linear_layers[-1].out_features == 1
    perturb(critic)
    v = critic(obs)
    assert v.shape == (N, 1) and v.dtype == torch.float32
    # the latent is the concatenation of the groups in obs_groups order
    torch.testing.assert_close(v, critic.mlp(concat(obs, ["policy", "privileged"])), rtol=0, atol=0)
    swapped = MLPModel(obs, {"critic": ["privileged", "policy"]}, "critic", 1, hidden_dims=HIDDEN)
    swapped.load_state_dict(critic.state_dict())
    torch.testing.assert_close(swapped(obs), critic.mlp(concat(obs, ["privileged", "policy"])), rtol=0, atol=0)
    assert (swapped(obs) - v).abs().max() > 1e-4


def test_cnn_model_actor_and_critic_dims(make_obs):
    obs = make_obs(N)
    actor = build("cnn", obs, "actor")
    critic = build("cnn", obs, "critic")
    assert actor.obs_groups_1d == ["policy"] and actor.obs_groups_2d == ["height_scan"]
    assert critic.obs_groups_1d == ["privileged"] and critic.obs_groups_2d == ["height_scan", "camera"]
    assert list(critic.cnns.keys()) == ["height_scan", "camera"]
    assert actor.cnns["height_scan"].output_dim == CNN_OUT["height_scan"]
    assert critic.cnns["camera"].output_dim == CNN_OUT["camera"]
    assert actor.mlp.linear_layers[0].in_features == 7 + 36
    assert critic.mlp.linear_layers[0].in_features == 3 + 36 + 16
    # encoders are built per group from the group's own shape
    assert critic.cnns["camera"].input_shape == (2, 8, 8)
    assert critic.cnns["height_scan"].input_shape == (1, 9, 11)
    # actor and critic do not share encoders unless asked to
    assert critic.cnns["height_scan"] is not actor.cnns["height_scan"]
    perturb(critic)
    out = critic(obs)
    assert out.shape == (N, A) and out.dtype == torch.float32
    latent = torch.cat(
        [obs["privileged"], critic.cnns["height_scan"](obs["height_scan"]), critic.cnns["camera"](obs["camera"])], -1
    )
    torch.testing.assert_close(out, critic.mlp(latent), rtol=0, atol=0)


def test_cnn_model_image_only_and_per_group_config(make_obs):
    obs = make_obs(N)
    cfg = {
        "height_scan": dict(output_channels=[3], stride=2, flatten=False),  # flatten is forced on
        "camera": dict(output_channels=[2, 5], global_pool="avg"),
    }
    model = CNNModel(obs, {"actor": ["camera", "height_scan"]}, "actor", A, hidden_dims=HIDDEN, cnn_cfg=cfg)
    assert model.obs_groups_1d == [] and model.obs_dim == 0
    assert model.cnns["height_scan"].flatten and model.cnns["height_scan"].output_dim == 3 * 5 * 6
    assert model.cnns["camera"].output_dim == 5
    assert model.mlp.linear_layers[0].in_features == 90 + 5
    assert [c.out_channels for c in model.cnns["camera"] if isinstance(c, nn.Conv2d)] == [2, 5]
    perturb(model)
    out = model(obs)
    assert out.shape == (N, A)
    latent = torch.cat([model.cnns["camera"](obs["camera"]), model.cnns["height_scan"](obs["height_scan"])], -1)
    torch.testing.assert_close(out, model.mlp(latent), rtol=0, atol=0)


def test_rnn_model_dims(make_obs):
    obs = make_obs(N)
    actor = build("lstm", obs, "actor", rnn_hidden_dim=12, rnn_num_layers=2)
    critic = build("gru", obs, "critic", rnn_hidden_dim=6)
    assert actor.rnn.rnn.input_size == 7 and critic.rnn.rnn.input_size == 10
    assert isinstance(actor.rnn.rnn, nn.LSTM) and isinstance(critic.rnn.rnn, nn.GRU)
    assert actor.rnn.rnn.num_layers == 2 and actor.rnn.rnn.hidden_size == 12
    assert actor.mlp.linear_layers[0].in_features == 12 and critic.mlp.linear_layers[0].in_features == 6


# ---------------------------------------------------------------------------- shapes, dtypes, distributions
KINDS = ["mlp", "cnn", "gru", "lstm"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("obs_set", ["actor", "critic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_deterministic_output_shape_and_dtype(make_obs, kind, obs_set, dtype):
    obs = make_obs(N, dtype=dtype)
    model = build(kind, obs, obs_set, obs_normalization=True).to(dtype)
    perturb(model)
    model.update_normalization(obs)
    out = model(obs)
    assert out.shape == (N, A) and out.dtype == dtype
    assert torch.isfinite(out).all()
    if model.is_recurrent:
        states = model.get_hidden_state()
        states = states if isinstance(states, tuple) else (states,)
        for s in states:
            assert s.shape == (1, N, 8) and s.dtype == dtype
    else:
        assert model.get_hidden_state() is None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dist", [d for d in DIST_CFGS if d != "deterministic"])
def test_distributions_in_every_model(make_obs, kind, dist):
    obs = make_obs(N)
    model = build(kind, obs, "actor", dist=dist)
    if dist != "beta":
        # initial std: init_std for every input (state-independent parameter or zeroed std head with bias)
        model(obs, stochastic_output=True)
        torch.testing.assert_close(model.output_std, torch.full((N, A), 0.7), rtol=1e-6, atol=1e-6)
    perturb(model.mlp, 0.1)
    model.reset()
    sample = model(obs, stochastic_output=True)
    assert sample.shape == (N, A) and sample.dtype == torch.float32
    mean, std = model.output_mean, model.output_std
    assert mean.shape == (N, A) and std.shape == (N, A) and bool((std > 0).all())
    log_p = model.get_output_log_prob(sample)
    entropy = model.output_entropy
    assert log_p.shape == (N,) and entropy.shape == (N,)
    assert torch.isfinite(log_p).all() and torch.isfinite(entropy).all()
    params = model.output_distribution_params
    assert all(p.shape == (N, A) for p in params)
    kl_self = model.get_kl_divergence(params, params)
    assert kl_self.shape == (N,)
    torch.testing.assert_close(kl_self, torch.zeros(N), rtol=0, atol=1e-5)

    # the deterministic output (same obs, same recurrent state) is the distribution's mean
    model.reset()
    det = model(obs)
    assert det.shape == (N, A)
    torch.testing.assert_close(det, mean, rtol=1e-6, atol=1e-6)

    if dist == "beta":
        low, high = BETA_RANGE
        assert bool(((sample > low) & (sample < high)).all())
        assert bool(((det > low) & (det < high)).all())
        alpha, beta = params
        unit = ((sample - low) / (high - low)).clamp(1e-6, 1 - 1e-6)
        ref = (Beta(alpha, beta).log_prob(unit) - math.log(high - low)).sum(-1)
        torch.testing.assert_close(log_p, ref, rtol=1e-5, atol=1e-5)
    else:
        ref = Normal(mean, std).log_prob(sample).sum(-1)
        torch.testing.assert_close(log_p, ref, rtol=1e-5, atol=1e-5)
        if dist == "hetero":  # state-dependent std after the perturbation
            assert std.std(0).max() > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic_model_has_no_distribution(make_obs, kind):
    obs = make_obs(N)
    model = build(kind, obs, "critic")
    assert model.distribution is None
    out = model(obs, stochastic_output=True)  # no distribution: plain output either way
    assert out.shape == (N, A)
    with pytest.raises(RuntimeError, match="deterministic"):
        model.get_output_log_prob(out)
    with pytest.raises(RuntimeError, match="deterministic"):
        _ = model.output_mean


def test_obs_normalization_is_applied(make_obs):
    obs = make_obs(64)
    obs["policy"] = obs["policy"] * 3.0 + 5.0
    obs["privileged"] = obs["privileged"] * 0.5 - 2.0
    model = build("mlp", obs, "critic", obs_normalization=True)
    assert isinstance(model.obs_normalizer, EmpiricalNormalization)
    perturb(model)
    model.update_normalization(obs)
    x = concat(obs, ["policy", "privileged"])
    torch.testing.assert_close(model.obs_normalizer.mean, x.mean(0), rtol=1e-5, atol=1e-5)
    expected = model.mlp((x - x.mean(0)) / (x.std(0, unbiased=False) + model.obs_normalizer.eps))
    torch.testing.assert_close(model(obs), expected, rtol=1e-5, atol=1e-5)
    # without normalisation the normaliser is an identity and update_normalization does nothing
    plain = build("mlp", obs, "critic")
    assert isinstance(plain.obs_normalizer, nn.Identity)
    plain.update_normalization(obs)
    torch.testing.assert_close(plain(obs), plain.mlp(x), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["mlp", "cnn", "gru"])
def test_update_normalization_on_rollout_equals_flattened(make_obs, kind):
    T = 6
    obs = make_obs(N, lead=(T,))
    obs["policy"] = obs["policy"] * 2.0 + 3.0
    a = build(kind, obs[0], "critic", obs_normalization=True)
    b = build(kind, obs[0], "critic", obs_normalization=True)
    a.update_normalization(obs)  # [T, N]
    b.update_normalization(obs.reshape(-1))  # [T * N]
    na, nb = a.obs_normalizer, b.obs_normalizer
    assert int(na.count) == int(nb.count) == T * N
    torch.testing.assert_close(na.mean, nb.mean, rtol=0, atol=0)
    torch.testing.assert_close(na.var, nb.var, rtol=0, atol=0)
    groups = a.obs_groups_1d
    flat = concat(obs, groups).reshape(T * N, -1).double()
    torch.testing.assert_close(na.mean.double(), flat.mean(0), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(na.var.double(), flat.var(0, unbiased=False), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- leading dims and padded batches
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_feedforward_leading_dims_and_masks(make_obs, kind):
    T = 4
    obs = make_obs(N, lead=(T,))
    model = build(kind, obs[0], "critic", dist="gauss_scalar", obs_normalization=True)
    perturb(model)
    model.update_normalization(obs)
    out = model(obs)
    assert out.shape == (T, N, A)
    per_step = torch.stack([model(obs[t]) for t in range(T)])
    torch.testing.assert_close(out, per_step, rtol=1e-5, atol=1e-6)
    # a padded recurrent batch given to a feed-forward model is unpadded first
    dones = torch.zeros(T, N, dtype=torch.bool)
    dones[1, 0] = dones[2, 3] = True
    padded, masks = split_and_pad_trajectories(obs, dones)
    out_masked = model(padded, masks=masks, stochastic_output=True)
    assert out_masked.shape == (T, N, A)
    torch.testing.assert_close(model.output_mean, per_step, rtol=1e-5, atol=1e-6)
    assert model.get_output_log_prob(out_masked).shape == (T, N)


def _traj_init_states(h0, dones):
    """Hand-built initial hidden states of the padded trajectories: carried state for t=0, zeros after a done."""
    T, Nn = dones.shape
    cols = []
    for n in range(Nn):
        for t in range(T):
            if t == 0:
                cols.append(n)
            elif dones[t - 1, n]:
                cols.append(-1)
    out = []
    for h in h0:
        zero = torch.zeros_like(h[:, 0])
        out.append(torch.stack([h[:, c] if c >= 0 else zero for c in cols], dim=1))
    return tuple(out)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
@pytest.mark.parametrize("layers", [1, 2])
def test_rnn_model_step_by_step_equals_batch(make_obs, rnn_type, layers):
    T = 8
    obs = make_obs(N, lead=(T,))
    obs["policy"] = obs["policy"] * 2.0 + 1.0
    model = build(rnn_type, obs[0], "critic", dist="gauss_log", obs_normalization=True, rnn_num_layers=layers)
    perturb(model)
    model.update_normalization(obs)
    dones = torch.zeros(T, N, dtype=torch.bool)
    dones[2, 0] = dones[5, 0] = True
    dones[0, 1] = True
    dones[4, 3] = dones[5, 3] = True

    # non-zero carried state before the rollout
    model.reset()
    for _ in range(2):
        model(obs[T - 1] * 0.5)
    h = model.get_hidden_state()
    h0 = tuple(s.clone() for s in (h if isinstance(h, tuple) else (h,)))

    with torch.no_grad():
        steps = []
        for t in range(T):
            steps.append(model(obs[t]))
            model.reset(dones[t])
        steps = torch.stack(steps)
        padded, masks = split_and_pad_trajectories(obs, dones)
        init = _traj_init_states(h0, dones)
        hidden = init if rnn_type == "lstm" else init[0]
        batch = model(padded, masks=masks, hidden_state=hidden)
    assert batch.shape == (T, N, A) and batch.dtype == torch.float32
    assert steps.abs().max() > 0.1  # outputs are not trivially small
    torch.testing.assert_close(batch, steps, rtol=0, atol=1e-5)

    # stochastic batch mode: log-probs per step and env
    sample = model(padded, masks=masks, hidden_state=hidden, stochastic_output=True)
    assert sample.shape == (T, N, A)
    assert model.get_output_log_prob(sample).shape == (T, N)
    torch.testing.assert_close(model.output_mean, steps, rtol=0, atol=1e-5)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_rnn_model_reset_and_detach(make_obs, rnn_type):
    obs = make_obs(N)
    model = build(rnn_type, obs, "actor")
    assert model.get_hidden_state() is None
    model(obs)
    model(obs)
    states = model.get_hidden_state()
    states = states if isinstance(states, tuple) else (states,)
    before = tuple(s.clone() for s in states)
    dones = torch.tensor([0, 1, 0, 0, 1], dtype=torch.bool)
    model.reset(dones)
    after = model.get_hidden_state()
    after = after if isinstance(after, tuple) else (after,)
    for b, a in zip(before, after):
        assert bool((a[:, dones] == 0).all()) and torch.equal(a[:, ~dones], b[:, ~dones])
    # graph cut for finished envs only
    model.reset()
    x = obs.clone()
    x["policy"].requires_grad_(True)
    model(x)
    model.detach_hidden_state(dones)
    out = model(obs)
    grad = torch.autograd.grad(out.sum(), x["policy"])[0]
    assert not bool(grad[dones].any()) and bool(grad[~dones].abs().sum(-1).gt(0).all())
    model.detach_hidden_state()
    s = model.get_hidden_state()
    assert not any(t.requires_grad for t in (s if isinstance(s, tuple) else (s,)))
    model.reset()
    assert model.get_hidden_state() is None


# ---------------------------------------------------------------------------- shared CNN encoders
def test_shared_cnn_encoder_shares_parameters(make_obs):
    obs = make_obs(N)
    actor = build("cnn", obs, "actor")
    critic = CNNModel(obs, GROUPS_2D, "critic", 1, hidden_dims=HIDDEN, cnn_cfg=CNN_CFG,
                      cnns={"height_scan": actor.cnns["height_scan"]})
    shared, own = critic.cnns["height_scan"], critic.cnns["camera"]
    assert shared is actor.cnns["height_scan"]
    assert isinstance(own, CNN)
    for pa, pc in zip(actor.cnns["height_scan"].parameters(), shared.parameters()):
        assert pa is pc
    actor_ids = {id(p) for p in actor.parameters()}
    assert {id(p) for p in shared.parameters()} <= actor_ids
    assert not ({id(p) for p in own.parameters()} & actor_ids)
    # a change through the actor changes the critic's output
    perturb(critic.mlp)
    v0 = critic(obs)
    with torch.no_grad():
        next(actor.cnns["height_scan"].parameters()).add_(1.0)
    assert (critic(obs) - v0).abs().max() > 1e-4
    # one gradient step through the critic moves the actor's encoder weights
    critic(obs).sum().backward()
    w = actor.cnns["height_scan"][0].weight
    assert w.grad is not None and bool(w.grad.any())
