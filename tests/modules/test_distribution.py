"""Tests of the output distributions against ``torch.distributions`` references."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn as nn
from torch.distributions import Beta, Normal, TransformedDistribution
from torch.distributions.transforms import AffineTransform

from rlcore.modules.distribution import (
    BetaDistribution,
    Distribution,
    GaussianDistribution,
    HeteroscedasticGaussianDistribution,
    resolve_distribution,
)

B, A = 7, 3
RANGE = (-2.0, 0.5)

# (id, constructor) of every distribution variant under test
VARIANTS = [
    ("gauss_scalar", lambda: GaussianDistribution(A, init_std=0.7, std_type="scalar")),
    ("gauss_log", lambda: GaussianDistribution(A, init_std=0.7, std_type="log")),
    ("hetero_scalar", lambda: HeteroscedasticGaussianDistribution(A, init_std=0.7, std_type="scalar")),
    ("hetero_log", lambda: HeteroscedasticGaussianDistribution(A, init_std=0.7, std_type="log")),
    ("beta", lambda: BetaDistribution(A, action_range=RANGE)),
]
IDS = [v[0] for v in VARIANTS]
MAKERS = [v[1] for v in VARIANTS]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_mlp_output(dist: Distribution, batch: int = B) -> torch.Tensor:
    """Random raw MLP output of the shape the distribution expects (valid std for the scalar heteroscedastic case)."""
    shape = [batch] + ([dist.input_dim] if isinstance(dist.input_dim, int) else list(dist.input_dim))
    out = torch.randn(shape)
    if isinstance(dist, HeteroscedasticGaussianDistribution) and dist.std_type == "scalar":
        out[:, 1] = torch.rand(batch, A) * 2.0 + 0.1
    return out


def randomize_std_param(dist: Distribution) -> None:
    """Give state-independent Gaussians a non-uniform std so per-dimension handling is exercised."""
    with torch.no_grad():
        if isinstance(dist, HeteroscedasticGaussianDistribution):
            return
        if isinstance(dist, GaussianDistribution):
            std = torch.tensor([0.3, 1.0, 2.5])
            if dist.std_type == "scalar":
                dist.std_param.copy_(std)
            else:
                dist.log_std_param.copy_(std.log())


def reference(dist: Distribution, mlp_output: torch.Tensor) -> torch.distributions.Distribution:
    """Per-dimension ``torch.distributions`` reference built from the raw MLP output (not from ``dist``)."""
    if isinstance(dist, HeteroscedasticGaussianDistribution):
        raw_std = mlp_output[:, 1]
        std = raw_std if dist.std_type == "scalar" else raw_std.exp()
        return Normal(mlp_output[:, 0], std)
    if isinstance(dist, GaussianDistribution):
        std = dist.std_param if dist.std_type == "scalar" else dist.log_std_param.exp()
        return Normal(mlp_output, std.detach().clone().expand_as(mlp_output))
    alpha = torch.log1p(mlp_output[:, 0].exp()) + 1.0
    beta = torch.log1p(mlp_output[:, 1].exp()) + 1.0
    low, high = RANGE
    return TransformedDistribution(Beta(alpha, beta), [AffineTransform(loc=low, scale=high - low)])


def reference_params(dist: Distribution, mlp_output: torch.Tensor) -> tuple[torch.Tensor, ...]:
    ref = reference(dist, mlp_output)
    if isinstance(dist, BetaDistribution):
        return ref.base_dist.concentration1, ref.base_dist.concentration0
    return ref.mean, ref.stddev


def sample_in_support(dist: Distribution, ref) -> torch.Tensor:
    if isinstance(dist, BetaDistribution):
        return ref.sample()
    return ref.mean + ref.stddev * torch.randn_like(ref.mean) * 1.5


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_log_prob_entropy_match_torch(make):
    dist = make()
    randomize_std_param(dist)
    mlp_output = random_mlp_output(dist)
    dist.update(mlp_output)
    ref = reference(dist, mlp_output)
    actions = sample_in_support(dist, ref)

    log_prob = dist.log_prob(actions)
    assert log_prob.shape == (B,)
    torch.testing.assert_close(log_prob, ref.log_prob(actions).sum(-1), atol=1e-5, rtol=1e-5)

    entropy = dist.entropy
    assert entropy.shape == (B,)
    if isinstance(dist, BetaDistribution):
        # TransformedDistribution has no entropy; the affine map adds log|scale| per dimension
        ref_entropy = (ref.base_dist.entropy() + math.log(RANGE[1] - RANGE[0])).sum(-1)
    else:
        ref_entropy = ref.entropy().sum(-1)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-5, rtol=1e-5)

    params = dist.params
    for p, rp in zip(params, reference_params(dist, mlp_output)):
        assert p.shape == (B, A)
        torch.testing.assert_close(p, rp, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_mean_std_deterministic(make):
    dist = make()
    randomize_std_param(dist)
    mlp_output = random_mlp_output(dist)
    dist.update(mlp_output)
    ref = reference(dist, mlp_output)
    if isinstance(dist, BetaDistribution):
        low, high = RANGE
        base = ref.base_dist
        ref_mean, ref_std = low + (high - low) * base.mean, (high - low) * base.stddev
    else:
        ref_mean, ref_std = ref.mean, ref.stddev
    torch.testing.assert_close(dist.mean, ref_mean, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(dist.std, ref_std, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(dist.deterministic_output(mlp_output), ref_mean, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_kl_matches_torch(make):
    dist = make()
    randomize_std_param(dist)
    out_old, out_new = random_mlp_output(dist), random_mlp_output(dist)
    # References are built independently with torch.distributions; the affine map cancels in the Beta KL.
    dist.update(out_old)
    old_params, ref_old = dist.params, reference(dist, out_old)
    with torch.no_grad():  # the state-independent std also changes between policy updates
        for p in dist.parameters():
            p.mul_(torch.tensor([1.3, 0.6, 0.9]))
    dist.update(out_new)
    new_params, ref_new = dist.params, reference(dist, out_new)
    if isinstance(dist, BetaDistribution):
        ref_old, ref_new = ref_old.base_dist, ref_new.base_dist
    expected = torch.distributions.kl_divergence(ref_old, ref_new).sum(-1)

    # Closed form from the tuples only: a later update() must not affect the result.
    dist.update(random_mlp_output(dist))
    kl = dist.kl_divergence(old_params, new_params)
    assert kl.shape == (B,)
    torch.testing.assert_close(kl, expected, atol=1e-5, rtol=1e-5)
    assert (kl > 0).all()
    torch.testing.assert_close(dist.kl_divergence(old_params, old_params), torch.zeros(B), atol=1e-5, rtol=0)
    # KL is asymmetric in general; check the argument order is old || new
    reverse = torch.distributions.kl_divergence(ref_new, ref_old).sum(-1)
    assert not torch.allclose(kl, reverse, atol=1e-4)


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_sampling_statistics(make):
    dist = make()
    randomize_std_param(dist)
    mlp_output = random_mlp_output(dist, batch=2)
    n = 100_000
    mlp_output = mlp_output.repeat_interleave(n, dim=0)
    dist.update(mlp_output)
    samples = dist.sample()
    assert samples.shape == (2 * n, A)
    assert not samples.requires_grad
    samples = samples.view(2, n, A)
    mean, std = dist.mean.view(2, n, A)[:, 0], dist.std.view(2, n, A)[:, 0]
    # standard error of the sample mean is std / sqrt(n) ~ 0.003 * std; allow ~5 standard errors
    assert ((samples.mean(1) - mean).abs() < 5 * std / math.sqrt(n) + 1e-6).all()
    assert ((samples.std(1) - std).abs() < 0.02 * std).all()
    if isinstance(dist, BetaDistribution):
        assert (samples >= RANGE[0]).all() and (samples <= RANGE[1]).all()


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_sampling_respects_seed(make):
    dist = make()
    dist.update(random_mlp_output(dist))
    torch.manual_seed(123)
    a = dist.sample()
    torch.manual_seed(123)
    b = dist.sample()
    c = dist.sample()
    assert torch.equal(a, b)
    assert not torch.equal(b, c)


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_log_prob_and_entropy_are_differentiable(make):
    dist = make()
    mlp_output = random_mlp_output(dist).requires_grad_(True)
    dist.update(mlp_output)
    actions = dist.sample()
    (dist.log_prob(actions).sum() + dist.entropy.sum()).backward()
    assert mlp_output.grad is not None and mlp_output.grad.abs().sum() > 0
    if isinstance(dist, GaussianDistribution) and not isinstance(dist, HeteroscedasticGaussianDistribution):
        param = dist.std_param if dist.std_type == "scalar" else dist.log_std_param
        assert param.grad is not None and param.grad.abs().sum() > 0


@pytest.mark.parametrize("std_type", ["scalar", "log"])
def test_gaussian_std_parameterisation(std_type):
    dist = GaussianDistribution(A, init_std=0.3, std_type=std_type)
    names = {name for name, _ in dist.named_parameters()}
    if std_type == "scalar":
        assert names == {"std_param"}
        torch.testing.assert_close(dist.std_param.data, torch.full((A,), 0.3))
    else:
        assert names == {"log_std_param"}
        torch.testing.assert_close(dist.log_std_param.data, torch.full((A,), math.log(0.3)))
    dist.update(torch.zeros(B, A))
    torch.testing.assert_close(dist.std, torch.full((B, A), 0.3))
    assert dist.input_dim == A

    fixed = GaussianDistribution(A, std_type=std_type, learn_std=False)
    assert not any(p.requires_grad for p in fixed.parameters())


@pytest.mark.parametrize("std_type", ["scalar", "log"])
def test_gaussian_std_clamping(std_type):
    dist = GaussianDistribution(A, init_std=1.0, std_range=(0.1, 2.0), std_type=std_type)
    with torch.no_grad():
        values = torch.tensor([0.01, 0.5, 10.0])
        if std_type == "scalar":
            dist.std_param.copy_(values)
        else:
            dist.log_std_param.copy_(values.log())
    dist.update(torch.zeros(B, A))
    torch.testing.assert_close(dist.std[0], torch.tensor([0.1, 0.5, 2.0]))
    assert dist.params[1].shape == (B, A)
    # Negative scalar std is clamped to the minimum rather than producing NaN
    if std_type == "scalar":
        with torch.no_grad():
            dist.std_param.fill_(-1.0)
        dist.update(torch.zeros(B, A))
        assert torch.isfinite(dist.log_prob(torch.zeros(B, A))).all()
        torch.testing.assert_close(dist.std, torch.full((B, A), 0.1))


@pytest.mark.parametrize("std_type", ["scalar", "log"])
def test_heteroscedastic_std_clamping(std_type):
    dist = HeteroscedasticGaussianDistribution(A, std_range=(0.1, 2.0), std_type=std_type)
    raw = torch.tensor([0.01, 0.5, 10.0])
    raw = raw if std_type == "scalar" else raw.log()
    mlp_output = torch.stack([torch.zeros(B, A), raw.expand(B, A)], dim=1)
    dist.update(mlp_output)
    torch.testing.assert_close(dist.std, torch.tensor([0.1, 0.5, 2.0]).expand(B, A))
    assert dist.input_dim == [2, A]
    assert len(list(dist.parameters())) == 0


def make_mlp(input_dim: int, output_shape: int | list[int]) -> nn.Sequential:
    """Plain MLP like the project's: Linear/ELU stack whose last Linear is followed by an Unflatten if needed."""
    if isinstance(output_shape, int):
        return nn.Sequential(nn.Linear(input_dim, 16), nn.ELU(), nn.Linear(16, output_shape))
    return nn.Sequential(
        nn.Linear(input_dim, 16),
        nn.ELU(),
        nn.Linear(16, 16),
        nn.ELU(),
        nn.Linear(16, int(np.prod(output_shape))),
        nn.Unflatten(-1, output_shape),
    )


@pytest.mark.parametrize("std_type", ["scalar", "log"])
@pytest.mark.parametrize("init_std", [0.25, 1.7])
def test_heteroscedastic_init_mlp_weights(std_type, init_std):
    dist = HeteroscedasticGaussianDistribution(A, init_std=init_std, std_type=std_type)
    mlp = make_mlp(5, dist.input_dim)
    dist.init_mlp_weights(mlp)
    x = torch.randn(64, 5) * 10.0
    out = mlp(x)
    dist.update(out)
    torch.testing.assert_close(dist.std, torch.full((64, A), init_std))
    # The mean head keeps its random initialisation, i.e. depends on the input
    assert dist.mean.std(0).min() > 1e-3
    # Wrong last-layer size is rejected
    with pytest.raises(ValueError, match="out_features"):
        dist.init_mlp_weights(make_mlp(5, A))


def test_beta_init_mlp_weights_centres_mean():
    dist = BetaDistribution(A, action_range=RANGE)
    mlp = make_mlp(5, dist.input_dim)
    dist.init_mlp_weights(mlp)
    dist.update(mlp(torch.randn(64, 5)))
    alpha, beta = dist.params
    torch.testing.assert_close(alpha, beta, atol=0.02, rtol=0.0)
    torch.testing.assert_close(dist.mean, torch.full((64, A), sum(RANGE) / 2), atol=0.02, rtol=0.0)
    assert (alpha > 1.0).all() and (beta > 1.0).all()


def test_beta_log_prob_at_bounds_is_finite():
    dist = BetaDistribution(A, action_range=RANGE)
    dist.update(torch.randn(B, 2, A))
    actions = torch.tensor(RANGE).repeat(B, 2)[:, :A]
    assert torch.isfinite(dist.log_prob(actions)).all()
    with pytest.raises(ValueError, match="action_range"):
        BetaDistribution(A, action_range=(1.0, -1.0))


def test_gaussian_init_mlp_weights_is_noop():
    dist = GaussianDistribution(A)
    mlp = make_mlp(5, A)
    before = {k: v.clone() for k, v in mlp.state_dict().items()}
    dist.init_mlp_weights(mlp)
    for k, v in mlp.state_dict().items():
        assert torch.equal(v, before[k])


def test_unknown_std_type():
    for cls in (GaussianDistribution, HeteroscedasticGaussianDistribution):
        with pytest.raises(ValueError, match="scalar.*log"):
            cls(A, std_type="softplus")


def test_update_required():
    with pytest.raises(RuntimeError, match="update"):
        _ = GaussianDistribution(A).mean


class ExportWrapper(nn.Module):
    """``Linear -> reshape -> deterministic module``, as in an exported policy."""

    def __init__(self, dist: Distribution, input_dim: int = 5) -> None:
        super().__init__()
        self.shape = [dist.input_dim] if isinstance(dist.input_dim, int) else list(dist.input_dim)
        self.linear = nn.Linear(input_dim, int(np.prod(self.shape)))
        self.det = dist.as_deterministic_output_module()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.det(self.linear(x).reshape([x.shape[0]] + self.shape))

    def reference(self, dist: Distribution, x: torch.Tensor) -> torch.Tensor:
        return dist.deterministic_output(self.linear(x).reshape([x.shape[0]] + self.shape))


def run_onnx(model: nn.Module, x: torch.Tensor, dynamo: bool) -> np.ndarray:
    buffer = io.BytesIO()
    kwargs = {"dynamic_shapes": ({0: torch.export.Dim("batch")},)} if dynamo else {"dynamic_axes": {"x": {0: "batch"}}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_program = torch.onnx.export(
            model, (x[:2],), None if dynamo else buffer, input_names=["x"], output_names=["y"], dynamo=dynamo, **kwargs
        )
    data = onnx_program.model_proto.SerializeToString() if dynamo else buffer.getvalue()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x.numpy()})[0]


@pytest.mark.parametrize("make", MAKERS, ids=IDS)
def test_deterministic_module_jit_and_onnx(make):
    dist = make()
    model = ExportWrapper(dist).eval()
    x = torch.randn(B, 5) * 3.0
    with torch.no_grad():
        expected = model.reference(dist, x)
        torch.testing.assert_close(model(x), expected, atol=0, rtol=0)
        torch.testing.assert_close(torch.jit.script(model)(x), expected, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(torch.jit.script(dist.as_deterministic_output_module())(
            model.linear(x).reshape([B] + model.shape)), expected, atol=1e-6, rtol=1e-6)
        # mean after update() equals the deterministic output
        dist.update(model.linear(x).reshape([B] + model.shape))
        torch.testing.assert_close(dist.mean, expected, atol=1e-6, rtol=1e-6)
    onnx_out = run_onnx(model, x, dynamo=False)
    np.testing.assert_allclose(onnx_out, expected.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", [MAKERS[0], MAKERS[2], MAKERS[4]], ids=[IDS[0], IDS[2], IDS[4]])
@pytest.mark.slow
def test_deterministic_module_onnx_dynamo(make):
    dist = make()
    model = ExportWrapper(dist).eval()
    x = torch.randn(B, 5) * 3.0
    with torch.no_grad():
        expected = model.reference(dist, x)
    np.testing.assert_allclose(run_onnx(model, x, dynamo=True), expected.numpy(), atol=1e-5, rtol=1e-5)


def test_resolve_distribution():
    assert resolve_distribution(None, A) is None
    cfg = {"class_name": "GaussianDistribution", "init_std": 0.5, "std_type": "log"}
    dist = resolve_distribution(cfg, A)
    assert type(dist) is GaussianDistribution and dist.std_type == "log" and dist.output_dim == A
    assert cfg["class_name"] == "GaussianDistribution"  # config is not modified
    for alias, cls in [
        ("gaussian", GaussianDistribution),
        ("Heteroscedastic_Gaussian", HeteroscedasticGaussianDistribution),
        ("BETA", BetaDistribution),
        ("betadistribution", BetaDistribution),
        ("rlcore.modules.distribution:BetaDistribution", BetaDistribution),
        (HeteroscedasticGaussianDistribution, HeteroscedasticGaussianDistribution),
    ]:
        assert type(resolve_distribution({"class_name": alias}, A)) is cls
    beta = resolve_distribution({"class_name": "beta", "action_range": (0.0, 2.0)}, A)
    assert beta.action_range == (0.0, 2.0)


def test_resolve_distribution_errors():
    with pytest.raises(ValueError) as err:
        resolve_distribution({"class_name": "Laplace"}, A)
    for name in ("Laplace", "GaussianDistribution", "HeteroscedasticGaussianDistribution", "BetaDistribution"):
        assert name in str(err.value)
    with pytest.raises(TypeError, match="learn_std.*HeteroscedasticGaussianDistribution"):
        resolve_distribution({"class_name": "heteroscedastic_gaussian", "learn_std": False}, A)
    with pytest.raises(ValueError, match="class_name"):
        resolve_distribution({"init_std": 1.0}, A)
    with pytest.raises(TypeError, match="Distribution subclass"):
        resolve_distribution({"class_name": "torch.nn:Linear"}, A)
