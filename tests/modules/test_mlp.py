"""Tests of rlcore.modules.mlp.MLP and rlcore.modules.activation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from rlcore.modules.activation import ACTIVATIONS, activation_gain, resolve_activation
from rlcore.modules.mlp import MLP

pytestmark = pytest.mark.usefixtures("seed")


def _gram(w: torch.Tensor) -> torch.Tensor:
    """``W W^T`` for a wide/square weight (orthogonal rows), ``W^T W`` for a tall one (orthogonal columns)."""
    w = w.double()
    return w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w


def _assert_orthogonal(w: torch.Tensor, gain: float) -> None:
    g = _gram(w)
    eye = torch.eye(g.shape[0], dtype=torch.float64)
    torch.testing.assert_close(g, gain**2 * eye, atol=1e-5 * max(gain**2, 1.0), rtol=0.0)


# ---------------------------------------------------------------------------- structure and shapes
def test_hidden_minus_one_means_input_size():
    mlp = MLP(5, 3, hidden_dims=[-1, 8, -1])
    shapes = [tuple(layer.weight.shape) for layer in mlp.linear_layers]
    # Linear weights are [out, in]: 5 -> 5 -> 8 -> 5 -> 3
    assert shapes == [(5, 5), (8, 5), (5, 8), (3, 5)]
    assert mlp.input_dim == 5 and mlp.output_dim == 3 and mlp.output_shape == (3,)


@pytest.mark.parametrize("lead", [(6,), (4, 6), (1,)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_shape_and_dtype(lead, dtype):
    mlp = MLP(5, 3, hidden_dims=[8, 8]).to(dtype)
    x = torch.randn(*lead, 5, dtype=dtype)
    y = mlp(x)
    assert y.shape == (*lead, 3)
    assert y.dtype == dtype
    # the forward is x W1^T + b1 -> ELU -> W2, b2 -> ELU -> W3, b3, written out from the weights
    ref = x
    layers = mlp.linear_layers
    for i, layer in enumerate(layers):
        ref = ref @ layer.weight.T + layer.bias
        if i < len(layers) - 1:
            ref = torch.where(ref > 0, ref, torch.expm1(ref))  # ELU(alpha=1)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(y, ref, rtol=tol, atol=tol)
    assert not torch.allclose(y, torch.zeros_like(y))  # the comparison is not between two near-zero outputs


def test_structured_output_dim():
    A = 4
    mlp = MLP(6, [2, A], hidden_dims=[10])
    assert mlp.output_shape == (2, A) and mlp.output_dim == 2 * A
    assert mlp.linear_layers[-1].out_features == 2 * A
    x = torch.randn(5, 6)
    y = mlp(x)
    assert y.shape == (5, 2, A) and y.dtype == torch.float32
    # row-major reshape of the flat last Linear output: first A values -> [:, 0], next A -> [:, 1]
    flat = x
    for m in mlp:
        if isinstance(m, nn.Unflatten):
            break
        flat = m(flat)
    assert flat.shape == (5, 2 * A)
    torch.testing.assert_close(y[:, 0], flat[:, :A], rtol=0, atol=0)
    torch.testing.assert_close(y[:, 1], flat[:, A:], rtol=0, atol=0)
    # leading dims are kept
    assert mlp(torch.randn(3, 5, 6)).shape == (3, 5, 2, A)


def test_layer_sequence_and_last_activation():
    mlp = MLP(4, 2, hidden_dims=[3, 5], activation="tanh", last_activation="sigmoid")
    types = [type(m) for m in mlp]
    assert types == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear, nn.Sigmoid]
    y = mlp(100.0 * torch.randn(50, 4))
    assert bool(((y >= 0) & (y <= 1)).all())


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_every_activation_name_builds_its_class(name):
    cls = ACTIVATIONS[name]
    mlp = MLP(4, 2, hidden_dims=[3, 3], activation=name)
    acts = [m for m in mlp if not isinstance(m, nn.Linear)]
    assert len(acts) == 2
    assert all(type(m) is cls for m in acts)
    # case-insensitive lookup, and a fresh module on every call
    a1, a2 = resolve_activation(name.upper()), resolve_activation(name)
    assert type(a1) is cls and type(a2) is cls and a1 is not a2
    # the activation really is applied between layers
    x = torch.randn(7, 4)
    h = mlp[0](x)
    torch.testing.assert_close(mlp[1](h), cls()(h))


def test_activation_table_contents():
    # a few names that configs rely on map to the expected torch classes
    assert ACTIVATIONS["elu"] is nn.ELU
    assert ACTIVATIONS["relu"] is nn.ReLU
    assert ACTIVATIONS["tanh"] is nn.Tanh
    assert ACTIVATIONS["swish"] is nn.SiLU
    assert ACTIVATIONS["lrelu"] is nn.LeakyReLU
    assert ACTIVATIONS["linear"] is nn.Identity


# ---------------------------------------------------------------------------- initialisation
@pytest.mark.parametrize(
    "activation, gain",
    [("relu", math.sqrt(2.0)), ("tanh", 5.0 / 3.0), ("elu", math.sqrt(2.0)), ("identity", 1.0), ("selu", 0.75)],
)
def test_default_orthogonal_init(activation, gain):
    assert activation_gain(activation) == pytest.approx(gain)
    mlp = MLP(32, 4, hidden_dims=[32, 16], activation=activation)
    layers = mlp.linear_layers
    # square hidden layer: W W^T = gain^2 I
    assert layers[0].weight.shape == (32, 32)
    _assert_orthogonal(layers[0].weight, gain)
    _assert_orthogonal(layers[1].weight, gain)
    # output layer: small gain 0.01
    _assert_orthogonal(layers[2].weight, 0.01)
    for layer in layers:
        assert torch.count_nonzero(layer.bias) == 0


def test_init_gains_per_layer():
    gains = [0.5, 2.0, 0.1]
    mlp = MLP(32, 4, hidden_dims=[16, 8], init_gains=gains)
    for layer, g in zip(mlp.linear_layers, gains):
        assert layer.weight.shape[0] <= layer.weight.shape[1]
        _assert_orthogonal(layer.weight, g)
        assert torch.count_nonzero(layer.bias) == 0
    # a tall layer is orthogonal column-wise
    tall = MLP(4, 3, hidden_dims=[12], init_gains=[1.5, 1.0])
    assert tall.linear_layers[0].weight.shape == (12, 4)
    _assert_orthogonal(tall.linear_layers[0].weight, 1.5)


def test_init_weights_resets_a_trained_layer():
    mlp = MLP(8, 2, hidden_dims=[8])
    with torch.no_grad():
        for p in mlp.parameters():
            p.add_(1.0)
    mlp.init_weights([3.0, 0.2])
    _assert_orthogonal(mlp.linear_layers[0].weight, 3.0)
    _assert_orthogonal(mlp.linear_layers[1].weight, 0.2)
    assert all(torch.count_nonzero(layer.bias) == 0 for layer in mlp.linear_layers)


def test_init_gains_wrong_length_raises():
    with pytest.raises(ValueError, match=r"init_gains has 2 entries but the MLP has 3 Linear layers"):
        MLP(4, 2, hidden_dims=[8, 8], init_gains=[1.0, 1.0])


def test_unknown_activation_lists_valid_names():
    with pytest.raises(ValueError, match=r"Unknown activation 'relu7'") as info:
        MLP(4, 2, hidden_dims=[8], activation="relu7")
    msg = str(info.value)
    for name in ("elu", "tanh", "relu", "gelu"):
        assert name in msg


def test_scriptable():
    mlp = MLP(6, [2, 3], hidden_dims=[-1, 5])
    scripted = torch.jit.script(mlp)
    x = torch.randn(4, 6)
    torch.testing.assert_close(scripted(x), mlp(x), rtol=0, atol=1e-6)
