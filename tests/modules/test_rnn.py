"""Tests of rlcore.modules.rnn.RNN: inference vs batch mode with dones, reset, detach."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from rlcore.modules.rnn import RNN
from rlcore.utils.trajectories import split_and_pad_trajectories

pytestmark = pytest.mark.usefixtures("seed")

D, H = 4, 6
TYPES_LAYERS = [("gru", 1), ("gru", 2), ("lstm", 1), ("lstm", 2)]


def _states(state) -> tuple[torch.Tensor, ...]:
    """The hidden state as a tuple of tensors (GRU: (h,), LSTM: (h, c))."""
    return state if isinstance(state, tuple) else (state,)


def _dones(T: int, N: int) -> torch.Tensor:
    """Done flags [T, N] with dones in the middle: env0 at 2; env1 at 0, 3 and 4; env2 never; env3 at T-1 only."""
    d = torch.zeros(T, N, dtype=torch.bool)
    d[2, 0] = True
    d[0, 1] = d[3, 1] = d[4, 1] = True
    d[T - 1, 3] = True
    return d


def _trajectory_initial_states(h0: tuple[torch.Tensor, ...], dones: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Initial hidden states [L, K, H] of the padded trajectories, built by hand (env-major trajectory order).

    The first trajectory of env n starts from its carried state ``h0[:, n]``; a trajectory that starts after a
    done starts from zeros.
    """
    T, N = dones.shape
    columns = [[] for _ in h0]
    for n in range(N):
        for t in range(T):
            if t == 0:
                for cols, h in zip(columns, h0):
                    cols.append(h[:, n])
            elif dones[t - 1, n]:
                for cols, h in zip(columns, h0):
                    cols.append(torch.zeros_like(h[:, n]))
    return tuple(torch.stack(cols, dim=1) for cols in columns)


# ---------------------------------------------------------------------------- shapes and dtypes
@pytest.mark.parametrize("rnn_type, layers", TYPES_LAYERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inference_shapes_and_dtype(rnn_type, layers, dtype):
    rnn = RNN(D, H, layers, rnn_type).to(dtype)
    assert isinstance(rnn.rnn, nn.GRU if rnn_type == "gru" else nn.LSTM)
    assert rnn.rnn.num_layers == layers and rnn.rnn.hidden_size == H and rnn.rnn.input_size == D
    assert rnn.is_lstm == (rnn_type == "lstm")
    assert rnn.hidden_state is None
    out = rnn(torch.randn(5, D, dtype=dtype))
    assert out.shape == (5, H) and out.dtype == dtype
    states = _states(rnn.hidden_state)
    assert len(states) == (2 if rnn_type == "lstm" else 1)
    for s in states:
        assert s.shape == (layers, 5, H) and s.dtype == dtype
    # the output is the last layer's hidden state
    torch.testing.assert_close(out, states[0][-1], rtol=0, atol=0)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_type_is_case_insensitive(rnn_type):
    rnn = RNN(D, H, 1, rnn_type.upper())
    assert rnn.rnn_type == rnn_type


# ---------------------------------------------------------------------------- step-by-step == batch
@pytest.mark.parametrize("rnn_type, layers", TYPES_LAYERS)
def test_step_by_step_equals_padded_batch(rnn_type, layers):
    T, N = 7, 4
    rnn = RNN(D, H, layers, rnn_type)
    x = torch.randn(T, N, D)
    dones = _dones(T, N)

    # warm up so that the first trajectory of every env starts from a non-zero state
    for _ in range(3):
        rnn(torch.randn(N, D))
    h0 = tuple(s.clone() for s in _states(rnn.hidden_state))
    assert all(s.abs().min() > 0 for s in h0)

    with torch.no_grad():
        step_out, start_states = [], []
        for t in range(T):
            start_states.append(tuple(s.clone() for s in _states(rnn.hidden_state)))
            step_out.append(rnn(x[t]))
            rnn.reset(dones[t])
        step_out = torch.stack(step_out)
        assert step_out.shape == (T, N, H)

        padded, masks = split_and_pad_trajectories(x, dones)
        # env0: 2 trajectories, env1: 4 (dones at 0, 3, 4), env2: 1, env3: 1 (done on the last step)
        assert padded.shape == (T, 8, D)
        init = _trajectory_initial_states(h0, dones)
        # the states the rollout saw at each trajectory start are exactly these (zero after a done)
        seen = []
        for n in range(N):
            for t in range(T):
                if t == 0 or dones[t - 1, n]:
                    seen.append(tuple(s[:, n] for s in start_states[t]))
        for k, states in enumerate(seen):
            for s_seen, s_init in zip(states, init):
                assert torch.equal(s_seen, s_init[:, k])
        hidden = init if rnn_type == "lstm" else init[0]
        batch_out = rnn(padded, masks, hidden)

    assert batch_out.shape == (T, N, H) and batch_out.dtype == torch.float32
    torch.testing.assert_close(batch_out, step_out, rtol=0, atol=1e-5)

    # control: without the resets the step-by-step outputs after a done differ, so the dones were exercised
    rnn.reset(hidden_state=tuple(s.clone() for s in h0) if rnn_type == "lstm" else h0[0].clone())
    with torch.no_grad():
        no_reset = torch.stack([rnn(x[t]) for t in range(T)])
    torch.testing.assert_close(no_reset[:3, 0], step_out[:3, 0], rtol=0, atol=1e-5)
    assert (no_reset[3:, 0] - step_out[3:, 0]).abs().max() > 1e-3
    torch.testing.assert_close(no_reset[:, 2], step_out[:, 2], rtol=0, atol=1e-5)


def test_batch_mode_needs_hidden_state():
    rnn = RNN(D, H, 1, "gru")
    x = torch.randn(3, 2, D)
    padded, masks = split_and_pad_trajectories(x, torch.zeros(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs the hidden states"):
        rnn(padded, masks)


# ---------------------------------------------------------------------------- reset
@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_reset_dones_zeroes_only_finished_envs(rnn_type):
    N = 5
    rnn = RNN(D, H, 2, rnn_type)
    rnn(torch.randn(N, D))
    rnn(torch.randn(N, D))
    before = tuple(s.clone() for s in _states(rnn.hidden_state))
    assert all(bool((s != 0).all()) for s in before)
    dones = torch.tensor([1, 0, 1, 0, 0], dtype=torch.float32)  # numeric 0/1 flags are accepted
    rnn.reset(dones)
    after = _states(rnn.hidden_state)
    done = dones.bool()
    for b, a in zip(before, after):
        assert a.shape == b.shape
        assert bool((a[:, done] == 0).all())
        assert torch.equal(a[:, ~done], b[:, ~done])  # bit-identical
    # stepping continues from the reset state: a finished env behaves like a fresh one
    x = torch.randn(N, D)
    fresh = RNN(D, H, 2, rnn_type)
    fresh.load_state_dict(rnn.state_dict())
    out = rnn(x)
    torch.testing.assert_close(out[done], fresh(x[done]), rtol=0, atol=1e-6)


def test_reset_variants():
    rnn = RNN(D, H, 1, "gru")
    # reset(dones) before the first step: nothing to reset, state stays None
    rnn.reset(torch.ones(3, dtype=torch.bool))
    assert rnn.hidden_state is None
    x = torch.randn(3, D)
    first = rnn(x)
    rnn(torch.randn(3, D))
    # reset() forgets the state: the next step starts from zeros again
    rnn.reset()
    assert rnn.hidden_state is None
    torch.testing.assert_close(rnn(x), first, rtol=0, atol=0)
    # reset(hidden_state=...) sets it
    h = torch.randn(1, 3, H)
    rnn.reset(hidden_state=h)
    assert rnn.hidden_state is h
    with pytest.raises(ValueError, match="either dones or a new hidden state"):
        rnn.reset(torch.zeros(3, dtype=torch.bool), hidden_state=h)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_zero_state(rnn_type):
    rnn = RNN(D, H, 2, rnn_type)
    like = torch.zeros(1, dtype=torch.float64)
    states = _states(rnn.zero_state(3, like))
    assert len(states) == (2 if rnn_type == "lstm" else 1)
    for s in states:
        assert s.shape == (2, 3, H) and s.dtype == torch.float64 and not bool(s.any())
    if rnn_type == "lstm":
        assert states[0].data_ptr() != states[1].data_ptr()


# ---------------------------------------------------------------------------- detach
@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_detach_hidden_state_for_finished_envs(rnn_type):
    N = 4
    rnn = RNN(D, H, 1, rnn_type)
    x0 = torch.randn(N, D, requires_grad=True)
    rnn(x0)
    dones = torch.tensor([True, False, True, False])
    rnn.detach_hidden_state(dones)
    for s in _states(rnn.hidden_state):
        # finished rows carry no graph back to x0, the others keep it
        g_done = torch.autograd.grad(s[:, dones].sum(), x0, retain_graph=True, allow_unused=True)[0]
        assert g_done is None or not bool(g_done.any())
        g_keep = torch.autograd.grad(s[:, ~dones].sum(), x0, retain_graph=True)[0]
        assert bool(g_keep[~dones].abs().sum(-1).gt(0).all())
        assert not bool(g_keep[dones].any())
    # the next step's output of a finished env does not depend on x0; the others' does
    out = rnn(torch.randn(N, D))
    grad = torch.autograd.grad(out.sum(), x0)[0]
    assert not bool(grad[dones].any())
    assert bool(grad[~dones].abs().sum(-1).gt(0).all())


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_detach_hidden_state_keeps_values(rnn_type):
    N = 3
    rnn = RNN(D, H, 1, rnn_type)
    rnn(torch.randn(N, D, requires_grad=True))
    before = tuple(s.detach().clone() for s in _states(rnn.hidden_state))
    rnn.detach_hidden_state(torch.tensor([True, False, False]))
    for b, a in zip(before, _states(rnn.hidden_state)):
        assert torch.equal(a.detach(), b)
        assert a.requires_grad  # the unfinished envs still have a graph
    rnn.detach_hidden_state()
    for b, a in zip(before, _states(rnn.hidden_state)):
        assert torch.equal(a, b)
        assert not a.requires_grad
    # no-op before the first step
    fresh = RNN(D, H, 1, rnn_type)
    fresh.detach_hidden_state(torch.tensor([True]))
    assert fresh.hidden_state is None
