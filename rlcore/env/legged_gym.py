"""legged_gym-style (Isaac Gym era) environments as rlcore ``VecEnv``s.

The API adapted is that of legged_gym 1.0's ``BaseTask`` / ``LeggedRobot``, which unitree_rl_gym and most
Isaac Gym locomotion code keep, and which rsl_rl 1.0.2's ``OnPolicyRunner`` drives:

- attributes ``num_envs``, ``num_obs``, ``num_privileged_obs`` (``None``: no privileged observations),
  ``num_actions``, ``max_episode_length``, ``episode_length_buf``, ``reset_buf``, ``obs_buf``,
  ``privileged_obs_buf``, ``extras``, ``device``, ``cfg``;
- ``get_observations() -> obs [N, num_obs]``, ``get_privileged_observations() -> [N, num_privileged_obs] | None``;
- ``reset() -> (obs, privileged_obs)``;
- ``step(actions) -> (obs, privileged_obs, rewards [N], dones [N], extras)`` where the env has already reset the
  finished envs, ``extras["time_outs"]`` (when ``cfg.env.send_timeouts``) marks time-limit ends and
  ``extras["episode"]`` holds the statistics of the episodes that ended at the last step with a reset.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from rlcore.env.vec_env import VecEnv
from rlcore.errors import ConfigError


class LeggedGymVecEnv(VecEnv):
    """A legged_gym-style environment (legged_gym 1.0 / unitree_rl_gym, rsl_rl 1.0.2 API) as an rlcore ``VecEnv``.

    Observation groups: ``policy`` = ``get_observations()``; ``critic`` = ``get_privileged_observations()`` when
    the env has privileged observations (``num_privileged_obs`` not ``None``), no ``critic`` group otherwise.
    In legged_gym the privileged observation is the critic's whole input (the policy observation plus extra
    terms), so the usual ``obs_groups`` are ``{"actor": ["policy"], "critic": ["critic"]}`` (or ``["policy"]``
    for the critic without privileged observations).

    ``step`` returns copies of the env's buffers (legged_gym rewrites ``rew_buf`` and others in place on the
    next step), ``dones = reset_buf`` as bool, ``extras["time_outs"] = extras["time_outs"] & dones`` (legged_gym
    refreshes ``extras["time_outs"]`` only on steps where some env resets, so it can be stale otherwise),
    and ``extras["log"]`` with ``extras["episode"]``'s entries under ``"/"`` keys (NaN on steps where no
    episode ended, which the runner's logger skips). legged_gym envs do not report the observation before a
    reset, so there are no ``final_observations``: PPO bootstraps time-outs from V of the step's own
    observation, as rsl_rl does.

    ``episode_length_buf`` reads and writes the env's own buffer, so the runner's ``init_at_random_ep_len``
    reaches the env as it did with rsl_rl 1.0.2. Actions go to the env unchanged (legged_gym clips them by
    ``cfg.normalization.clip_actions`` itself).

    Args:
        env: the legged_gym environment (e.g. from ``task_registry.make_env(...)``).
        reset: call ``env.reset()`` once now, as rsl_rl 1.0.2's runner did, so the first observations are valid.
        policy_group / critic_group: names of the two observation groups.
        step_dt: seconds per env step; default: the env's own ``dt`` (``decimation * sim.dt`` in legged_gym).
    """

    def __init__(self, env: Any, reset: bool = True, policy_group: str = "policy",
                 critic_group: str = "critic", step_dt: float | None = None) -> None:
        missing = [name for name in ("num_envs", "num_actions", "max_episode_length", "episode_length_buf",
                                     "get_observations", "get_privileged_observations", "step", "reset")
                   if not hasattr(env, name)]
        if missing:
            raise ConfigError(f"LeggedGymVecEnv wraps a legged_gym-style env (BaseTask API); {type(env).__name__} "
                            f"lacks {', '.join(missing)}.")
        self.env = env
        self.num_envs = int(env.num_envs)
        self.num_actions = int(env.num_actions)
        self.device = torch.device(getattr(env, "device", "cpu"))
        self.cfg = getattr(env, "cfg", {})
        dt = step_dt if step_dt is not None else getattr(env, "dt", None)
        self.step_dt: float | None = None if dt is None else float(dt)
        self.policy_group, self.critic_group = policy_group, critic_group
        if reset:
            env.reset()
        self._obs = self._group(env.get_observations(), env.get_privileged_observations())

    @property
    def max_episode_length(self) -> int:
        """The env's episode length limit in control steps (legged_gym stores a float)."""
        return int(self.env.max_episode_length)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    @property
    def unwrapped(self) -> Any:
        """The wrapped legged_gym env."""
        return self.env

    def _group(self, obs: torch.Tensor, privileged: torch.Tensor | None) -> TensorDict:
        groups = {self.policy_group: obs.detach().clone().float()}
        if privileged is not None:
            groups[self.critic_group] = privileged.detach().clone().float()
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        """Current observations: ``policy`` (and ``critic`` when the env has privileged observations)."""
        return self._obs

    def reset(self) -> TensorDict:
        """Reset every env (``env.reset()``) and return the first observations."""
        obs, privileged = self.env.reset()
        self._obs = self._group(obs, privileged)
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step the env; return ``(obs, rewards [N] float32, dones [N] bool, extras)``."""
        obs, privileged, rewards, dones, infos = self.env.step(actions.to(self.device))
        self._obs = self._group(obs, privileged)
        dones = dones.detach().to(self.device).bool().reshape(self.num_envs).clone()
        extras: dict = {}
        time_outs = infos.get("time_outs")
        if time_outs is not None:
            extras["time_outs"] = time_outs.detach().to(self.device).bool().reshape(self.num_envs) & dones
        episode = infos.get("episode")
        if episode:
            any_done = dones.any()
            nan = torch.tensor(float("nan"), device=self.device)
            extras["log"] = {
                (key if key.startswith("/") else "/" + key):
                    torch.where(any_done, torch.as_tensor(value, device=self.device).float().mean(), nan)
                for key, value in episode.items()
            }
        rewards = rewards.detach().to(self.device).float().reshape(self.num_envs).clone()
        return self._obs, rewards, dones, extras

    def close(self) -> None:
        """Nothing to release here; Isaac Gym frees its simulation when the process ends."""
