"""What the classic tasks share: the state an exact resume of training needs (``state_dict`` / ``load_state_dict``)."""

from __future__ import annotations

import torch


class ClassicTaskState:
    """``state_dict()`` / ``load_state_dict()`` for a classic task (mixed into the task classes).

    The state is everything that decides the task's future given the actions: the physical state, the
    episode counters, the last-episode statistics reported in ``extras["log"]`` and the private
    ``torch.Generator`` that draws reset states. It holds only tensors, ints and strings, so it can be
    stored in a checkpoint loaded with ``torch.load(weights_only=True)``.
    """

    #: Tensor attributes making up the state, all of leading dimension ``num_envs``.
    STATE_TENSORS: tuple[str, ...] = ("state", "episode_length_buf", "episode_return", "_last_return", "_last_length")

    num_envs: int
    device: torch.device
    generator: torch.Generator

    def state_dict(self) -> dict:
        """A copy of the task's state (tensors on the task's device; the generator state is a CPU byte tensor)."""
        out: dict = {name: getattr(self, name).detach().clone() for name in self.STATE_TENSORS}
        out["generator_state"] = self.generator.get_state()
        out["task"] = type(self).__name__
        out["num_envs"] = self.num_envs
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned (tensors may come on any device).

        Raises:
            ValueError: the state was written by another task class or for another number of envs, or lacks
                (or mis-shapes) an entry.
        """
        task = state.get("task", type(self).__name__)
        if task != type(self).__name__:
            raise ValueError(f"Env state was saved by task {task}, cannot load it into {type(self).__name__}.")
        if int(state.get("num_envs", self.num_envs)) != self.num_envs:
            raise ValueError(f"Env state was saved with num_envs={int(state['num_envs'])}, this {type(self).__name__} "
                             f"has num_envs={self.num_envs}.")
        missing = [k for k in (*self.STATE_TENSORS, "generator_state") if k not in state]
        if missing:
            raise ValueError(f"Env state for {type(self).__name__} lacks {missing}.")
        new = {}
        for name in self.STATE_TENSORS:
            current, saved = getattr(self, name), torch.as_tensor(state[name])
            if tuple(saved.shape) != tuple(current.shape):
                raise ValueError(f"Env state '{name}' has shape {tuple(saved.shape)}, "
                                 f"{type(self).__name__} expects {tuple(current.shape)}.")
            new[name] = saved.to(device=current.device, dtype=current.dtype).clone()
        self.generator.set_state(torch.as_tensor(state["generator_state"]).cpu())
        for name, value in new.items():
            setattr(self, name, value)
