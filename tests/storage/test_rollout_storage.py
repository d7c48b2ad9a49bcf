"""Tests for rlcore.storage.RolloutStorage."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore.storage import RolloutStorage
from rlcore.utils.trajectories import unpad_trajectories

A = 2  # action dim
C, HW = 2, 3  # image group [C, HW, HW]


def _obs(ids: torch.Tensor) -> TensorDict:
    """Observations [N] whose every group encodes the transition id."""
    n = ids.shape[0]
    return TensorDict(
        {"id": ids.clone(), "image": ids.view(n, 1, 1, 1).expand(n, C, HW, HW).clone()}, batch_size=[n]
    )


def _fill(
    training_type: str,
    T: int,
    N: int,
    dones: torch.Tensor | None = None,
    hidden: str | None = None,
) -> RolloutStorage:
    """Fill a storage where every per-step quantity of transition (t, n) encodes its id t * N + n.

    hidden: None (MLP), "gru" (actor GRU, critic None) or "lstm" (actor LSTM, critic GRU). The stored actor state
    h[l, n, k] = 1000 * t + 10 * n + l (LSTM c = -h), critic state = 1000 * t + 10 * n + 5.
    """
    storage = RolloutStorage(training_type, N, T, _obs(torch.zeros(N)), (A,))
    dones = torch.zeros(T, N, dtype=torch.bool) if dones is None else dones
    tr = RolloutStorage.Transition()
    for t in range(T):
        ids = torch.arange(N, dtype=torch.float32) + t * N
        tr.observations = _obs(ids)
        tr.actions = ids.unsqueeze(-1).repeat(1, A)
        tr.rewards = ids
        tr.dones = dones[t]
        if training_type == "rl":
            tr.values = ids.unsqueeze(-1)
            tr.actions_log_prob = -ids
            tr.distribution_params = (ids.unsqueeze(-1).repeat(1, A), 2 * ids.unsqueeze(-1).repeat(1, A))
        else:
            tr.privileged_actions = -ids.unsqueeze(-1).repeat(1, A)
        if hidden is not None:
            base = 1000.0 * t + 10.0 * torch.arange(N, dtype=torch.float32)
            h = base.view(1, N, 1) + torch.arange(2, dtype=torch.float32).view(2, 1, 1)  # [L=2, N, 1]
            h = h.expand(2, N, 3).clone()  # [L, N, H=3]
            critic = (base + 5).view(1, N, 1).expand(1, N, 3).clone()
            tr.hidden_states = ((h, -h), critic) if hidden == "lstm" else (h, None)
        storage.add_transition(tr)
        tr.clear()
    if training_type == "rl":
        ids = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
        storage.returns.copy_(ids + 0.5)
        storage.advantages.copy_(ids + 0.25)
    return storage


# ---------------------------------------------------------------------------------------------------- construction


def test_unknown_training_type() -> None:
    with pytest.raises(ValueError, match="'rl'.*'distillation'"):
        RolloutStorage("ppo", 2, 3, _obs(torch.zeros(2)), (A,))


def test_buffers_shapes_and_dtypes() -> None:
    storage = _fill("rl", T=3, N=4)
    assert storage.observations.batch_size == torch.Size([3, 4])
    assert storage.observations["image"].shape == (3, 4, C, HW, HW)
    assert storage.rewards.shape == storage.dones.shape == storage.values.shape == (3, 4, 1)
    assert storage.actions_log_prob.shape == storage.returns.shape == storage.advantages.shape == (3, 4, 1)
    assert [p.shape for p in storage.distribution_params] == [(3, 4, A), (3, 4, A)]
    assert storage.dones.dtype == torch.float32
    assert storage.step == len(storage) == 3 and storage.is_full
    assert storage.num_envs == 4 and storage.num_transitions_per_env == 3 and storage.batch_size == 12
    torch.testing.assert_close(storage.observations["id"], torch.arange(12.0).view(3, 4))
    torch.testing.assert_close(storage.actions_log_prob.view(3, 4), -torch.arange(12.0).view(3, 4))
    assert storage.saved_hidden_state_a is None and storage.saved_hidden_state_c is None


def test_bool_dones_stored_as_float() -> None:
    dones = torch.zeros(3, 2, dtype=torch.bool)
    dones[1, 0] = True
    storage = _fill("rl", T=3, N=2, dones=dones)
    torch.testing.assert_close(storage.dones.squeeze(-1), dones.float())


def test_overflow_and_clear() -> None:
    storage = _fill("rl", T=2, N=2)
    tr = RolloutStorage.Transition()
    with pytest.raises(OverflowError, match=r"Rollout buffer overflow! You should call clear\(\) before adding"):
        storage.add_transition(tr)
    storage.clear()
    assert storage.step == 0 and not storage.is_full


def test_add_transition_detaches() -> None:
    storage = RolloutStorage("rl", 2, 2, _obs(torch.zeros(2)), (A,))
    tr = RolloutStorage.Transition()
    tr.observations = _obs(torch.ones(2))
    tr.actions = torch.ones(2, A, requires_grad=True)
    tr.rewards, tr.dones = torch.ones(2), torch.zeros(2)
    tr.values = torch.ones(2, 1, requires_grad=True)
    tr.actions_log_prob = torch.ones(2, requires_grad=True)
    tr.distribution_params = (torch.ones(2, A, requires_grad=True),)
    tr.hidden_states = (torch.ones(1, 2, 4, requires_grad=True), None)
    storage.add_transition(tr)
    assert not storage.actions.requires_grad and not storage.values.requires_grad
    assert not storage.distribution_params[0].requires_grad
    assert not storage.saved_hidden_state_a[0].requires_grad


def test_distillation_stores_privileged_actions() -> None:
    storage = _fill("distillation", T=3, N=2)
    torch.testing.assert_close(storage.privileged_actions, -storage.actions)
    assert not hasattr(storage, "values")
    batches = list(storage.mini_batch_generator(num_mini_batches=2, num_epochs=1))
    assert len(batches) == 2
    for batch in batches:
        ids = batch.observations["id"]
        torch.testing.assert_close(batch.privileged_actions, -ids.unsqueeze(-1).repeat(1, A))
        torch.testing.assert_close(batch.actions, ids.unsqueeze(-1).repeat(1, A))
        assert batch.dones.shape == (3, 1)
        assert batch.values is None and batch.old_distribution_params is None
    steps = list(storage.generator())
    assert len(steps) == 3
    torch.testing.assert_close(steps[1].privileged_actions, storage.privileged_actions[1])


# ---------------------------------------------------------------------------------------------------- feed-forward


def test_mini_batches_cover_every_transition_once_per_epoch() -> None:
    T, N = 4, 6
    storage = _fill("rl", T, N)
    batches = list(storage.mini_batch_generator(num_mini_batches=3, num_epochs=2))
    assert len(batches) == 6
    for epoch in range(2):
        ids = torch.cat([b.observations["id"] for b in batches[3 * epoch : 3 * epoch + 3]])
        assert torch.equal(ids.sort().values, torch.arange(T * N, dtype=torch.float32))
    for b in batches:
        ids = b.observations["id"]
        assert b.observations.batch_size == torch.Size([8])
        assert b.observations["image"].shape == (8, C, HW, HW)
        torch.testing.assert_close(b.observations["image"][:, 1, 2, 0], ids)
        # Every field stays aligned with the observation of its row.
        torch.testing.assert_close(b.actions, ids.unsqueeze(-1).repeat(1, A))
        torch.testing.assert_close(b.values.squeeze(-1), ids)
        torch.testing.assert_close(b.returns.squeeze(-1), ids + 0.5)
        torch.testing.assert_close(b.advantages.squeeze(-1), ids + 0.25)
        torch.testing.assert_close(b.old_actions_log_prob.squeeze(-1), -ids)
        mu, sigma = b.old_distribution_params
        torch.testing.assert_close(mu[:, 0], ids)
        torch.testing.assert_close(sigma[:, 1], 2 * ids)
        assert b.hidden_states == (None, None) and b.masks is None


def test_mini_batches_are_views_of_one_gather_per_epoch() -> None:
    storage = _fill("rl", T=4, N=4)
    batches = list(storage.mini_batch_generator(num_mini_batches=4, num_epochs=2))
    ptr = [b.actions.untyped_storage().data_ptr() for b in batches]
    assert len(set(ptr[:4])) == 1 and len(set(ptr[4:])) == 1 and ptr[0] != ptr[4]
    obs_ptr = [b.observations["id"].untyped_storage().data_ptr() for b in batches[:4]]
    assert len(set(obs_ptr)) == 1


def test_reshuffle_each_epoch() -> None:
    storage = _fill("rl", T=8, N=8)
    torch.manual_seed(0)

    def orders(reshuffle: bool) -> list[torch.Tensor]:
        batches = list(storage.mini_batch_generator(2, num_epochs=3, reshuffle_each_epoch=reshuffle))
        return [torch.cat([b.observations["id"] for b in batches[2 * e : 2 * e + 2]]) for e in range(3)]

    fixed = orders(False)
    assert torch.equal(fixed[0], fixed[1]) and torch.equal(fixed[1], fixed[2])
    shuffled = orders(True)
    assert not torch.equal(shuffled[0], shuffled[1]) and not torch.equal(shuffled[1], shuffled[2])
    for order in fixed + shuffled:
        assert torch.equal(order.sort().values, torch.arange(64, dtype=torch.float32))


def test_mini_batch_indivisible_raises() -> None:
    storage = _fill("rl", T=3, N=3)
    with pytest.raises(ValueError, match=r"B = num_envs \* num_transitions_per_env = 9.*num_mini_batches = 2"):
        next(storage.mini_batch_generator(num_mini_batches=2))


# ---------------------------------------------------------------------------------------------------- recurrent


def _hand_built_dones() -> torch.Tensor:
    """T=4, N=2: env 0 done at t=1 (starts 0, 2); env 1 done at t=0 and t=2 (starts 0, 1, 3)."""
    dones = torch.zeros(4, 2, dtype=torch.bool)
    dones[1, 0] = True
    dones[0, 1] = True
    dones[2, 1] = True
    return dones


# Per env: (trajectory start steps, padded obs ids [T, num_traj]) for T=4, N=2 (id = 2 * t + n).
HAND_BUILT = {
    0: ([0, 2], torch.tensor([[0.0, 4.0], [2.0, 6.0], [0.0, 0.0], [0.0, 0.0]])),
    1: ([0, 1, 3], torch.tensor([[1.0, 3.0, 7.0], [0.0, 5.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])),
}
HAND_BUILT_LENGTHS = {0: [2, 2], 1: [1, 2, 1]}


def _expected_actor_hidden(env: int, starts: list[int]) -> torch.Tensor:
    """Stored actor hidden state [L=2, num_traj, H=3] at the given start steps of ``env``."""
    h = torch.tensor([[1000.0 * t + 10.0 * env + layer for t in starts] for layer in range(2)])
    return h.unsqueeze(-1).expand(2, len(starts), 3)


@pytest.mark.parametrize("hidden", ["gru", "lstm"])
def test_recurrent_hand_built(hidden: str) -> None:
    storage = _fill("rl", T=4, N=2, dones=_hand_built_dones(), hidden=hidden)
    batches = list(storage.recurrent_mini_batch_generator(num_mini_batches=2, num_epochs=1))
    assert len(batches) == 2
    seen = []
    for b in batches:
        env = int(b.actions[0, 0, 0].item())  # id of step 0 is the env index
        seen.append(env)
        starts, padded_ids = HAND_BUILT[env]
        torch.testing.assert_close(b.observations["id"], padded_ids)
        assert b.observations["image"].shape == (4, len(starts), C, HW, HW)
        assert torch.equal(b.masks, torch.arange(4).view(4, 1) < torch.tensor(HAND_BUILT_LENGTHS[env]))
        assert int(b.masks.sum()) == 4
        expected_h = _expected_actor_hidden(env, starts)
        actor, critic = b.hidden_states
        if hidden == "gru":
            torch.testing.assert_close(actor, expected_h)
            assert critic is None
        else:
            h, c = actor
            torch.testing.assert_close(h, expected_h)
            torch.testing.assert_close(c, -expected_h)
            expected_c = torch.tensor([1000.0 * t + 10.0 * env + 5 for t in starts]).view(1, -1, 1).expand(1, -1, 3)
            torch.testing.assert_close(critic, expected_c)
            assert h.is_contiguous() and critic.is_contiguous()
        # Per-step tensors are [T, n_envs] and not padded.
        ids = torch.arange(4, dtype=torch.float32) * 2 + env
        torch.testing.assert_close(b.actions[:, 0, 0], ids)
        torch.testing.assert_close(b.values[:, 0, 0], ids)
        torch.testing.assert_close(b.returns[:, 0, 0], ids + 0.5)
        torch.testing.assert_close(b.old_distribution_params[1][:, 0, 0], 2 * ids)
    assert sorted(seen) == [0, 1]


def test_recurrent_single_mini_batch() -> None:
    storage = _fill("rl", T=4, N=2, dones=_hand_built_dones(), hidden="gru")
    (b,) = storage.recurrent_mini_batch_generator(num_mini_batches=1, num_epochs=1)
    assert b.masks.shape == (4, 5)
    assert torch.equal(b.masks.sum(dim=0).sort().values, torch.tensor([1, 1, 2, 2, 2]))
    assert b.hidden_states[0].shape == (2, 5, 3)


@pytest.mark.parametrize("num_mini_batches", [1, 2, 4])
def test_recurrent_random_dones(num_mini_batches: int) -> None:
    T, N = 6, 8
    gen = torch.Generator().manual_seed(num_mini_batches)
    dones = torch.rand(T, N, generator=gen) < 0.3
    storage = _fill("rl", T, N, dones=dones, hidden="lstm")
    n = N // num_mini_batches
    num_epochs = 3
    batches = list(storage.recurrent_mini_batch_generator(num_mini_batches, num_epochs=num_epochs))
    assert len(batches) == num_mini_batches * num_epochs
    for epoch in range(num_epochs):
        envs = []
        for b in batches[epoch * num_mini_batches : (epoch + 1) * num_mini_batches]:
            assert b.actions.shape == (T, n, A)
            assert b.values.shape == b.advantages.shape == b.old_actions_log_prob.shape == (T, n, 1)
            assert int(b.masks.sum()) == T * n
            batch_envs = b.actions[0, :, 0].long()  # id of step 0 is the env index
            envs.append(batch_envs)
            num_traj = b.masks.shape[1]
            assert num_traj == n + int(dones[:-1, batch_envs].sum())
            # A model-like output on the padded obs, unpadded, is aligned with the per-step tensors.
            out = torch.stack([b.observations["id"], b.observations["image"][..., 0, 1, 1] * 3], dim=-1)
            torch.testing.assert_close(unpad_trajectories(out, b.masks), b.actions * torch.tensor([1.0, 3.0]))
            # Hidden states at the trajectory starts, in the same order as the padded trajectories.
            h, c = b.hidden_states[0]
            assert h.shape == c.shape == (2, num_traj, 3)
            start_ids = b.observations["id"][0]  # id = t * N + env of each trajectory's first step
            start_t, start_env = start_ids.long() // N, start_ids.long() % N
            expected = 1000.0 * start_t + 10.0 * start_env
            torch.testing.assert_close(h[0, :, 0], expected)
            torch.testing.assert_close(h[1, :, 2], expected + 1)
            torch.testing.assert_close(b.hidden_states[1][0, :, 0], expected + 5)
        assert torch.equal(torch.cat(envs).sort().values, torch.arange(N))


def test_recurrent_without_hidden_states() -> None:
    storage = _fill("rl", T=3, N=4)
    for b in storage.recurrent_mini_batch_generator(num_mini_batches=2, num_epochs=1):
        assert b.hidden_states == (None, None)
        assert int(b.masks.sum()) == 3 * 2


def test_recurrent_distillation() -> None:
    storage = _fill("distillation", T=3, N=2, dones=_hand_built_dones()[:3], hidden="gru")
    for b in storage.recurrent_mini_batch_generator(num_mini_batches=2, num_epochs=1):
        torch.testing.assert_close(b.privileged_actions, -b.actions)
        assert b.dones.shape == (3, 1, 1)
        assert b.values is None and b.old_distribution_params is None


def test_recurrent_indivisible_raises() -> None:
    storage = _fill("rl", T=2, N=3)
    with pytest.raises(ValueError, match="num_envs = 3.*num_mini_batches = 2"):
        next(storage.recurrent_mini_batch_generator(num_mini_batches=2))


def test_hidden_state_none_then_tensor() -> None:
    """A None state (module not run yet) before the first tensor is stored as zeros; later Nones zero their slot."""
    N, T = 2, 3
    storage = RolloutStorage("rl", N, T, _obs(torch.zeros(N)), (A,))
    tr = RolloutStorage.Transition()
    for t, state in enumerate([None, torch.ones(1, N, 4), None]):
        tr.observations, tr.actions = _obs(torch.zeros(N)), torch.zeros(N, A)
        tr.rewards, tr.dones, tr.values = torch.zeros(N), torch.zeros(N), torch.zeros(N, 1)
        tr.actions_log_prob, tr.distribution_params = torch.zeros(N), (torch.zeros(N, A),)
        tr.hidden_states = (state, None)
        storage.add_transition(tr)
    (buffer,) = storage.saved_hidden_state_a
    assert buffer.shape == (T, 1, N, 4)
    torch.testing.assert_close(buffer.sum(dim=(1, 2, 3)), torch.tensor([0.0, 2 * 4, 0.0]))
    assert storage.saved_hidden_state_c is None
