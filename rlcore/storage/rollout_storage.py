"""Rollout buffers filled step by step during data collection and read back in mini-batches during updates.

Layout: every buffer is time-major, ``[T, N, ...]`` with ``T = num_transitions_per_env`` steps of ``N = num_envs``
environments. Conventions:

- ``rewards``, ``dones``, ``values``, ``actions_log_prob``, ``returns``, ``advantages`` are ``[T, N, 1]`` float
  tensors. ``dones`` holds 0.0 / 1.0 (the transition may pass bool or 0/1 of any dtype); a done at step ``t`` means
  the episode ended after step ``t``.
- Hidden states are stored as the state *used as input* at step ``t`` (the state before processing obs ``t``).
  A GRU state is a tensor ``[L, N, H]``, an LSTM state a tuple ``(h, c)`` of such tensors; ``None`` means "zero state"
  (no memory, or a recurrent module not yet run).
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from dataclasses import dataclass
from typing import Union

import torch
from tensordict import TensorDictBase

from rlcore.errors import ConfigError
from rlcore.utils.trajectories import split_and_pad_trajectories, trajectory_starts

HiddenState = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor], None]
"""Recurrent state: a tensor ``[L, N, H]`` (GRU), a tuple ``(h, c)`` of such tensors (LSTM), or None."""

_TRAINING_TYPES = ("rl", "distillation")


class RolloutStorage:
    """Storage of one rollout of ``T`` steps from ``N`` environments.

    The algorithm fills a :class:`RolloutStorage.Transition` every step and passes it to :meth:`add_transition`. For
    ``"rl"`` it then writes ``returns`` and ``advantages`` ``[T, N, 1]`` in place, and reads the data back with
    :meth:`mini_batch_generator` (feed-forward models) or :meth:`recurrent_mini_batch_generator` (recurrent models).
    """

    class Transition:
        """One step of data for all environments, filled by the algorithm and passed to ``add_transition``."""

        def __init__(self) -> None:
            self.observations: TensorDictBase | None = None
            """Observations ``[N]`` (all groups)."""
            self.actions: torch.Tensor | None = None
            """Actions ``[N, A]``."""
            self.privileged_actions: torch.Tensor | None = None
            """Teacher actions ``[N, A]`` (distillation only)."""
            self.rewards: torch.Tensor | None = None
            """Rewards ``[N]`` (or ``[N, 1]``)."""
            self.dones: torch.Tensor | None = None
            """Done flags ``[N]`` (or ``[N, 1]``), bool or 0/1."""
            self.values: torch.Tensor | None = None
            """Value estimates ``[N, 1]`` (RL only)."""
            self.actions_log_prob: torch.Tensor | None = None
            """Log-probabilities of the actions ``[N]`` (RL only)."""
            self.distribution_params: tuple[torch.Tensor, ...] | None = None
            """Parameters of the action distribution, each ``[N, ...]`` (RL only)."""
            self.hidden_states: tuple[HiddenState, HiddenState] = (None, None)
            """Input hidden states of this step, (actor/student, critic/teacher)."""
            self.noise_scale: torch.Tensor | None = None
            """Per-env factor ``[N, 1]`` on the action std the actions were sampled with (RL, an extension's
            ``action_std_scale``, e.g. the exploration schedule's ``low_noise_fraction``; None: the policy's std)."""

        def clear(self) -> None:
            """Reset all fields to None."""
            self.__init__()

    @dataclass
    class Batch:
        """A mini-batch yielded by the generators; fields not produced by a mode stay None.

        Feed-forward generator: tensors are ``[b, ...]`` with ``b = T * N / num_mini_batches``. Recurrent generator:
        ``observations`` and ``masks`` are padded ``[T, num_traj_in_batch, ...]``, the other per-step tensors are
        ``[T, n, ...]`` with ``n = N / num_mini_batches`` envs, and hidden states are ``[L, num_traj_in_batch, H]``.
        """

        observations: TensorDictBase | None = None
        actions: torch.Tensor | None = None
        values: torch.Tensor | None = None
        advantages: torch.Tensor | None = None
        returns: torch.Tensor | None = None
        old_actions_log_prob: torch.Tensor | None = None
        old_distribution_params: tuple[torch.Tensor, ...] | None = None
        hidden_states: tuple[HiddenState, HiddenState] = (None, None)
        masks: torch.Tensor | None = None
        privileged_actions: torch.Tensor | None = None
        dones: torch.Tensor | None = None
        noise_scale: torch.Tensor | None = None

    def __init__(
        self,
        training_type: str,
        num_envs: int,
        num_transitions_per_env: int,
        obs: TensorDictBase,
        actions_shape: tuple[int, ...] | list[int],
        device: str | torch.device = "cpu",
    ) -> None:
        """Allocate the buffers.

        Args:
            training_type: ``"rl"`` or ``"distillation"``.
            num_envs: Number of environments ``N``.
            num_transitions_per_env: Rollout length ``T``.
            obs: Example observations ``[N]``; every group (any feature shape, any dtype) gets a ``[T, N, ...]``
                buffer.
            actions_shape: Shape of one action, e.g. ``(A,)``.
            device: Device of the buffers.
        """
        if training_type not in _TRAINING_TYPES:
            raise ConfigError(f"Unknown training_type '{training_type}'. Valid types are: 'rl', 'distillation'.")
        self.training_type = training_type
        self.device = torch.device(device)
        self._num_envs = num_envs
        self._num_steps = num_transitions_per_env
        self.actions_shape = tuple(actions_shape)
        self._step = 0

        T, N = num_transitions_per_env, num_envs
        self.observations: TensorDictBase = obs.apply(
            lambda v: torch.zeros(T, *v.shape, dtype=v.dtype, device=self.device),
            batch_size=[T, N],
            device=self.device,
        )
        self.actions = torch.zeros(T, N, *self.actions_shape, device=self.device)
        self.rewards = torch.zeros(T, N, 1, device=self.device)
        self.dones = torch.zeros(T, N, 1, device=self.device)

        if training_type == "distillation":
            self.privileged_actions = torch.zeros(T, N, *self.actions_shape, device=self.device)
        else:
            self.values = torch.zeros(T, N, 1, device=self.device)
            self.actions_log_prob = torch.zeros(T, N, 1, device=self.device)
            self.returns = torch.zeros(T, N, 1, device=self.device)
            self.advantages = torch.zeros(T, N, 1, device=self.device)
            self.distribution_params: tuple[torch.Tensor, ...] | None = None  # allocated at the first transition
            self.noise_scale: torch.Tensor | None = None  # [T, N, 1], allocated at the first transition that has one

        # Hidden states, each a tuple of buffers [T, L, N, H] (one for a GRU, two for an LSTM), allocated lazily.
        self.saved_hidden_state_a: tuple[torch.Tensor, ...] | None = None
        self.saved_hidden_state_c: tuple[torch.Tensor, ...] | None = None

    # ------------------------------------------------------------------ properties

    @property
    def num_envs(self) -> int:
        """Number of environments ``N``."""
        return self._num_envs

    @property
    def num_transitions_per_env(self) -> int:
        """Rollout length ``T``."""
        return self._num_steps

    @property
    def step(self) -> int:
        """Number of steps stored so far (index of the next slot)."""
        return self._step

    @property
    def batch_size(self) -> int:
        """Number of transitions in a full rollout, ``T * N``."""
        return self._num_steps * self._num_envs

    @property
    def is_full(self) -> bool:
        """True once ``T`` steps have been added."""
        return self._step >= self._num_steps

    def __len__(self) -> int:
        """Number of steps stored so far."""
        return self._step

    # ------------------------------------------------------------------ filling

    @torch.no_grad()
    def add_transition(self, transition: Transition) -> None:
        """Copy one step of data into slot :attr:`step` (in place, detached) and advance the step."""
        if self._step >= self._num_steps:
            raise OverflowError("Rollout buffer overflow! You should call clear() before adding new transitions.")
        t = self._step

        self.observations[t].update_(transition.observations)
        self.actions[t].copy_(transition.actions)
        self.rewards[t].copy_(transition.rewards.view(-1, 1))
        self.dones[t].copy_(transition.dones.view(-1, 1))

        if self.training_type == "distillation":
            self.privileged_actions[t].copy_(transition.privileged_actions)
        else:
            self.values[t].copy_(transition.values.view(-1, 1))
            self.actions_log_prob[t].copy_(transition.actions_log_prob.view(-1, 1))
            if transition.distribution_params is not None:
                if self.distribution_params is None:
                    self.distribution_params = tuple(self._alloc(p) for p in transition.distribution_params)
                for buffer, p in zip(self.distribution_params, transition.distribution_params):
                    buffer[t].copy_(p)
            if transition.noise_scale is not None:
                if self.noise_scale is None:
                    self.noise_scale = torch.ones(self._num_steps, self._num_envs, 1, device=self.device)
                self.noise_scale[t].copy_(transition.noise_scale.view(-1, 1))
            elif self.noise_scale is not None:  # this step used the policy's own std everywhere
                self.noise_scale[t].fill_(1.0)

        actor_state, critic_state = transition.hidden_states
        self.saved_hidden_state_a = self._save_hidden_state(self.saved_hidden_state_a, actor_state)
        self.saved_hidden_state_c = self._save_hidden_state(self.saved_hidden_state_c, critic_state)

        self._step += 1

    def clear(self) -> None:
        """Reset the write position; the buffers are overwritten by the next rollout."""
        self._step = 0

    def _alloc(self, example: torch.Tensor) -> torch.Tensor:
        """Zero buffer ``[T, *example.shape]`` with the example's dtype."""
        return torch.zeros(self._num_steps, *example.shape, dtype=example.dtype, device=self.device)

    def _save_hidden_state(
        self, buffers: tuple[torch.Tensor, ...] | None, state: HiddenState
    ) -> tuple[torch.Tensor, ...] | None:
        """Store ``state`` at the current step, allocating the buffers at the first non-None state.

        A None state after allocation is stored as zeros (the initial state of a recurrent module).
        """
        if state is None:
            if buffers is not None:
                for buffer in buffers:
                    buffer[self._step].zero_()
            return buffers
        parts = state if isinstance(state, tuple) else (state,)
        if buffers is None:
            buffers = tuple(self._alloc(p) for p in parts)
        for buffer, p in zip(buffers, parts):
            buffer[self._step].copy_(p)
        return buffers

    # ------------------------------------------------------------------ reading

    def _step_fields(self) -> dict[str, torch.Tensor]:
        """Per-step buffers ``[T, N, ...]`` other than observations, keyed by their :class:`Batch` field name."""
        if self.training_type == "distillation":
            return {"actions": self.actions, "privileged_actions": self.privileged_actions, "dones": self.dones}
        fields = {
            "actions": self.actions,
            "values": self.values,
            "advantages": self.advantages,
            "returns": self.returns,
            "old_actions_log_prob": self.actions_log_prob,
        }
        if self.noise_scale is not None:
            fields["noise_scale"] = self.noise_scale
        return fields

    def _dist_params(self) -> tuple[torch.Tensor, ...] | None:
        """Stored distribution parameters (RL), or None (distillation)."""
        if self.training_type != "rl":
            return None
        return self.distribution_params if self.distribution_params is not None else ()

    @staticmethod
    def _check_divisible(total: int, num_mini_batches: int, what: str) -> int:
        """Return ``total // num_mini_batches``, raising ValueError if it does not divide exactly."""
        if num_mini_batches <= 0 or total % num_mini_batches != 0:
            raise ConfigError(
                f"{what} = {total} must be divisible by num_mini_batches = {num_mini_batches} "
                "so that every transition is used exactly once per epoch."
            )
        return total // num_mini_batches

    def generator(self) -> Generator[Batch, None, None]:
        """Yield one batch per time step, in time order (distillation with recurrent students).

        Yields :class:`Batch` with ``observations [N]``, ``actions [N, A]``, ``privileged_actions [N, A]`` and
        ``dones [N, 1]``.
        """
        if self.training_type != "distillation":
            raise ValueError("generator() is only available for training_type 'distillation'.")
        for t in range(self._num_steps):
            yield RolloutStorage.Batch(
                observations=self.observations[t],
                actions=self.actions[t],
                privileged_actions=self.privileged_actions[t],
                dones=self.dones[t],
            )

    def mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8, reshuffle_each_epoch: bool = True
    ) -> Generator[Batch, None, None]:
        """Yield shuffled mini-batches over the ``B = T * N`` transitions (feed-forward models).

        Every transition appears exactly once per epoch. Each buffer is gathered once per permutation (once per epoch,
        or once in total with ``reshuffle_each_epoch=False``); the yielded tensors are slices (views) of the gathered
        buffers.

        Args:
            num_mini_batches: Mini-batches per epoch; must divide ``B``.
            num_epochs: Passes over the data.
            reshuffle_each_epoch: Draw a new permutation each epoch; otherwise reuse the first one.

        Yields:
            :class:`Batch` with tensors ``[b, ...]``, ``b = B / num_mini_batches``. RL: ``observations``, ``actions``,
            ``values``, ``advantages``, ``returns``, ``old_actions_log_prob``, ``old_distribution_params`` (and
            ``noise_scale`` when the transitions had one).
            Distillation: ``observations``, ``actions``, ``privileged_actions``, ``dones``.
        """
        total = self.batch_size
        mini_batch_size = self._check_divisible(total, num_mini_batches, "B = num_envs * num_transitions_per_env")

        flat_obs = self.observations.reshape(total)
        flat_fields = {name: buffer.flatten(0, 1) for name, buffer in self._step_fields().items()}
        dist_params = self._dist_params()
        flat_dist = None if dist_params is None else tuple(p.flatten(0, 1) for p in dist_params)

        for epoch in range(num_epochs):
            if epoch == 0 or reshuffle_each_epoch:
                perm = torch.randperm(total, device=self.device)
                obs = flat_obs.apply(functools.partial(_take_rows, index=perm), batch_size=[total])
                fields = {name: _take_rows(buffer, perm) for name, buffer in flat_fields.items()}
                dist = None if flat_dist is None else tuple(_take_rows(p, perm) for p in flat_dist)
            for i in range(num_mini_batches):
                s = slice(i * mini_batch_size, (i + 1) * mini_batch_size)
                yield RolloutStorage.Batch(
                    observations=obs[s],
                    old_distribution_params=None if dist is None else tuple(p[s] for p in dist),
                    **{name: buffer[s] for name, buffer in fields.items()},
                )

    def recurrent_mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8
    ) -> Generator[Batch, None, None]:
        """Yield mini-batches of whole environments, split into padded trajectories (recurrent models).

        The envs are permuted each epoch and cut into ``num_mini_batches`` groups of ``n = N / num_mini_batches``;
        every env appears exactly once per epoch. The trajectories of a batch are ordered like its envs (all
        trajectories of the batch's first env in time order, then its second env, ...), so
        ``unpad_trajectories(output, batch.masks)`` gives ``[T, n, ...]`` aligned with the per-step tensors.

        Yields:
            :class:`Batch` with ``observations`` padded ``[T, num_traj_in_batch]``, ``masks [T, num_traj_in_batch]``,
            per-step tensors ``[T, n, ...]`` (RL: actions, values, advantages, returns, old_actions_log_prob,
            old_distribution_params, noise_scale if stored; distillation: actions, privileged_actions, dones), and
            ``hidden_states``
            ``(actor, critic)``: each the stored state at every trajectory start, ``[L, num_traj_in_batch, H]``
            (an ``(h, c)`` tuple for an LSTM), or None if no state was stored.
        """
        envs_per_batch = self._check_divisible(self._num_envs, num_mini_batches, "num_envs")

        padded_obs, masks = split_and_pad_trajectories(self.observations, self.dones)
        starts = trajectory_starts(self.dones)  # [T, N]
        traj_counts = starts.sum(dim=0)  # [N]
        traj_offsets = torch.cumsum(traj_counts, dim=0) - traj_counts  # [N], first trajectory of each env
        hidden_a = self._hidden_at_starts(self.saved_hidden_state_a, starts)
        hidden_c = self._hidden_at_starts(self.saved_hidden_state_c, starts)
        fields = self._step_fields()
        dist_params = self._dist_params()

        for _ in range(num_epochs):
            perm = torch.randperm(self._num_envs, device=self.device)
            counts = traj_counts[perm]
            traj_index = _concat_ranges(traj_offsets[perm], counts)  # trajectories in the order of perm
            bounds = [0] + torch.cumsum(counts.view(num_mini_batches, envs_per_batch).sum(dim=1), 0).tolist()

            epoch_obs = padded_obs[:, traj_index]
            epoch_masks = masks[:, traj_index]
            epoch_fields = {name: buffer[:, perm] for name, buffer in fields.items()}
            epoch_dist = None if dist_params is None else tuple(p[:, perm] for p in dist_params)

            for i in range(num_mini_batches):
                traj = slice(bounds[i], bounds[i + 1])
                envs = slice(i * envs_per_batch, (i + 1) * envs_per_batch)
                batch_traj_index = traj_index[traj]
                yield RolloutStorage.Batch(
                    observations=epoch_obs[:, traj],
                    masks=epoch_masks[:, traj],
                    hidden_states=(_select_traj(hidden_a, batch_traj_index), _select_traj(hidden_c, batch_traj_index)),
                    old_distribution_params=None if epoch_dist is None else tuple(p[:, envs] for p in epoch_dist),
                    **{name: buffer[:, envs] for name, buffer in epoch_fields.items()},
                )

    @staticmethod
    def _hidden_at_starts(
        buffers: tuple[torch.Tensor, ...] | None, starts: torch.Tensor
    ) -> tuple[torch.Tensor, ...] | None:
        """Stored hidden states at the trajectory starts, in env-major trajectory order.

        Args:
            buffers: Stored states, each ``[T, L, N, H]``.
            starts: Trajectory starts ``[T, N]``.

        Returns:
            Tuple of ``[L, num_traj, H]`` tensors, or None.
        """
        if buffers is None:
            return None
        # [T, L, N, H] -> [N, T, L, H], select the starts in env-major order -> [num_traj, L, H] -> [L, num_traj, H]
        return tuple(b.movedim(2, 0)[starts.t()].movedim(0, 1) for b in buffers)


def _take_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]`` for a 1D ``index`` into dim 0, by ``index_select``: the same values, and on CPU 3-4x faster for
    rows of tens to hundreds of floats (one row copy per index instead of an element-wise gather), which is what
    the per-epoch shuffle gathers of a feed-forward update are (``bench/learner.py --profile``)."""
    return x.index_select(0, index)


def _concat_ranges(begins: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Concatenate ``arange(b, b + n)`` for every pair of ``begins``/``lengths`` (vectorised)."""
    ends = torch.cumsum(lengths, dim=0)
    shift = torch.repeat_interleave(begins - (ends - lengths), lengths)
    return torch.arange(shift.numel(), device=begins.device) + shift


def _select_traj(states: tuple[torch.Tensor, ...] | None, index: torch.Tensor) -> HiddenState:
    """Gather trajectories ``index`` from states ``[L, num_traj, H]`` (contiguous result, as cuDNN requires).

    Returns a tensor for a single state (GRU), a tuple for two (LSTM), or None.
    """
    if states is None:
        return None
    selected = tuple(s.index_select(1, index) for s in states)
    return selected[0] if len(selected) == 1 else selected
