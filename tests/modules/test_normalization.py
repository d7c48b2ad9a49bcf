"""Tests of the running normalisers against numpy statistics of the whole stream."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlcore.modules.normalization import EmpiricalDiscountedVariationNormalization, EmpiricalNormalization

pytestmark = pytest.mark.usefixtures("seed")

MEAN = torch.tensor([3.0, -2.0, 100.0])
SCALE = torch.tensor([0.5, 2.0, 10.0])
BATCH_SIZES = [1, 7, 33, 2, 100, 5, 64]


def _stream(sizes=BATCH_SIZES, mean=MEAN, scale=SCALE) -> list[torch.Tensor]:
    return [torch.randn(n, *mean.shape) * scale + mean for n in sizes]


def _assert_rel(actual: torch.Tensor, expected: np.ndarray, rtol: float = 1e-5) -> None:
    np.testing.assert_allclose(actual.detach().double().numpy(), expected, rtol=rtol, atol=0)


# ---------------------------------------------------------------------------- EmpiricalNormalization
def test_initial_state_and_shapes():
    norm = EmpiricalNormalization(3)
    assert norm.mean.shape == (3,) and norm.var.shape == (3,) and norm.std.shape == (3,)
    assert not bool(norm.mean.any()) and bool((norm.var == 1).all()) and int(norm.count) == 0
    x = torch.randn(4, 3)
    y = norm(x)
    assert y.shape == (4, 3) and y.dtype == torch.float32
    torch.testing.assert_close(y, x / (1.0 + norm.eps))


def test_stream_statistics_equal_numpy():
    norm = EmpiricalNormalization(3)
    batches = _stream()
    for b in batches:
        norm.update(b)
    data = torch.cat(batches).double().numpy()
    assert int(norm.count) == data.shape[0] == sum(BATCH_SIZES)
    _assert_rel(norm.mean, data.mean(axis=0))
    _assert_rel(norm.var, data.var(axis=0, ddof=0))
    _assert_rel(norm.std, data.std(axis=0, ddof=0))
    # the statistics are nowhere near the initial ones, so a missing update would fail above
    assert abs(norm.mean[2].item() - 100.0) < 3.0
    # forward uses exactly these statistics
    x = torch.randn(6, 3) * SCALE + MEAN
    expected = (x.double().numpy() - data.mean(axis=0)) / (data.std(axis=0) + norm.eps)
    np.testing.assert_allclose(norm(x).double().numpy(), expected, rtol=1e-4, atol=1e-5)


def test_multidim_shape_and_leading_dims():
    shape = (2, 3)
    mean = torch.arange(6.0).reshape(shape) * 4 - 7
    scale = torch.linspace(0.1, 5.0, 6).reshape(shape)
    norm = EmpiricalNormalization(shape)
    batches = [torch.randn(t, n, *shape) * scale + mean for t, n in [(2, 3), (5, 1), (1, 17), (4, 4)]]
    for b in batches:
        norm.update(b)  # [T, N, 2, 3]: leading dims are pooled
    data = torch.cat([b.reshape(-1, *shape) for b in batches]).double().numpy()
    assert int(norm.count) == data.shape[0]
    assert norm.mean.shape == shape
    _assert_rel(norm.mean, data.mean(axis=0))
    _assert_rel(norm.var, data.var(axis=0))


def test_merge_of_partial_statistics():
    batches = _stream()
    data = torch.cat(batches)
    a, b = data[:50], data[50:]
    norm = EmpiricalNormalization(3)
    norm.merge(a.mean(0, keepdim=True), a.var(0, unbiased=False, keepdim=True), a.shape[0])
    norm.merge(b.mean(0, keepdim=True), b.var(0, unbiased=False, keepdim=True), torch.tensor(b.shape[0]))
    ref = data.double().numpy()
    assert int(norm.count) == ref.shape[0]
    _assert_rel(norm.mean, ref.mean(axis=0))
    _assert_rel(norm.var, ref.var(axis=0))


def test_until_stops_updating():
    norm = EmpiricalNormalization(3, until=50)
    batches = _stream([20, 20, 20, 20])
    norm.update(batches[0])
    norm.update(batches[1])
    assert int(norm.count) == 40
    norm.update(batches[2])  # count 40 < 50: applied in full
    assert int(norm.count) == 60
    mean, var = norm.mean, norm.var
    norm.update(batches[3] + 1000.0)  # count 60 >= 50: ignored
    assert int(norm.count) == 60
    assert torch.equal(norm.mean, mean) and torch.equal(norm.var, var)
    ref = torch.cat(batches[:3]).double().numpy()
    _assert_rel(norm.mean, ref.mean(axis=0))
    _assert_rel(norm.var, ref.var(axis=0))


def test_until_exactly_reached():
    norm = EmpiricalNormalization(1, until=10)
    norm.update(torch.randn(10, 1))
    mean = norm.mean.clone()
    norm.update(torch.randn(5, 1) + 50)
    assert int(norm.count) == 10 and torch.equal(norm.mean, mean)


def test_eval_mode_does_not_update():
    norm = EmpiricalNormalization(3)
    norm.update(_stream([30])[0])
    state = {k: v.clone() for k, v in norm.state_dict().items()}
    norm.eval()
    norm.update(torch.randn(40, 3) * 7 + 9)
    for k, v in norm.state_dict().items():
        assert torch.equal(v, state[k]), k
    norm.train()
    norm.update(torch.randn(40, 3))
    assert int(norm.count) == 70


def test_inverse_of_forward_is_identity():
    norm = EmpiricalNormalization(3)
    for b in _stream():
        norm.update(b)
    x = torch.randn(9, 3) * SCALE + MEAN
    y = norm(x)
    assert y.abs().max() < 10  # really normalised
    torch.testing.assert_close(norm.inverse(y), x, rtol=1e-6, atol=1e-4)
    z = torch.randn(5, 3)
    torch.testing.assert_close(norm(norm.inverse(z)), z, rtol=1e-5, atol=1e-5)


def test_float64_and_script():
    norm = EmpiricalNormalization(3).double()
    norm.update(torch.randn(20, 3, dtype=torch.float64) * 3 + 1)
    x = torch.randn(4, 3, dtype=torch.float64)
    assert norm(x).dtype == torch.float64 and norm.mean.dtype == torch.float64
    scripted = torch.jit.script(norm)
    torch.testing.assert_close(scripted(x), norm(x), rtol=0, atol=0)
    torch.testing.assert_close(scripted.inverse(x), norm.inverse(x), rtol=0, atol=0)


def test_update_is_not_differentiable_and_ignores_empty_batch():
    norm = EmpiricalNormalization(2)
    x = torch.randn(5, 2, requires_grad=True)
    norm.update(x)
    assert not norm._mean.requires_grad
    norm.update(torch.zeros(0, 2))
    assert int(norm.count) == 5


# ---------------------------------------------------------------------------- discounted return normaliser
def _hand_returns(rewards: np.ndarray, dones: np.ndarray | None, gamma: float) -> np.ndarray:
    """All discounted returns R_t = gamma * R_{t-1} + r_t, each recorded before the finished envs reset to 0."""
    T, N = rewards.shape
    R = np.zeros(N)
    seen = []
    for t in range(T):
        R = gamma * R + rewards[t]
        seen.append(R.copy())
        if dones is not None:
            R = np.where(dones[t], 0.0, R)
    return np.stack(seen)  # [T, N]


def test_discounted_variation_std_equals_numpy_of_returns():
    T, N, gamma = 60, 5, 0.9
    g = torch.Generator().manual_seed(1)
    rewards = torch.randn(T, N, generator=g) * 2.0 + 0.5
    dones = torch.rand(T, N, generator=g) < 0.15
    assert bool(dones[:-1].any())
    norm = EmpiricalDiscountedVariationNormalization(gamma=gamma)
    returns = _hand_returns(rewards.double().numpy(), dones.numpy(), gamma)
    for t in range(T):
        scaled = norm(rewards[t], dones[t])
        assert scaled.shape == (N,) and scaled.dtype == torch.float32
        # divided by the std of every return seen so far (this step included), not centred
        std_t = returns[: t + 1].std(ddof=0)
        expected = rewards[t].double().numpy() / (std_t + norm.emp_norm.eps)
        np.testing.assert_allclose(scaled.double().numpy(), expected, rtol=1e-5, atol=1e-7)
    assert int(norm.emp_norm.count) == T * N
    _assert_rel(norm.emp_norm.std, np.array([returns.std(ddof=0)]))
    _assert_rel(norm.emp_norm.mean, np.array([returns.mean()]))
    # the carried return is the hand one after the last reset
    last = np.where(dones[-1].numpy(), 0.0, returns[-1])
    np.testing.assert_allclose(norm.disc_return.double().numpy(), last, rtol=1e-5, atol=1e-6)
    # control: ignoring the dones gives a clearly different std, so the resets were exercised
    no_reset = _hand_returns(rewards.double().numpy(), None, gamma)
    assert abs(no_reset.std() - returns.std()) > 1e-3 * returns.std()


def test_discounted_variation_hand_example():
    # gamma 0.5, one env: rewards 1, 2, 4 with a done after step 1, then 8
    norm = EmpiricalDiscountedVariationNormalization(gamma=0.5, eps=0.0)
    rews = [1.0, 2.0, 4.0, 8.0]
    dns = [False, True, False, False]
    for r, d in zip(rews, dns):
        norm(torch.tensor([r]), torch.tensor([d]))
    # R: 1, 0.5 + 2 = 2.5, (reset) 4, 2 + 8 = 10
    seen = np.array([1.0, 2.5, 4.0, 10.0])
    _assert_rel(norm.emp_norm.std, np.array([seen.std()]))
    out = norm(torch.tensor([3.0]))  # R = 5 + 3 = 8 joins the stats first
    seen = np.append(seen, 8.0)
    np.testing.assert_allclose(out.item(), 3.0 / seen.std(), rtol=1e-6)


def test_discounted_variation_without_dones_and_eval():
    T, N, gamma = 20, 3, 0.95
    rewards = torch.rand(T, N) - 0.2
    norm = EmpiricalDiscountedVariationNormalization(gamma=gamma)
    for t in range(T):
        norm(rewards[t])
    returns = _hand_returns(rewards.double().numpy(), None, gamma)
    _assert_rel(norm.emp_norm.std, np.array([returns.std()]))
    # eval: scales by the frozen std, no update
    norm.eval()
    count, disc = int(norm.emp_norm.count), norm.disc_return.clone()
    r = torch.tensor([1.0, -2.0, 0.5])
    out = norm(r, torch.ones(3, dtype=torch.bool))
    assert int(norm.emp_norm.count) == count and torch.equal(norm.disc_return, disc)
    np.testing.assert_allclose(out.double().numpy(), r.double().numpy() / (returns.std() + norm.emp_norm.eps),
                               rtol=1e-5)
    assert bool((torch.sign(out) == torch.sign(r)).all())


def test_discounted_variation_until():
    norm = EmpiricalDiscountedVariationNormalization(gamma=0.9, until=8)
    for _ in range(5):
        norm(torch.randn(4))
    assert int(norm.emp_norm.count) == 8


# ---------------------------------------------------------------------------- pooling (issue 11)
def test_combined_moments_of_a_small_spread_around_a_large_mean():
    """Parts merged with Chan's formula in float64 give the statistics of the concatenated data, even where
    E[x^2] - mean^2 in float32 cancels to nothing (mean 1000, std 0.05)."""
    from rlcore.distributed import combine_moments, pooled_moments

    parts = [1000.0 + 0.05 * torch.randn(n, 2) + 0.02 * i for i, n in enumerate((300, 1, 0, 500))]
    stats = [pooled_moments(p) for p in parts]  # single process: each part's own moments
    counts = torch.tensor([float(n) for _, _, n in stats])
    means = torch.stack([m for m, _, _ in stats])
    m2s = torch.stack([v * n for _, v, n in stats])
    mean, var, n = combine_moments(counts, means, m2s)
    x = torch.cat(parts).double()
    assert n == x.shape[0] == 801
    torch.testing.assert_close(mean, x.mean(0), rtol=1e-13, atol=0)
    torch.testing.assert_close(var, x.var(0, unbiased=False), rtol=1e-9, atol=0)
    x32 = torch.cat(parts)
    naive = (x32.square().mean(0) - x32.mean(0).square()).clamp(min=0)  # the former pooled formula
    assert (naive - var.float()).abs().max() > 0.5 * var.min()  # ... is wrong by the size of the variance itself
