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

from rlcore.env import VecEnv
from tasks.classic.base import ClassicTaskState

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


class CartPole(ClassicTaskState, VecEnv):
    """``num_envs`` cart-poles that must keep the pole upright; reward +1 for every step taken.

    State ``self.state`` ``[N, 4]`` = (x, x_dot, theta, theta_dot); it may be set directly.
    Action ``[N, 1]`` in policy space: clipped to ``[-1, 1]`` and scaled by ``force_mag``.
    Observation groups: ``policy`` ``[N, 4]`` = full state, or ``[N, 2]`` = (x, theta) with
    ``hide_velocity``; ``critic`` ``[N, 4]`` = full state, always.
    Terminal when ``|x| > x_threshold`` or ``|theta| > theta_threshold`` after the step (that step
    still earns +1, as in Gymnasium, so a perfect episode returns ``max_episode_length``).

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
        max_episode_length: int = 500,
        hide_velocity: bool = False,
        seed: int | None = None,
        **cfg: float,
    ) -> None:
        unknown = set(cfg) - set(CARTPOLE_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown CartPole settings {sorted(unknown)}; valid: {sorted(CARTPOLE_DEFAULTS)}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_episode_length = int(max_episode_length)
        self.hide_velocity = bool(hide_velocity)
        p = {**CARTPOLE_DEFAULTS, **{k: float(v) for k, v in cfg.items()}}
        self.cfg: dict = {
            "num_envs": self.num_envs,
            "device": str(self.device),
            "max_episode_length": self.max_episode_length,
            "hide_velocity": self.hide_velocity,
            "seed": seed,
            **p,
        }
        self.gravity = p["gravity"]
        self.masspole = p["masspole"]
        self.total_mass = p["masspole"] + p["masscart"]
        self.length = p["length"]
        self.polemass_length = p["masspole"] * p["length"]
        self.force_mag = p["force_mag"]
        self.tau = p["tau"]
        self.x_threshold = p["x_threshold"]
        self.theta_threshold = p["theta_threshold"]
        self.reset_noise = p["reset_noise"]

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
        """Fresh start states ``[N, 4]`` ~ U[-reset_noise, reset_noise]."""
        u = torch.rand(self.num_envs, 4, generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * self.reset_noise

    def _observe(self, state: torch.Tensor) -> TensorDict:
        """Observation groups of ``state`` ``[N, 4]`` as a ``TensorDict[N]``."""
        critic = state.clone()
        policy = state[:, 0::2].clone() if self.hide_velocity else state.clone()
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
        ``time_outs [N]`` (time limit reached and not terminal), ``final_observations`` (pre-reset
        observation) and ``log``.
        """
        a = actions.reshape(self.num_envs, -1)[:, 0].to(self.device, torch.float32).clamp(-1.0, 1.0)
        force = a * self.force_mag
        x, x_dot, theta, theta_dot = self.state.unbind(-1)
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
        # Read the buffer attribute every step: runners may replace it (random initial lengths).
        self.episode_length_buf += 1
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs
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
