"""Vectorised pendulum swing-up in pure torch: a seconds-fast task to prove that an algorithm learns.

The dynamics, reward and start distribution are those of Gymnasium ``Pendulum-v1`` (theta = 0 is
upright), so returns are directly comparable with published numbers (a good policy scores about
-150 per 200-step episode). With ``hide_velocity=True`` the policy only sees the angle, so solving it
needs memory (a recurrent policy), while the critic keeps the full state (asymmetric actor-critic).
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from rlcore_tasks.classic.base import ClassicTask

#: Physics constants; any of them can be overridden through ``**cfg``.
PENDULUM_DEFAULTS: dict[str, float] = {
    "g": 10.0,  # gravity [m/s^2]
    "m": 1.0,  # mass [kg]
    "l": 1.0,  # length [m]
    "dt": 0.05,  # control / integration step [s]
    "max_torque": 2.0,  # torque applied for an action of +1 [N m]
    "max_speed": 8.0,  # angular velocity clip [rad/s]
}


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to ``[-pi, pi)``."""
    return torch.remainder(x + math.pi, 2.0 * math.pi) - math.pi


class PendulumSwingUp(ClassicTask):
    """``num_envs`` pendulums that must be swung up and balanced; episodes end only by time-out.

    State ``self.state`` ``[N, 2]`` = (theta, theta_dot); it may be set directly (tests, curricula).
    Action ``[N, 1]`` in policy space: clipped to ``[-1, 1]`` and scaled by ``max_torque``.
    Observation groups: ``policy`` ``[N, 3]`` = (cos th, sin th, thdot / max_speed), or ``[N, 2]`` =
    (cos th, sin th) with ``hide_velocity``; ``critic`` ``[N, 3]`` = full state, always.
    Reward ``-(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2)`` on the state before the step.

    Episode bookkeeping, ``extras["log"]`` and ``state_dict()`` / ``load_state_dict()`` come from
    :class:`~rlcore_tasks.classic.base.ClassicTask`.
    """

    DEFAULTS = PENDULUM_DEFAULTS

    def __init__(self, num_envs: int = 1024, device: str | torch.device = "cpu", max_episode_length: int = 200,
                 hide_velocity: bool = False, seed: int | None = None, **cfg: float) -> None:
        super().__init__(num_envs, device, max_episode_length, hide_velocity, seed, **cfg)

    def _configure(self, physics: dict[str, float]) -> None:
        self.dt = physics["dt"]
        self.step_dt = self.dt  # seconds per env step (VecEnv contract; RND scales its bonus by it)
        self.max_torque = physics["max_torque"]
        self.max_speed = physics["max_speed"]
        # theta_ddot = gravity_coef * sin(th) + torque_coef * u (rod pivoting at one end, theta = 0 up)
        self._gravity_coef = 3.0 * physics["g"] / (2.0 * physics["l"])
        self._torque_coef = 3.0 / (physics["m"] * physics["l"] ** 2)
        self._start_high = torch.tensor([math.pi, 1.0], device=self.device)  # start-state half-ranges

    def _sample_start_states(self) -> torch.Tensor:
        """Fresh start states ``[N, 2]``: theta ~ U[-pi, pi], theta_dot ~ U[-1, 1]."""
        u = torch.rand(self.num_envs, 2, generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * self._start_high

    def _observe(self, state: torch.Tensor) -> TensorDict:
        """Observation groups of ``state`` ``[N, 2]`` as a ``TensorDict[N]``."""
        th, thdot = state.unbind(-1)
        cos, sin = torch.cos(th), torch.sin(th)
        critic = torch.stack((cos, sin, thdot / self.max_speed), dim=-1)
        policy = torch.stack((cos, sin), dim=-1) if self.hide_velocity else critic.clone()
        return TensorDict({"policy": policy, "critic": critic}, batch_size=[self.num_envs], device=self.device)

    def _physics_step(self, state: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        """Semi-implicit Euler step of Pendulum-v1 (the angle advances with the new, clipped velocity)."""
        u = actions * self.max_torque
        th, thdot = state.unbind(-1)
        rewards = -(angle_normalize(th).square() + 0.1 * thdot.square() + 0.001 * u.square())

        thdot = thdot + (self._gravity_coef * torch.sin(th) + self._torque_coef * u) * self.dt
        thdot = thdot.clamp(-self.max_speed, self.max_speed)
        th = th + thdot * self.dt
        return torch.stack((th, thdot), dim=-1), rewards, None  # the pendulum has no terminal states
