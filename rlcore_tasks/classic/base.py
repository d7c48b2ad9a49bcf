"""What the classic tasks share: construction, the VecEnv step flow (episode bookkeeping, autoreset,
logging) and the state an exact resume of training needs (``state_dict`` / ``load_state_dict``).

A task subclass only supplies its physics: its constants (``DEFAULTS`` and ``_configure``), its start
distribution (``_sample_start_states``), its observation groups (``_observe``) and one transition
(``_physics_step``).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import torch
from tensordict import TensorDict

from rlcore.env import ConfigError, VecEnv


class ClassicTask(VecEnv):
    """``num_envs`` copies of a small pure-torch control task with a single action, reset in place.

    Action ``[N, 1]`` in policy space, clipped to ``[-1, 1]`` before it reaches ``_physics_step``.
    An episode ends when the task reports a terminal state or when ``episode_length_buf`` reaches
    ``max_episode_length``; a terminal on the time-limit step is not a time-out.

    ``extras["log"]`` reports, without any host sync, the mean over envs of each env's most recently
    finished episode return / length (NaN until some env has finished an episode).

    ``state_dict()`` / ``load_state_dict()`` save and restore the whole task state (physical state, episode
    counters and statistics, generator) for an exact resume of training.
    """

    num_actions: int = 1

    #: Seconds per env step (one control / integration step), set by ``_configure``.
    step_dt: float

    #: Physics constants of the task; any of them can be overridden through ``**cfg``.
    DEFAULTS: dict[str, float]

    #: Tensor attributes making up the state, all of leading dimension ``num_envs``.
    STATE_TENSORS: tuple[str, ...] = ("state", "episode_length_buf", "episode_return", "_last_return", "_last_length")

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device,
        max_episode_length: int,
        hide_velocity: bool,
        seed: int | None,
        **cfg: float,
    ) -> None:
        name = type(self).__name__
        unknown = set(cfg) - set(self.DEFAULTS)
        if unknown:
            raise ConfigError(f"unknown {name} settings {sorted(unknown)}; valid: {sorted(self.DEFAULTS)}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_episode_length = int(max_episode_length)
        self.hide_velocity = bool(hide_velocity)
        physics = {**self.DEFAULTS, **{k: float(v) for k, v in cfg.items()}}
        self.cfg: dict = {
            "num_envs": self.num_envs,
            "device": str(self.device),
            "max_episode_length": self.max_episode_length,
            "hide_velocity": self.hide_velocity,
            "seed": seed,
            **physics,
        }
        self._configure(physics)

        # A private generator draws every reset state, so seeding is reproducible whatever the global rng does.
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

    # ------------------------------------------------------------------ what a task supplies
    @abstractmethod
    def _configure(self, physics: dict[str, float]) -> None:
        """Set the task's physics attributes from ``physics`` (``DEFAULTS`` with the ``**cfg`` overrides)."""

    @abstractmethod
    def _sample_start_states(self) -> torch.Tensor:
        """Fresh start states ``[N, S]`` for every env, drawn from ``self.generator``."""

    @abstractmethod
    def _observe(self, state: torch.Tensor) -> TensorDict:
        """Observation groups (``policy``, ``critic``) of ``state`` ``[N, S]`` as a ``TensorDict[N]``."""

    @abstractmethod
    def _physics_step(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One transition from ``state [N, S]`` under clipped ``actions [N]`` in ``[-1, 1]``.

        Returns ``(next_state [N, S], rewards [N] float32, terminal)``, ``terminal`` a bool ``[N]`` (judged on
        ``next_state``), or ``None`` for a task without terminal states (episodes end only by time-out).
        """

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
        next_state, rewards, terminated = self._physics_step(self.state, a)

        # Read the buffer attribute every step: runners may replace it (random initial lengths).
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        if terminated is None:
            dones = time_outs
        else:
            time_outs = time_outs & ~terminated
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

    # ------------------------------------------------------------------ rendering
    def render(self, width: int = 640, height: int = 480):
        """Env 0 drawn as a picture: ``numpy uint8 [height, width, 3]`` (for ``python -m rlcore.play video=true``).

        A pole on a pivot, drawn with numpy alone (no display, no OpenGL): the pivot rides a cart on a track
        when the task has one. The geometry comes from :meth:`_render_pose`.
        """
        cart_x, angle, pole_length, track_half = self._render_pose()
        width, height = int(width), int(height)
        img = np.full((height, width, 3), 255, dtype=np.uint8)
        world_half_width = (track_half + pole_length if track_half else pole_length) * 1.15
        scale = (width / 2.0) / world_half_width
        scale = min(scale, 0.42 * height / pole_length)
        base_y = height * (0.62 if track_half else 0.5)

        def px(x: float, y: float) -> tuple[float, float]:
            return width / 2.0 + x * scale, base_y - y * scale

        pivot = px(cart_x, 0.0)
        if track_half:
            _fill_rect(img, (px(-track_half, 0.0)[0], base_y + 0.12 * scale),
                       (px(track_half, 0.0)[0], base_y + 0.14 * scale), (90, 90, 90))
            _fill_rect(img, (pivot[0] - 0.25 * scale, pivot[1] - 0.08 * scale),
                       (pivot[0] + 0.25 * scale, pivot[1] + 0.12 * scale), (40, 40, 40))
        tip = px(cart_x + pole_length * math.sin(angle), pole_length * math.cos(angle))
        _draw_segment(img, pivot, tip, max(2.0, 0.045 * scale), (204, 102, 51))
        _draw_segment(img, pivot, pivot, max(3.0, 0.05 * scale), (70, 70, 160))
        return img

    def _render_pose(self) -> tuple[float, float, float, float]:
        """``(cart x, pole angle from upright, pole length, track half-width or 0)`` of env 0.

        Default for the classic layouts: state ``[theta, theta_dot]`` (pendulum, length ``cfg['l']``) or
        ``[x, x_dot, theta, theta_dot]`` (cart-pole, half-length ``cfg['length']``, track ``cfg['x_threshold']``).
        """
        s = self.state[0].detach().float().cpu().tolist()
        if len(s) >= 4:
            return s[0], s[2], 2.0 * float(self.cfg.get("length", 0.5)), float(self.cfg.get("x_threshold", 2.4))
        return 0.0, s[0], float(self.cfg.get("l", 1.0)), 0.0

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict:
        """A copy of the task's state (tensors on the task's device; the generator state is a CPU byte tensor).

        The state is everything that decides the task's future given the actions: the physical state, the
        episode counters, the last-episode statistics reported in ``extras["log"]`` and the private
        ``torch.Generator`` that draws reset states. It holds only tensors, ints and strings, so it can be
        stored in a checkpoint loaded with ``torch.load(weights_only=True)``.
        """
        out: dict = {name: getattr(self, name).detach().clone() for name in self.STATE_TENSORS}
        out["generator_state"] = self.generator.get_state()
        out["task"] = type(self).__name__
        out["num_envs"] = self.num_envs
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned (tensors may come on any device); a rejected state changes nothing.

        Raises:
            ValueError: the state was written by another task class or for another number of envs, or lacks
                (or mis-shapes) an entry.
        """
        task = state.get("task", type(self).__name__)
        if task != type(self).__name__:
            raise ConfigError(f"Env state was saved by task {task}, cannot load it into {type(self).__name__}.")
        if int(state.get("num_envs", self.num_envs)) != self.num_envs:
            raise ConfigError(f"Env state was saved with num_envs={int(state['num_envs'])}, this {type(self).__name__} "
                             f"has num_envs={self.num_envs}.")
        missing = [k for k in (*self.STATE_TENSORS, "generator_state") if k not in state]
        if missing:
            raise ConfigError(f"Env state for {type(self).__name__} lacks {missing}.")
        new = {}
        for name in self.STATE_TENSORS:
            current, saved = getattr(self, name), torch.as_tensor(state[name])
            if tuple(saved.shape) != tuple(current.shape):
                raise ConfigError(f"Env state '{name}' has shape {tuple(saved.shape)}, "
                                 f"{type(self).__name__} expects {tuple(current.shape)}.")
            new[name] = saved.to(device=current.device, dtype=current.dtype).clone()
        self.generator.set_state(torch.as_tensor(state["generator_state"]).cpu())
        for name, value in new.items():
            setattr(self, name, value)


def _fill_rect(img, p0: tuple[float, float], p1: tuple[float, float], color: tuple[int, int, int]) -> None:
    """Fill the axis-aligned pixel rectangle between corners ``p0`` and ``p1`` (x, y), clipped to the image."""
    h, w = img.shape[:2]
    x0, x1 = sorted((int(round(p0[0])), int(round(p1[0]))))
    y0, y1 = sorted((int(round(p0[1])), int(round(p1[1]))))
    img[max(y0, 0):min(y1 + 1, h), max(x0, 0):min(x1 + 1, w)] = color


def _draw_segment(img, p0: tuple[float, float], p1: tuple[float, float], radius: float,
                  color: tuple[int, int, int]) -> None:
    """Draw a thick segment (a capsule of ``radius`` pixels) from ``p0`` to ``p1``, clipped to the image."""
    h, w = img.shape[:2]
    x_lo, x_hi = int(max(min(p0[0], p1[0]) - radius, 0)), int(min(max(p0[0], p1[0]) + radius + 1, w))
    y_lo, y_hi = int(max(min(p0[1], p1[1]) - radius, 0)), int(min(max(p0[1], p1[1]) + radius + 1, h))
    if x_lo >= x_hi or y_lo >= y_hi:
        return
    ys, xs = np.mgrid[y_lo:y_hi, x_lo:x_hi].astype(np.float32)
    dx, dy = p1[0] - p0[0], p1[1] - p0[1]
    t = ((xs - p0[0]) * dx + (ys - p0[1]) * dy) / max(dx * dx + dy * dy, 1e-9)
    t = np.clip(t, 0.0, 1.0)
    dist2 = (xs - p0[0] - t * dx) ** 2 + (ys - p0[1] - t * dy) ** 2
    img[y_lo:y_hi, x_lo:x_hi][dist2 <= radius * radius] = color
