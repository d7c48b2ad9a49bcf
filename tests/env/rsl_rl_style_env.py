"""A small environment written the way rsl_rl 5.x environments are (Isaac Lab's and mjlab's ``RslRlVecEnvWrapper``).

It imports nothing from rlcore: like those wrappers it is an object with ``num_envs``, ``num_actions``,
``max_episode_length``, ``episode_length_buf`` (a property forwarding to the simulation's buffer, which the runner
may overwrite), ``device`` and ``cfg``, whose ``get_observations()`` returns a ``TensorDict`` of observation groups
and whose ``step(actions)`` returns ``(obs, rewards, dones, extras)`` with ``extras["time_outs"]`` and
``extras["log"]`` (keys starting with "/"). There are no ``final_observations`` (an rlcore addition).

Task: a point mass on a plane must reach a goal; the ``policy`` group sees the position error and the velocity
(``[N, 4]``), the ``critic`` group adds privileged terms: the goal and a per-env drag coefficient (``[N, 3]``).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict


class _Sim:
    """Stands in for the simulator object the wrappers forward to (``env.unwrapped`` in Isaac Lab), which also
    holds the control step ``step_dt`` (rsl_rl reads ``env.unwrapped.step_dt``)."""

    def __init__(self, num_envs: int, device: str) -> None:
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.step_dt = 0.1


class RslRlStyleEnv:
    POLICY_DIM, CRITIC_DIM = 4, 3

    def __init__(self, num_envs: int = 32, device: str = "cpu", max_episode_length: int = 50, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.num_actions = 2
        self.max_episode_length = max_episode_length
        self.device = device
        self.cfg = {"name": "rsl_rl_style_point_mass", "num_envs": num_envs}
        self.unwrapped = _Sim(num_envs, device)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.pos = torch.zeros(num_envs, 2, device=device)
        self.vel = torch.zeros(num_envs, 2, device=device)
        self.goal = torch.zeros(num_envs, 2, device=device)
        self.drag = torch.zeros(num_envs, device=device)
        self._reset(torch.ones(num_envs, dtype=torch.bool, device=device))

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.unwrapped.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.unwrapped.episode_length_buf = value

    def _reset(self, mask: torch.Tensor) -> None:
        n = self.num_envs
        rand = lambda *shape: torch.rand(*shape, generator=self.generator, device=self.device)  # noqa: E731
        self.pos = torch.where(mask.unsqueeze(-1), rand(n, 2) * 2 - 1, self.pos)
        self.vel = torch.where(mask.unsqueeze(-1), torch.zeros_like(self.vel), self.vel)
        self.goal = torch.where(mask.unsqueeze(-1), rand(n, 2) * 2 - 1, self.goal)
        self.drag = torch.where(mask, rand(n) * 0.5, self.drag)
        self.episode_length_buf.masked_fill_(mask, 0)

    def get_observations(self) -> TensorDict:
        policy = torch.cat((self.goal - self.pos, self.vel), dim=-1)
        critic = torch.cat((self.goal, self.drag.unsqueeze(-1)), dim=-1)
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def step(self, actions: torch.Tensor):
        dt = self.unwrapped.step_dt
        self.vel = self.vel + (actions.clamp(-1, 1) - self.drag.unsqueeze(-1) * self.vel) * dt
        self.pos = self.pos + self.vel * dt
        distance = (self.goal - self.pos).norm(dim=-1)
        rewards = -distance
        self.episode_length_buf += 1
        terminated = self.pos.abs().amax(dim=-1) > 3.0
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs
        log = {"/distance": distance.mean(), "/terminated": terminated.float().mean()}
        extras = {"time_outs": time_outs, "log": log}
        self._reset(dones)
        return self.get_observations(), rewards, dones, extras
