"""Export parity: ONNX (onnxruntime) and TorchScript policies reproduce the eager deterministic output."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

from rlcore.deployment import export_jit, export_onnx
from rlcore.models import CNNModel, MLPModel, RNNModel

pytestmark = pytest.mark.usefixtures("seed")

TOL = 1e-5
A = 3
BETA_RANGE = (-1.5, 2.5)
DISTS = {
    "deterministic": None,
    "gaussian": {"class_name": "GaussianDistribution", "init_std": 0.5},
    "hetero": {"class_name": "HeteroscedasticGaussianDistribution", "init_std": 0.5, "std_type": "log"},
    "beta": {"class_name": "BetaDistribution", "action_range": BETA_RANGE},
}


def _record(key: str, a, b) -> float:
    """Assert that ``a`` and ``b`` agree within TOL (each comparison checks itself); print the max abs error."""
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (key, a.shape, b.shape)
    err = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
    print(f"{key}: max abs error {err:.3e}")
    assert err <= TOL, f"{key}: max abs error {err:.3e} > {TOL}"
    return err


def _perturb(model: torch.nn.Module, scale: float = 0.2) -> None:
    """Move parameters away from their small initial values so that the outputs are O(1)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))


def _shifted_normalizer(model, obs_fn) -> None:
    """Give the normaliser non-trivial statistics (mean far from 0, std far from 1)."""
    for _ in range(3):
        model.update_normalization(obs_fn(32))
    norm = model.obs_normalizer
    assert norm.mean.abs().min() > 1.0
    assert (norm.std - 1.0).abs().max() > 0.5


def _session(path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _names(sess: ort.InferenceSession) -> tuple[list[str], list[str]]:
    return [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]


def _jit_roundtrip(jit_module, path):
    export_jit(jit_module, path)
    return torch.jit.load(str(path))


# ---------------------------------------------------------------------------- MLP
def _mlp_obs(n: int) -> TensorDict:
    return TensorDict(
        {"policy": torch.randn(n, 7) * 3.0 + 5.0, "privileged": torch.randn(n, 3) * 0.2 - 4.0}, batch_size=[n]
    )


@pytest.mark.parametrize("dist", list(DISTS))
def test_mlp_export_parity(tmp_path, dist):
    groups = {"actor": ["policy", "privileged"]}
    model = MLPModel(_mlp_obs(4), groups, "actor", A, hidden_dims=[16, 16], obs_normalization=True,
                     distribution_cfg=DISTS[dist])
    _perturb(model)
    _shifted_normalizer(model, _mlp_obs)
    model.eval()
    obs = _mlp_obs(6)  # batch 6, export example has batch 1
    with torch.no_grad():
        expected = model(obs)
        x = torch.cat([obs["policy"], obs["privileged"]], -1)
        without_norm = model.distribution.deterministic_output(model.mlp(x)) if model.distribution else model.mlp(x)
    assert expected.shape == (6, A)
    # the normaliser matters: a graph without it would be far off
    assert (without_norm - expected).abs().max() > 1e-2
    if dist == "beta":
        assert bool(((expected > BETA_RANGE[0]) & (expected < BETA_RANGE[1])).all())
        assert expected.std(0).max() > 1e-2  # not just the midpoint

    path = export_onnx(model.as_onnx(), tmp_path / "mlp.onnx")
    onnx.checker.check_model(onnx.load(path))
    sess = _session(path)
    assert _names(sess) == (["obs"], ["actions"])
    (actions,) = sess.run(None, {"obs": x.numpy()})
    _record(f"mlp[{dist}] onnx", actions, expected)
    (one,) = sess.run(None, {"obs": x[:1].numpy()})
    _record(f"mlp[{dist}] onnx", one, expected[:1])

    jit = model.as_jit()
    with torch.no_grad():
        _record(f"mlp[{dist}] jit", jit(x), expected)
        loaded = _jit_roundtrip(jit, tmp_path / "mlp.pt")
        _record(f"mlp[{dist}] jit-loaded", loaded(x), expected)
        loaded.reset()  # uniform deployment interface
        _record(f"mlp[{dist}] jit-loaded", loaded(x[2:5]), expected[2:5])


def test_export_does_not_alias_the_model(tmp_path):
    groups = {"actor": ["policy"]}
    model = MLPModel(_mlp_obs(4), groups, "actor", A, hidden_dims=[8], obs_normalization=True)
    _perturb(model)
    jit = model.as_jit()
    onnx_module = model.as_onnx()
    x = torch.randn(5, 7)
    with torch.no_grad():
        before = jit(x)
        _perturb(model)  # training continues after an export
        model.update_normalization(_mlp_obs(16))
        torch.testing.assert_close(jit(x), before, rtol=0, atol=0)
        torch.testing.assert_close(onnx_module(x), before, rtol=0, atol=0)
        assert (model(TensorDict({"policy": x}, batch_size=[5])) - before).abs().max() > 1e-3


# ---------------------------------------------------------------------------- CNN
def _cnn_obs(n: int) -> TensorDict:
    return TensorDict(
        {
            "policy": torch.randn(n, 7) * 2.0 + 3.0,
            "height_scan": torch.randn(n, 1, 9, 11),
            "camera": torch.rand(n, 2, 8, 8),
        },
        batch_size=[n],
    )


@pytest.mark.parametrize("dist", ["gaussian", "beta"])
def test_cnn_export_parity(tmp_path, dist):
    # obs_groups order: camera first, so the image inputs follow that order
    groups = {"actor": ["camera", "policy", "height_scan"]}
    cnn_cfg = {
        "camera": dict(output_channels=[4, 4], stride=[2, 1], norm="batch", max_pool=[False, True]),
        "height_scan": dict(output_channels=[3, 4], kernel_size=[3, 4], dilation=[2, 1], norm="layer"),
    }
    model = CNNModel(_cnn_obs(4), groups, "actor", A, hidden_dims=[16], obs_normalization=True,
                     distribution_cfg=DISTS[dist], cnn_cfg=cnn_cfg)
    _perturb(model)
    _shifted_normalizer(model, _cnn_obs)
    # batch-norm running statistics away from their defaults
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(_cnn_obs(16))
    bn = model.cnns["camera"][1]
    assert isinstance(bn, torch.nn.BatchNorm2d) and bn.running_mean.abs().max() > 1e-3
    model.eval()

    obs = _cnn_obs(6)
    with torch.no_grad():
        expected = model(obs)
    assert expected.shape == (6, A) and expected.std(0).max() > 1e-2

    wrapper = model.as_onnx()
    assert [name for name, _ in model.export_inputs()] == ["obs", "camera", "height_scan"]
    path = export_onnx(wrapper, tmp_path / "cnn.onnx")
    sess = _session(path)
    assert _names(sess) == (["obs", "camera", "height_scan"], ["actions"])
    feeds = {"obs": obs["policy"].numpy(), "camera": obs["camera"].numpy(), "height_scan": obs["height_scan"].numpy()}
    (actions,) = sess.run(None, feeds)
    _record(f"cnn[{dist}] onnx", actions, expected)
    (two,) = sess.run(None, {k: v[1:3] for k, v in feeds.items()})
    _record(f"cnn[{dist}] onnx", two, expected[1:3])

    args = (obs["policy"], obs["camera"], obs["height_scan"])
    jit = model.as_jit()
    with torch.no_grad():
        _record(f"cnn[{dist}] jit", jit(*args), expected)
        loaded = _jit_roundtrip(jit, tmp_path / "cnn.pt")
        _record(f"cnn[{dist}] jit-loaded", loaded(*args), expected)
        _record(f"cnn[{dist}] jit-loaded", loaded(*(a[:2] for a in args)), expected[:2])


def test_cnn_export_images_only(tmp_path):
    obs = _cnn_obs(5)
    model = CNNModel(obs, {"actor": ["height_scan", "camera"]}, "actor", A, hidden_dims=[8],
                     cnn_cfg=dict(output_channels=[3], stride=2))
    _perturb(model)
    model.eval()
    with torch.no_grad():
        expected = model(obs)
    sess = _session(export_onnx(model.as_onnx(), tmp_path / "img.onnx"))
    assert _names(sess) == (["height_scan", "camera"], ["actions"])
    (actions,) = sess.run(None, {"height_scan": obs["height_scan"].numpy(), "camera": obs["camera"].numpy()})
    _record("cnn[images-only] onnx", actions, expected)
    with torch.no_grad():
        _record("cnn[images-only] jit", model.as_jit()(obs["height_scan"], obs["camera"]), expected)


# ---------------------------------------------------------------------------- RNN
def _rnn_obs(n: int) -> TensorDict:
    return TensorDict({"policy": torch.randn(n, 7) * 2.0 - 3.0, "privileged": torch.randn(n, 3) + 4.0},
                      batch_size=[n])


@pytest.mark.parametrize(
    "rnn_type, layers, dist", [("gru", 1, "gaussian"), ("gru", 2, "beta"), ("lstm", 1, "beta"), ("lstm", 2, "gaussian")]
)
@pytest.mark.slow
def test_rnn_export_parity(tmp_path, rnn_type, layers, dist):
    T, N, H = 20, 3, 8
    groups = {"actor": ["policy", "privileged"]}
    model = RNNModel(_rnn_obs(4), groups, "actor", A, hidden_dims=[16], obs_normalization=True,
                     distribution_cfg=DISTS[dist], rnn_type=rnn_type, rnn_hidden_dim=H, rnn_num_layers=layers)
    _perturb(model)
    _shifted_normalizer(model, _rnn_obs)
    model.eval()
    seq = [_rnn_obs(N) for _ in range(T)]
    xs = [torch.cat([o["policy"], o["privileged"]], -1) for o in seq]
    lstm = rnn_type == "lstm"
    key = f"{rnn_type}x{layers}[{dist}]"

    # eager reference, with the state of env 1 reset after step 6 (ONNX caller zeroes its state rows)
    model.reset()
    expected, states = [], []
    with torch.no_grad():
        for t in range(T):
            expected.append(model(seq[t]))
            s = model.get_hidden_state()
            states.append(tuple(x.clone() for x in (s if lstm else (s,))))
            if t == 6:
                model.reset(torch.tensor([False, True, False]))
    assert expected[0].shape == (N, A)
    # the recurrent state matters: same input at a later step gives a different output
    with torch.no_grad():
        model.reset()
        first = model(seq[0])
        later = model(seq[0])
    assert (later - first).abs().max() > 1e-3

    path = export_onnx(model.as_onnx(), tmp_path / f"{rnn_type}.onnx")
    sess = _session(path)
    if lstm:
        assert _names(sess) == (["obs", "h_in", "c_in"], ["actions", "h_out", "c_out"])
    else:
        assert _names(sess) == (["obs", "h_in"], ["actions", "h_out"])
    h = np.zeros((layers, N, H), dtype=np.float32)
    c = np.zeros((layers, N, H), dtype=np.float32)
    for t in range(T):
        feeds = {"obs": xs[t].numpy(), "h_in": h}
        if lstm:
            feeds["c_in"] = c
            actions, h, c = sess.run(None, feeds)
        else:
            actions, h = sess.run(None, feeds)
        assert h.shape == (layers, N, H)
        _record(f"{key} onnx", actions, expected[t])
        _record(f"{key} onnx-state", h, states[t][0])
        if lstm:
            _record(f"{key} onnx-state", c, states[t][1])
        if t == 6:
            h = h.copy()
            h[:, 1] = 0.0
            if lstm:
                c = c.copy()
                c[:, 1] = 0.0

    # TorchScript carries its own state; eager reference without partial resets
    model.reset()
    with torch.no_grad():
        expected_full = [model(o) for o in seq]
    jit = model.as_jit()
    with torch.no_grad():
        for t in range(T):
            _record(f"{key} jit", jit(xs[t]), expected_full[t])
        jit.reset()  # back to zeros: the sequence replays identically
        for t in range(5):
            _record(f"{key} jit", jit(xs[t]), expected_full[t])
        loaded = _jit_roundtrip(model.as_jit(), tmp_path / f"{rnn_type}.pt")
        for t in range(T):
            _record(f"{key} jit-loaded", loaded(xs[t]), expected_full[t])
        # a different batch size (1 after 3) starts from a fresh zero state
        model.reset()
        single = [model(o[:1]) for o in seq[:4]]
        for t in range(4):
            _record(f"{key} jit-loaded", loaded(xs[t][:1]), single[t])


def test_cnn_export_flattened_group(tmp_path):
    """A 2D group with no conv layer (``output_channels: []``) enters the head as its raw values, row-major,
    beside the normalised 1D groups and another group's CNN; the exported graph takes it as its own input."""
    obs = _cnn_obs(5)
    cnn_cfg = {"height_scan": dict(output_channels=[]), "camera": dict(output_channels=[3], stride=2)}
    model = CNNModel(obs, {"actor": ["policy", "height_scan", "camera"]}, "actor", A, hidden_dims=[8],
                     obs_normalization=True, cnn_cfg=cnn_cfg)
    _perturb(model)
    model.eval()
    with torch.no_grad():
        latent = model.get_latent(obs)
        scan = obs["height_scan"].reshape(5, -1)
        d = model.obs_dim
        torch.testing.assert_close(latent[:, :d], model.obs_normalizer(obs["policy"]), rtol=0, atol=0)
        torch.testing.assert_close(latent[:, d:d + scan.shape[1]], scan, rtol=0, atol=0)
        assert latent.shape[1] == d + scan.shape[1] + model.cnns["camera"].output_dim
        expected = model(obs)
    sess = _session(export_onnx(model.as_onnx(), tmp_path / "flat.onnx"))
    assert _names(sess) == (["obs", "height_scan", "camera"], ["actions"])
    feeds = {"obs": obs["policy"].numpy(), "height_scan": obs["height_scan"].numpy(), "camera": obs["camera"].numpy()}
    (actions,) = sess.run(None, feeds)
    _record("cnn[flattened group] onnx", actions, expected)
