"""Tests of rlcore.modules.cnn.CNN: per-layer settings, computed output shapes, initialisation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from rlcore.modules.cnn import CNN

pytestmark = pytest.mark.usefixtures("seed")

# (id, input (C, H, W), CNN kwargs, expected output_shape worked out by hand)
# Conv output size: floor((H + 2p - d(k-1) - 1) / s) + 1 with p = d(k-1)//2.
CONFIGS = [
    # k3 s1: size kept; 8 * 9 * 11
    ("default", (1, 9, 11), dict(output_channels=[4, 8]), (792,)),
    # stride 2: 9x11 -> 5x6 -> 3x3
    ("stride2", (1, 9, 11), dict(output_channels=[4, 8], stride=2), (72,)),
    # dilation 2 with stride 2 on layer 2 (pad 2): 9x11 -> 9x11 -> 5x6
    ("dilation2", (1, 9, 11), dict(output_channels=[4, 8], dilation=[1, 2], stride=[1, 2]), (240,)),
    # even kernels: k4 (pad 1) 9x11 -> 8x10, k2 (pad 0) -> 7x9; not flattened
    ("even_kernel", (1, 9, 11), dict(output_channels=[3, 5], kernel_size=[4, 2], flatten=False), (5, 7, 9)),
    # layer norm + max pool on layer 1: 8x8 -> 8x8 -> pool 4x4 -> 4x4
    ("layer_norm_pool", (2, 8, 8), dict(output_channels=[4, 6], norm="layer", max_pool=[True, False]), (96,)),
    # batch norm on layer 1 only, k5 stride 2: 8x8 -> 4x4 -> 4x4, pool -> 2x2
    ("batch_norm", (2, 8, 8), dict(output_channels=[4, 6], kernel_size=[5, 3], stride=[2, 1], norm=["batch", "none"],
                                   max_pool=[False, True]), (24,)),
    ("global_avg", (2, 8, 8), dict(output_channels=[4, 6], global_pool="avg"), (6,)),
    ("global_max_noflat", (2, 8, 8), dict(output_channels=[4, 6], global_pool="max", flatten=False), (6, 1, 1)),
    ("global_avg_noflat", (1, 9, 11), dict(output_channels=[5], stride=2, global_pool="avg", flatten=False), (5, 1, 1)),
    # odd sizes with pooling floor: 9x11 -> pool 4x5 -> s2 2x3 -> pool 1x1
    ("pool_floor", (1, 9, 11), dict(output_channels=[2, 3], stride=[1, 2], max_pool=True), (3,)),
]


@pytest.mark.parametrize("shape, kwargs, expected", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_shape_matches_real_output(shape, kwargs, expected, dtype):
    cnn = CNN(input_dim=shape[1:], input_channels=shape[0], **kwargs).to(dtype)
    assert cnn.input_shape == shape
    assert cnn.output_shape == expected
    flatten = kwargs.get("flatten", True)
    if flatten:
        assert cnn.output_dim == expected[0]
    else:
        assert tuple(cnn.output_dim) == expected
    cnn.train()  # batch norm in training mode needs a batch > 1
    out = cnn(torch.randn(3, *shape, dtype=dtype))
    assert out.shape == (3, *expected)
    assert out.dtype == dtype
    cnn.eval()
    out = cnn(torch.randn(1, *shape, dtype=dtype))
    assert out.shape == (1, *expected)


def test_per_layer_settings():
    cnn = CNN(
        input_dim=(9, 11),
        input_channels=2,
        output_channels=[4, 6, 3],
        kernel_size=[3, 5, 4],
        stride=[1, 2, 1],
        dilation=[2, 1, 1],
        norm=["batch", "layer", "none"],
        activation="relu",
        max_pool=[False, True, False],
    )
    convs = [m for m in cnn if isinstance(m, nn.Conv2d)]
    assert [c.in_channels for c in convs] == [2, 4, 6]
    assert [c.out_channels for c in convs] == [4, 6, 3]
    assert [c.kernel_size for c in convs] == [(3, 3), (5, 5), (4, 4)]
    assert [c.stride for c in convs] == [(1, 1), (2, 2), (1, 1)]
    assert [c.dilation for c in convs] == [(2, 2), (1, 1), (1, 1)]
    # 'same' padding d * (k - 1) // 2
    assert [c.padding for c in convs] == [(2, 2), (2, 2), (1, 1)]
    types = [type(m) for m in cnn]
    assert types == [
        nn.Conv2d, nn.BatchNorm2d, nn.ReLU,
        nn.Conv2d, nn.LayerNorm, nn.ReLU, nn.MaxPool2d,
        nn.Conv2d, nn.ReLU,
        nn.Flatten,
    ]
    bn = cnn[1]
    assert bn.num_features == 4
    # layer 2: 9x11 -> (9+4-4-1)//2+1 = 5, (11+4-4-1)//2+1 = 6; LayerNorm over [C, H, W] before pooling
    ln = cnn[4]
    assert tuple(ln.normalized_shape) == (6, 5, 6)
    # pool 5x6 -> 2x3; layer 3 (k4, pad 1): 1x2
    assert cnn.output_shape == (3 * 1 * 2,)
    assert cnn(torch.randn(2, 2, 9, 11)).shape == (2, 6)


def test_scalar_settings_broadcast_to_all_layers():
    cnn = CNN((8, 8), 1, output_channels=[2, 3, 4], kernel_size=5, stride=2, norm="layer", activation="tanh",
              max_pool=False)
    convs = [m for m in cnn if isinstance(m, nn.Conv2d)]
    assert all(c.kernel_size == (5, 5) and c.stride == (2, 2) and c.padding == (2, 2) for c in convs)
    assert sum(isinstance(m, nn.LayerNorm) for m in cnn) == 3
    assert sum(isinstance(m, nn.Tanh) for m in cnn) == 3
    assert not any(isinstance(m, nn.MaxPool2d) for m in cnn)
    # 8 -> 4 -> 2 -> 1
    assert cnn.output_shape == (4,)


def test_global_pools_compute_spatial_mean_and_max():
    x = torch.randn(3, 2, 8, 8)
    avg = CNN((8, 8), 2, output_channels=[4], global_pool="avg", flatten=False)
    mx = CNN((8, 8), 2, output_channels=[4], global_pool="max")
    mx.load_state_dict(avg.state_dict())
    features = avg[1](avg[0](x))  # conv -> elu, [3, 4, 8, 8]
    torch.testing.assert_close(avg(x), features.mean(dim=(-2, -1), keepdim=True))
    torch.testing.assert_close(mx(x), features.amax(dim=(-2, -1)))


def test_flatten_false_keeps_feature_map():
    cnn = CNN((6, 7), 3, output_channels=[5], flatten=False)
    flat = CNN((6, 7), 3, output_channels=[5], flatten=True)
    flat.load_state_dict(cnn.state_dict())
    x = torch.randn(2, 3, 6, 7)
    y = cnn(x)
    assert y.shape == (2, 5, 6, 7) and cnn.output_shape == (5, 6, 7)
    torch.testing.assert_close(flat(x), y.reshape(2, -1), rtol=0, atol=0)
    assert flat.output_dim == 5 * 6 * 7


def test_kaiming_init():
    cnn = CNN((16, 16), 8, output_channels=[64, 32], kernel_size=[3, 5], norm="batch")
    convs = [m for m in cnn if isinstance(m, nn.Conv2d)]
    for conv in convs:
        assert torch.count_nonzero(conv.bias) == 0
        fan_out = conv.out_channels * conv.kernel_size[0] * conv.kernel_size[1]
        fan_in = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
        expected = math.sqrt(2.0 / fan_out)
        std = conv.weight.std().item()
        assert std == pytest.approx(expected, rel=0.05)
        # mode is fan_out, not fan_in (these differ by far more than the tolerance here)
        assert abs(math.sqrt(2.0 / fan_in) - expected) > 0.2 * expected
        assert abs(conv.weight.mean().item()) < 0.1 * expected


def test_init_weights_reinitialises():
    cnn = CNN((8, 8), 4, output_channels=[32])
    with torch.no_grad():
        cnn[0].weight.fill_(1.0)
        cnn[0].bias.fill_(1.0)
    cnn.init_weights()
    assert torch.count_nonzero(cnn[0].bias) == 0
    assert cnn[0].weight.std().item() == pytest.approx(math.sqrt(2.0 / (32 * 9)), rel=0.1)


def test_forward_equals_layer_composition():
    cnn = CNN((9, 11), 1, output_channels=[3, 4], stride=[2, 1], norm="layer", max_pool=[False, True])
    x = torch.randn(4, 1, 9, 11)
    ref = x
    for m in cnn:
        ref = m(ref)
    torch.testing.assert_close(cnn(x), ref, rtol=0, atol=0)
    # samples are processed independently (no norm mixing the batch with layer norm)
    torch.testing.assert_close(cnn(x[:1]), ref[:1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(output_channels=[4, 8], kernel_size=[3, 3, 3]), r"'kernel_size' has 3 entries but there are 2 conv layers"),
        (dict(output_channels=[4, 8], stride=[1]), r"'stride' has 1 entries but there are 2 conv layers"),
        (dict(output_channels=[4, 8], dilation=(1, 1, 1)), r"'dilation' has 3 entries"),
        (dict(output_channels=[4, 8], norm=["batch"]), r"'norm' has 1 entries"),
        (dict(output_channels=[4, 8], max_pool=[True]), r"'max_pool' has 1 entries"),
        (dict(output_channels=[4], norm="group"), r"Unknown CNN norm 'group'\. Valid: none, batch, layer"),
        (dict(output_channels=[4], global_pool="mean"), r"Unknown CNN global_pool 'mean'\. Valid: none, avg, max"),
        (dict(output_channels=[], flatten=False), r"without conv layers .* only flattens its input"),
        (dict(output_channels=[], global_pool="avg"), r"needs flatten=True and global_pool='none'"),
        (dict(output_channels=[4, 4, 4], max_pool=True), r"shrink the \(5, 5\) input to nothing"),
        (dict(output_channels=[4] * 5, kernel_size=2), r"shrink the \(5, 5\) input to nothing"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CNN((5, 5), 1, **kwargs)


def test_no_conv_layer_flattens_the_image():
    """``output_channels: []``: no parameter, the values in row-major order, per-layer lists not applied."""
    cnn = CNN((3, 4), 2, output_channels=[], stride=[2, 2])
    assert cnn.output_dim == 24 and cnn.output_shape == (24,)
    assert sum(p.numel() for p in cnn.parameters()) == 0
    x = torch.randn(5, 2, 3, 4)
    torch.testing.assert_close(cnn(x), x.reshape(5, 24), rtol=0, atol=0)


def test_input_dim_must_be_2d():
    with pytest.raises(ValueError, match=r"input_dim must be \(H, W\), got \(1, 5, 5\)"):
        CNN((1, 5, 5), 1, output_channels=[4])
