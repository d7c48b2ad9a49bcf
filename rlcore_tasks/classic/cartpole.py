"""Vectorised continuous-action cart-pole balance in pure torch: a fast task with real terminal states.

The physics (Euler-integrated cart-pole), failure thresholds and start distribution are those of
Gymnasium ``CartPole-v1``; only the action differs: a continuous force ``clip(a, -1, 1) * force_mag``
instead of a discrete +-force_mag push. Unlike the pendulum, episodes end both by terminals (pole
fallen / cart out of the track) and by time-outs, which exercises the terminal vs time-out handling.
With ``hide_velocity=True`` the policy sees only positions (needs memory); the critic sees the full state.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from rlcore_tasks.classic.base import ClassicTask

#: Physics constants and failure thresholds; any of them can be overridden through ``**cfg``.
CARTPOLE_DEFAULTS: dict[str, float] = {
    "gravity": 9.8,  # [m/s^2]
    "masscart": 1.0,  # [kg]
    "masspole": 0.1,  # [kg]
    "length": 0.5,  # half the pole length [m]
    "force_mag": 10.0,  # force for an action of +1 [N]
    "tau": 0.02,  # integration / control step [s]
    "x_threshold": 2.4,  # |x| beyond this is terminal [m]
    "theta_threshold": 12.0 * 2.0 * math.pi / 360.0,  # |theta| beyond this is terminal [rad]
    "reset_noise": 0.05,  # start state ~ U[-reset_noise, reset_noise]^4
}


class CartPole(ClassicTask):
    """``num_envs`` cart-poles that must keep the pole upright; reward +1 for every step taken.

    State ``self.state`` ``[N, 4]`` = (x, x_dot, theta, theta_dot); it may be set directly.
    Action ``[N, 1]`` in policy space: clipped to ``[-1, 1]`` and scaled by ``force_mag``.
    Observation groups: ``policy`` ``[N, 4]`` = full state, or ``[N, 2]`` = (x, theta) with
    ``hide_velocity``; ``critic`` ``[N, 4]`` = full state, always.
    Terminal when ``|x| > x_threshold`` or ``|theta| > theta_threshold`` after the step (that step
    still earns +1, as in Gymnasium, so a perfect episode returns ``max_episode_length``).

    Episode bookkeeping, ``extras["log"]`` and ``state_dict()`` / ``load_state_dict()`` come from
    :class:`~rlcore_tasks.classic.base.ClassicTask`.
    """

    DEFAULTS = CARTPOLE_DEFAULTS

    def __init__(self, num_envs: int = 1024, device: str | torch.device = "cpu", max_episode_length: int = 500,
                 hide_velocity: bool = False, seed: int | None = None, **cfg: float) -> None:
        super().__init__(num_envs, device, max_episode_length, hide_velocity, seed, **cfg)

    def _configure(self, physics: dict[str, float]) -> None:
        self.gravity = physics["gravity"]
        self.masspole = physics["masspole"]
        self.total_mass = physics["masspole"] + physics["masscart"]
        self.length = physics["length"]
        self.polemass_length = physics["masspole"] * physics["length"]
        self.force_mag = physics["force_mag"]
        self.tau = physics["tau"]
        self.step_dt = self.tau  # seconds per env step (VecEnv contract; RND scales its bonus by it)
        self.x_threshold = physics["x_threshold"]
        self.theta_threshold = physics["theta_threshold"]
        self.reset_noise = physics["reset_noise"]

    def _sample_start_states(self) -> torch.Tensor:
        """Fresh start states ``[N, 4]`` ~ U[-reset_noise, reset_noise]."""
        u = torch.rand(self.num_envs, 4, generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * self.reset_noise

    def _observe(self, state: torch.Tensor) -> TensorDict:
        """Observation groups of ``state`` ``[N, 4]`` as a ``TensorDict[N]``."""
        critic = state.clone()
        policy = state[:, 0::2].clone() if self.hide_velocity else state.clone()
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def _physics_step(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Explicit Euler step of CartPole-v1 under the force ``actions * force_mag``; +1 reward per step."""
        force = actions * self.force_mag
        x, x_dot, theta, theta_dot = state.unbind(-1)
        cos, sin = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot.square() * sin) / self.total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos.square() / self.total_mass)
        )
        x_acc = temp - self.polemass_length * theta_acc * cos / self.total_mass
        # Explicit Euler: positions advance with the old velocities.
        next_state = torch.stack(
            (
                x + self.tau * x_dot,
                x_dot + self.tau * x_acc,
                theta + self.tau * theta_dot,
                theta_dot + self.tau * theta_acc,
            ),
            dim=-1,
        )
        terminated = (next_state[:, 0].abs() > self.x_threshold) | (next_state[:, 2].abs() > self.theta_threshold)
        rewards = torch.ones(self.num_envs, device=self.device)
        return next_state, rewards, terminated
