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

from rlcore.env import VecEnv
from tasks.classic.base import ClassicTaskState

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


class PendulumSwingUp(ClassicTaskState, VecEnv):
    """``num_envs`` pendulums that must be swung up and balanced; episodes end only by time-out.

    State ``self.state`` ``[N, 2]`` = (theta, theta_dot); it may be set directly (tests, curricula).
    Action ``[N, 1]`` in policy space: clipped to ``[-1, 1]`` and scaled by ``max_torque``.
    Observation groups: ``policy`` ``[N, 3]`` = (cos th, sin th, thdot / max_speed), or ``[N, 2]`` =
    (cos th, sin th) with ``hide_velocity``; ``critic`` ``[N, 3]`` = full state, always.
    Reward ``-(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2)`` on the state before the step.

    ``extras["log"]`` reports, without any host sync, the mean over envs of each env's most recently
    finished episode return / length (NaN until some env has finished an episode).

    ``state_dict()`` / ``load_state_dict()`` save and restore the whole task state (physical state, episode
    counters and statistics, generator) for an exact resume of training.
    """

    num_actions: int = 1

    def __init__(
        self,
        num_envs: int = 1024,
        device: str | torch.device = "cpu",
        max_episode_length: int = 200,
        hide_velocity: bool = False,
        seed: int | None = None,
        **cfg: float,
    ) -> None:
        unknown = set(cfg) - set(PENDULUM_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown PendulumSwingUp settings {sorted(unknown)}; valid: {sorted(PENDULUM_DEFAULTS)}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_episode_length = int(max_episode_length)
        self.hide_velocity = bool(hide_velocity)
        physics = {**PENDULUM_DEFAULTS, **{k: float(v) for k, v in cfg.items()}}
        self.cfg: dict = {
            "num_envs": self.num_envs,
            "device": str(self.device),
            "max_episode_length": self.max_episode_length,
            "hide_velocity": self.hide_velocity,
            "seed": seed,
            **physics,
        }
        self.dt = physics["dt"]
        self.max_torque = physics["max_torque"]
        self.max_speed = physics["max_speed"]
        # theta_ddot = gravity_coef * sin(th) + torque_coef * u (rod pivoting at one end, theta = 0 up)
        self._gravity_coef = 3.0 * physics["g"] / (2.0 * physics["l"])
        self._torque_coef = 3.0 / (physics["m"] * physics["l"] ** 2)

        self._start_high = torch.tensor([math.pi, 1.0], device=self.device)  # start-state half-ranges
        self.generator = torch.Generator(device=self.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

        n = self.num_envs
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self.episode_return = torch.zeros(n, device=self.device)
        # Return / length of each env's last finished episode (NaN until it finishes one), for logging.
        self._last_return = torch.full((n,), float("nan"), device=self.device)
        self._last_length = torch.full((n,), float("nan"), device=self.device)
        self.state = self._sample_start_states()

    # ------------------------------------------------------------------ helpers
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

    # ------------------------------------------------------------------ VecEnv API
    def get_observations(self) -> TensorDict:
        """Current observations, ``TensorDict[N]`` with ``policy`` and ``critic`` groups."""
        return self._observe(self.state)

    def reset(self) -> TensorDict:
        """Reset every env to a fresh start state and return its observations."""
        self.state = self._sample_start_states()
        self.episode_length_buf.zero_()
        self.episode_return.zero_()
        return self.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Advance one control step with ``actions [N, 1]``; finished envs are reset in place.

        Returns ``(obs, rewards [N] float32, dones [N] bool, extras)`` where ``extras`` holds
        ``time_outs [N]``, ``final_observations`` (pre-reset observation) and ``log``.
        """
        u = actions.reshape(self.num_envs, -1)[:, 0].to(self.device, torch.float32).clamp(-1.0, 1.0)
        u = u * self.max_torque
        th, thdot = self.state.unbind(-1)
        rewards = -(angle_normalize(th).square() + 0.1 * thdot.square() + 0.001 * u.square())

        thdot = thdot + (self._gravity_coef * torch.sin(th) + self._torque_coef * u) * self.dt
        thdot = thdot.clamp(-self.max_speed, self.max_speed)
        th = th + thdot * self.dt
        next_state = torch.stack((th, thdot), dim=-1)

        # Read the buffer attribute every step: runners may replace it (random initial lengths).
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        dones = time_outs  # the pendulum has no terminal states
        final_obs = self._observe(next_state)

        self.episode_return += rewards
        self._last_return = torch.where(dones, self.episode_return, self._last_return)
        self._last_length = torch.where(dones, self.episode_length_buf.float(), self._last_length)
        self.episode_return.masked_fill_(dones, 0.0)
        self.episode_length_buf.masked_fill_(dones, 0)
        # Sample for every row and select, so that resetting needs no host sync.
        self.state = torch.where(dones.unsqueeze(-1), self._sample_start_states(), next_state)
        obs = self._observe(self.state)

        extras = {
            "time_outs": time_outs,
            "final_observations": final_obs,
            "log": {
                "/episode_return_mean": torch.nanmean(self._last_return),
                "/episode_length_mean": torch.nanmean(self._last_length),
            },
        }
        return obs, rewards, dones, extras
