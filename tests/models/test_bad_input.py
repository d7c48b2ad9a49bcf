"""Bad configurations and observations fail at construction with a message that says what is wrong."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore.models import CNNModel, MLPModel, RNNModel, select_obs_groups

pytestmark = pytest.mark.usefixtures("seed")

A = 2
SMALL = dict(hidden_dims=[8])
CNN_CFG = dict(output_channels=[2], stride=2)
ALL_MODELS = [
    (MLPModel, {}),
    (RNNModel, dict(rnn_hidden_dim=4)),
    (CNNModel, dict(cnn_cfg=CNN_CFG)),
]


def _build(cls, obs, groups, obs_set="actor", **kw):
    extra = dict(kw)
    if cls is RNNModel:
        extra.setdefault("rnn_hidden_dim", 4)
    if cls is CNNModel:
        extra.setdefault("cnn_cfg", CNN_CFG)
    return cls(obs, groups, obs_set, A, **SMALL, **extra)


# ---------------------------------------------------------------------------- observation groups and sets
@pytest.mark.parametrize("cls", [MLPModel, RNNModel, CNNModel])
def test_missing_group_is_named_with_the_groups_present(make_obs, cls):
    obs = make_obs(3)
    groups = {"actor": ["policy", "height_scan", "lidar"]} if cls is CNNModel else {"actor": ["policy", "lidar"]}
    with pytest.raises(ValueError, match=r"'lidar'.*not provided by the environment") as info:
        _build(cls, obs, groups)
    msg = str(info.value)
    assert "available groups: policy, privileged, height_scan, camera" in msg
    assert "observation set 'actor'" in msg


@pytest.mark.parametrize("cls", [MLPModel, RNNModel, CNNModel])
def test_missing_obs_set(make_obs, cls):
    obs = make_obs(3)
    with pytest.raises(ValueError, match=r"Observation set 'critic' is not in obs_groups") as info:
        _build(cls, obs, {"actor": ["policy"], "student": ["policy"]}, "critic")
    assert "actor" in str(info.value) and "student" in str(info.value)


def test_empty_obs_set(make_obs):
    with pytest.raises(ValueError, match=r"Observation set 'actor' lists no observation groups"):
        _build(MLPModel, make_obs(3), {"actor": []})


@pytest.mark.parametrize("cls", [MLPModel, RNNModel])
@pytest.mark.parametrize("group", ["height_scan", "camera"])
def test_2d_group_in_mlp_or_rnn_model(make_obs, cls, group):
    with pytest.raises(ValueError, match=r"use CNNModel") as info:
        _build(cls, make_obs(3), {"actor": ["policy", group]})
    msg = str(info.value)
    assert f"{cls.__name__} takes only 1D observation groups" in msg
    assert group in msg


def test_cnn_model_with_only_1d_groups(make_obs):
    with pytest.raises(ValueError, match=r"CNNModel needs at least one 2D observation group") as info:
        _build(CNNModel, make_obs(3), {"actor": ["policy", "privileged"]})
    assert "use MLPModel" in str(info.value)
    assert "['policy', 'privileged']" in str(info.value)


@pytest.mark.parametrize("cls", [MLPModel, RNNModel, CNNModel])
@pytest.mark.parametrize("shape", [(4, 5), (1, 2, 3, 4), ()])
def test_unsupported_group_rank(make_obs, cls, shape):
    obs = make_obs(3)
    obs["weird"] = torch.randn(3, *shape)
    groups = {"actor": ["policy", "camera", "weird"]} if cls is CNNModel else {"actor": ["policy", "weird"]}
    with pytest.raises(ValueError, match=r"groups must be 1D \[D\] or 2D images \[C, H, W\]") as info:
        _build(cls, obs, groups)
    assert f"'weird' has per-env shape {shape}" in str(info.value)


def test_select_obs_groups_splits_by_rank(make_obs):
    obs = make_obs(3, lead=(2,))  # batch dims [T, N] are not counted in the rank
    one_d, two_d = select_obs_groups(obs, {"s": ["camera", "policy", "height_scan", "privileged"]}, "s")
    assert one_d == ["policy", "privileged"] and two_d == ["camera", "height_scan"]


# ---------------------------------------------------------------------------- names in configs
@pytest.mark.parametrize("cls, kw", ALL_MODELS)
def test_unknown_activation(make_obs, cls, kw):
    with pytest.raises(ValueError, match=r"Unknown activation 'relu6'") as info:
        _build(cls, make_obs(3), {"actor": ["policy", "camera"] if cls is CNNModel else ["policy"]},
               activation="relu6", **kw)
    msg = str(info.value)
    for name in ("elu", "tanh", "relu", "selu", "silu"):
        assert re.search(rf"\b{name}\b", msg), name


def test_unknown_cnn_activation(make_obs):
    with pytest.raises(ValueError, match=r"Unknown activation 'sine'.*elu.*tanh"):
        _build(CNNModel, make_obs(3), {"actor": ["camera"]}, cnn_cfg=dict(output_channels=[2], activation="sine"))


@pytest.mark.parametrize("cls, kw", ALL_MODELS)
def test_unknown_distribution(make_obs, cls, kw):
    with pytest.raises(ValueError, match=r"Unknown distribution 'LaplaceDistribution'") as info:
        _build(cls, make_obs(3), {"actor": ["policy", "camera"] if cls is CNNModel else ["policy"]},
               distribution_cfg={"class_name": "LaplaceDistribution"}, **kw)
    msg = str(info.value)
    for name in ("GaussianDistribution", "HeteroscedasticGaussianDistribution", "BetaDistribution"):
        assert name in msg


def test_distribution_config_errors(make_obs):
    obs = make_obs(3)
    with pytest.raises(ValueError, match=r"needs a 'class_name' key"):
        _build(MLPModel, obs, {"actor": ["policy"]}, distribution_cfg={"init_std": 1.0})
    with pytest.raises(TypeError, match=r"Unknown argument\(s\) \['init_sdt'\] for GaussianDistribution"):
        _build(MLPModel, obs, {"actor": ["policy"]},
               distribution_cfg={"class_name": "GaussianDistribution", "init_sdt": 1.0})


@pytest.mark.parametrize("rnn_type", ["transformer", "rnn", ""])
def test_unknown_rnn_type(make_obs, rnn_type):
    with pytest.raises(ValueError, match=rf"Unknown rnn_type '{rnn_type}'\. Valid types: gru, lstm"):
        _build(RNNModel, make_obs(3), {"actor": ["policy"]}, rnn_type=rnn_type)


def test_init_gains_length(make_obs):
    with pytest.raises(ValueError, match=r"init_gains has 1 entries but the MLP has 2 Linear layers"):
        _build(MLPModel, make_obs(3), {"actor": ["policy"]}, init_gains=[1.0])


# ---------------------------------------------------------------------------- shared CNN encoders
def test_shared_cnn_encoder_shape_mismatch(make_obs):
    obs = make_obs(3)
    actor = _build(CNNModel, obs, {"actor": ["policy", "height_scan"]})
    other = TensorDict({"privileged": torch.randn(3, 3), "height_scan": torch.randn(3, 1, 9, 12)}, batch_size=[3])
    with pytest.raises(ValueError, match=r"Shared CNN encoder for group 'height_scan'") as info:
        _build(CNNModel, other, {"critic": ["privileged", "height_scan"]}, "critic",
               cnns={"height_scan": actor.cnns["height_scan"]})
    msg = str(info.value)
    assert "[1, 9, 11]" in msg and "[1, 9, 12]" in msg
    # a channel mismatch is caught too
    other["height_scan"] = torch.randn(3, 2, 9, 11)
    with pytest.raises(ValueError, match=r"\[1, 9, 11\].*\[2, 9, 11\]"):
        _build(CNNModel, other, {"critic": ["height_scan"]}, "critic", cnns={"height_scan": actor.cnns["height_scan"]})


def test_shared_cnn_encoder_must_flatten(make_obs):
    from rlcore.modules import CNN

    obs = make_obs(3)
    enc = CNN((9, 11), 1, output_channels=[2], flatten=False)
    with pytest.raises(ValueError, match=r"must flatten its output"):
        _build(CNNModel, obs, {"actor": ["height_scan"]}, cnns={"height_scan": enc})


# ---------------------------------------------------------------------------- CNN configs
@pytest.mark.parametrize(
    "cnn_cfg, match",
    [
        (dict(output_channels=[2, 4], kernel_size=[3, 3, 3]), r"CNN 'kernel_size' has 3 entries but there are 2 conv"),
        (dict(output_channels=[2, 4], stride=[2]), r"CNN 'stride' has 1 entries but there are 2 conv"),
        (dict(output_channels=[2, 4], norm=["layer", "batch", "none"]), r"CNN 'norm' has 3 entries"),
        (dict(output_channels=[2], norm="instance"), r"Unknown CNN norm 'instance'\. Valid: none, batch, layer"),
        (dict(output_channels=[2], global_pool="sum"), r"Unknown CNN global_pool 'sum'"),
        (dict(output_channels=[], global_pool="max"), r"without conv layers .* needs flatten=True"),
        (dict(output_channels=[2] * 4, max_pool=True), r"shrink the \(8, 8\) input to nothing"),
        ({"height_scan": dict(output_channels=[2])}, r"cnn_cfg has per-group entries \['height_scan'\] but none for "
                                                     r"2D group 'camera'"),
    ],
)
def test_cnn_config_errors(make_obs, cnn_cfg, match):
    with pytest.raises(ValueError, match=match):
        _build(CNNModel, make_obs(3), {"actor": ["policy", "camera"]}, cnn_cfg=cnn_cfg)


def test_unknown_cnn_argument(make_obs):
    with pytest.raises(TypeError, match=r"kernel"):
        _build(CNNModel, make_obs(3), {"actor": ["camera"]}, cnn_cfg=dict(output_channels=[2], kernel=3))


# ---------------------------------------------------------------------------- recurrent batch mode
def test_rnn_batch_mode_without_hidden_state(make_obs):
    from rlcore.utils.trajectories import split_and_pad_trajectories

    obs = make_obs(3, lead=(4,))
    model = _build(RNNModel, obs[0], {"actor": ["policy"]})
    padded, masks = split_and_pad_trajectories(obs, torch.zeros(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"needs the hidden states saved at trajectory starts"):
        model(padded, masks=masks)
