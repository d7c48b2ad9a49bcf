"""Tests for rlcore.utils.trajectories."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore.utils.trajectories import split_and_pad_trajectories, trajectory_starts, unpad_trajectories


def _hand_built() -> tuple[torch.Tensor, torch.Tensor]:
    """T=4, N=2; x[t, n] = 10 * n + t + 1. Env 0 done at t=1; env 1 done at t=0 and t=2."""
    x = torch.tensor([[1.0, 11.0], [2.0, 12.0], [3.0, 13.0], [4.0, 14.0]])
    dones = torch.zeros(4, 2, dtype=torch.bool)
    dones[1, 0] = True
    dones[0, 1] = True
    dones[2, 1] = True
    return x, dones


# Trajectories (env-major): env 0: [1, 2], [3, 4]; env 1: [11], [12, 13], [14].
EXPECTED_PADDED = torch.tensor(
    [
        [1.0, 3.0, 11.0, 12.0, 14.0],
        [2.0, 4.0, 0.0, 13.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ]
)
EXPECTED_MASKS = torch.tensor(
    [
        [True, True, True, True, True],
        [True, True, False, True, False],
        [False, False, False, False, False],
        [False, False, False, False, False],
    ]
)


def test_hand_built_example() -> None:
    x, dones = _hand_built()
    padded, masks = split_and_pad_trajectories(x, dones)
    assert masks.dtype == torch.bool
    torch.testing.assert_close(padded, EXPECTED_PADDED)
    assert torch.equal(masks, EXPECTED_MASKS)
    torch.testing.assert_close(unpad_trajectories(padded, masks), x)


def test_hand_built_float_dones_with_trailing_dim_and_last_step_done() -> None:
    x, dones = _hand_built()
    dones = dones.float().unsqueeze(-1)  # [T, N, 1] float, as stored by RolloutStorage
    dones[3] = 1.0  # a done at the last step does not start a new trajectory
    padded, masks = split_and_pad_trajectories(x, dones)
    torch.testing.assert_close(padded, EXPECTED_PADDED)
    assert torch.equal(masks, EXPECTED_MASKS)


def test_trajectory_starts() -> None:
    _, dones = _hand_built()
    expected = torch.tensor([[True, True], [False, True], [True, False], [False, True]])
    assert torch.equal(trajectory_starts(dones), expected)


def test_hand_built_tensordict() -> None:
    x, dones = _hand_built()
    td = TensorDict(
        {"a": x.unsqueeze(-1).expand(4, 2, 3).clone(), "nested": {"b": -x}}, batch_size=[4, 2]
    )
    padded, masks = split_and_pad_trajectories(td, dones)
    assert padded.batch_size == torch.Size([4, 5])
    torch.testing.assert_close(padded["a"], EXPECTED_PADDED.unsqueeze(-1).expand(4, 5, 3))
    torch.testing.assert_close(padded["nested", "b"], -EXPECTED_PADDED)
    assert torch.equal(masks, EXPECTED_MASKS)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("done_prob", [0.0, 0.2, 0.7, 1.0])
def test_round_trip_tensor(seed: int, done_prob: float) -> None:
    gen = torch.Generator().manual_seed(seed)
    T, N = 7, 5
    x = torch.randn(T, N, 3, 2, generator=gen)
    dones = torch.rand(T, N, generator=gen) < done_prob
    padded, masks = split_and_pad_trajectories(x, dones)
    num_traj = N + int(dones[:-1].sum())
    assert padded.shape == (T, num_traj, 3, 2)
    assert masks.shape == (T, num_traj)
    assert int(masks.sum()) == T * N
    # Valid steps are a prefix of every trajectory and padding is zero.
    assert torch.all(masks[0])
    assert torch.all(masks[1:] <= masks[:-1])
    assert torch.all(padded[~masks] == 0)
    torch.testing.assert_close(unpad_trajectories(padded, masks), x)


@pytest.mark.parametrize("seed", [0, 1])
def test_round_trip_tensordict(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    T, N = 6, 4
    td = TensorDict(
        {
            "proprio": torch.randn(T, N, 5, generator=gen),
            "image": torch.randn(T, N, 2, 3, 3, generator=gen),
            "nested": {"flag": torch.randint(0, 5, (T, N), generator=gen)},
        },
        batch_size=[T, N],
    )
    dones = (torch.rand(T, N, generator=gen) < 0.3).float()
    padded, masks = split_and_pad_trajectories(td, dones)
    assert padded["image"].shape[2:] == (2, 3, 3)
    assert padded["nested", "flag"].dtype == torch.int64
    restored = unpad_trajectories(padded, masks)
    assert restored.batch_size == torch.Size([T, N])
    for key in td.keys(include_nested=True, leaves_only=True):
        assert torch.equal(restored[key], td[key])


def test_no_dones_is_identity_and_all_dones_gives_single_steps() -> None:
    x = torch.randn(4, 3, 2)
    padded, masks = split_and_pad_trajectories(x, torch.zeros(4, 3))
    torch.testing.assert_close(padded, x)
    assert torch.all(masks)

    padded, masks = split_and_pad_trajectories(x, torch.ones(4, 3))
    assert padded.shape == (4, 12, 2)
    assert torch.equal(masks.sum(dim=0), torch.ones(12, dtype=torch.long))
    # Env-major: trajectory n * T + t holds step t of env n.
    torch.testing.assert_close(padded[0], x.transpose(0, 1).reshape(12, 2))


def test_unpad_model_like_output() -> None:
    """A per-step model run on padded trajectories and unpadded equals the model run on the [T, N] data."""
    gen = torch.Generator().manual_seed(3)
    T, N, H = 8, 3, 4
    x = torch.randn(T, N, 2, generator=gen)
    dones = torch.rand(T, N, generator=gen) < 0.25
    layer = torch.nn.Linear(2, H)
    padded, masks = split_and_pad_trajectories(x, dones)
    out = unpad_trajectories(layer(padded), masks)
    assert out.shape == (T, N, H)
    assert out.is_contiguous()
    torch.testing.assert_close(out, layer(x))


def test_differentiable() -> None:
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, 2, generator=gen, requires_grad=True)
    dones = torch.rand(5, 3, generator=gen) < 0.4
    padded, masks = split_and_pad_trajectories(x, dones)
    weights = torch.randn(5, 3, 2, generator=gen)
    (unpad_trajectories(padded * 2.0, masks) * weights).sum().backward()
    torch.testing.assert_close(x.grad, 2.0 * weights)
