"""A tiny pure-torch environment that follows the legged_gym API exactly, for testing ``LeggedGymVecEnv``.

API version: legged_gym 1.0 (``legged_gym/envs/base/base_task.py`` + ``legged_robot.py``), which unitree_rl_gym
keeps and rsl_rl 1.0.2's ``OnPolicyRunner`` drives. The names, dtypes and call order below are legged_gym's:

- buffers created in ``__init__`` like ``BaseTask.__init__``: ``obs_buf``, ``privileged_obs_buf`` (``None`` when
  ``num_privileged_obs`` is ``None``), ``rew_buf``, ``reset_buf`` (long, starts at ones), ``episode_length_buf``,
  ``time_out_buf``, ``extras = {}``;
- ``reset()`` = ``reset_idx(all envs)`` then one ``step`` of zero actions, returning ``(obs, privileged_obs)``;
- ``step(actions)``: clip the actions by ``cfg.normalization.clip_actions``, simulate ``decimation`` substeps,
  ``post_physics_step()``, clip the observations, return
  ``(obs_buf, privileged_obs_buf, rew_buf, reset_buf, extras)`` — the buffers themselves, not copies;
- ``post_physics_step()``: ``episode_length_buf += 1``, ``check_termination()`` (``time_out_buf =
  episode_length_buf > max_episode_length``; ``reset_buf = terminal | time_out_buf``), ``compute_reward()``
  (``rew_buf[:] = 0`` then in-place sums, per-term ``episode_sums``), ``reset_idx(reset envs)``,
  ``compute_observations()``;
- ``reset_idx(env_ids)``: returns at once for no ids (so ``extras`` keep the previous values); otherwise resets
  the state, ``episode_length_buf[ids] = 0``, ``reset_buf[ids] = 1``, writes ``extras["episode"]`` (mean
  episode sum of every reward term over the reset envs divided by ``max_episode_length_s``) and, with
  ``cfg.env.send_timeouts``, ``extras["time_outs"] = time_out_buf``.

The task itself is a point mass on a line that must reach a target (not legged_gym's): state (position,
velocity, target); action = force; it terminates when it leaves ``[-limit, limit]``.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch


def make_cfg(num_envs: int = 8, num_privileged_obs: int | None = 4, send_timeouts: bool = True,
             episode_length_s: float = 1.0) -> SimpleNamespace:
    """A legged_gym-shaped config object (``cfg.env``, ``cfg.normalization``, ``cfg.control``, ``cfg.sim``)."""
    return SimpleNamespace(
        env=SimpleNamespace(num_envs=num_envs, num_observations=3, num_privileged_obs=num_privileged_obs,
                            num_actions=1, send_timeouts=send_timeouts, episode_length_s=episode_length_s),
        normalization=SimpleNamespace(clip_actions=100.0, clip_observations=100.0),
        control=SimpleNamespace(decimation=2),
        sim=SimpleNamespace(dt=0.05),
        rewards=SimpleNamespace(scales={"tracking": 1.0, "effort": -0.01}),
        limit=2.0,
    )


class LeggedGymStyleEnv:
    """Point mass to target with legged_gym's attribute and method names (see the module docstring)."""

    def __init__(self, cfg: SimpleNamespace | None = None, device: str = "cpu", seed: int = 0) -> None:
        self.cfg = cfg or make_cfg()
        self.device = device
        self.num_envs = self.cfg.env.num_envs
        self.num_obs = self.cfg.env.num_observations
        self.num_privileged_obs = self.cfg.env.num_privileged_obs
        self.num_actions = self.cfg.env.num_actions
        self.dt = self.cfg.control.decimation * self.cfg.sim.dt
        self.max_episode_length_s = self.cfg.env.episode_length_s
        self.max_episode_length = float(torch.ceil(torch.tensor(self.max_episode_length_s / self.dt)))  # a float
        self.generator = torch.Generator(device=device).manual_seed(seed)

        n = self.num_envs
        self.obs_buf = torch.zeros(n, self.num_obs, device=device, dtype=torch.float)
        self.rew_buf = torch.zeros(n, device=device, dtype=torch.float)
        self.reset_buf = torch.ones(n, device=device, dtype=torch.long)
        self.episode_length_buf = torch.zeros(n, device=device, dtype=torch.long)
        self.time_out_buf = torch.zeros(n, device=device, dtype=torch.bool)
        if self.num_privileged_obs is not None:
            self.privileged_obs_buf = torch.zeros(n, self.num_privileged_obs, device=device, dtype=torch.float)
        else:
            self.privileged_obs_buf = None
        self.extras: dict = {}

        self.pos = torch.zeros(n, device=device)
        self.vel = torch.zeros(n, device=device)
        self.target = torch.zeros(n, device=device)
        self.actions = torch.zeros(n, self.num_actions, device=device)
        self.episode_sums = {name: torch.zeros(n, device=device) for name in self.cfg.rewards.scales}
        self.num_steps = 0  # physics steps taken, for tests

    # ---------------------------------------------------------------- legged_gym BaseTask API
    def get_observations(self) -> torch.Tensor:
        return self.obs_buf

    def get_privileged_observations(self) -> torch.Tensor | None:
        return self.privileged_obs_buf

    def reset(self):
        self.reset_idx(torch.arange(self.num_envs, device=self.device))
        obs, privileged_obs, _, _, _ = self.step(torch.zeros(self.num_envs, self.num_actions, device=self.device))
        return obs, privileged_obs

    def step(self, actions: torch.Tensor):
        clip_actions = self.cfg.normalization.clip_actions
        self.actions = torch.clip(actions, -clip_actions, clip_actions).to(self.device)
        for _ in range(self.cfg.control.decimation):
            self.vel = self.vel + self.actions[:, 0] * self.cfg.sim.dt
            self.pos = self.pos + self.vel * self.cfg.sim.dt
            self.num_steps += 1
        self.post_physics_step()
        clip_obs = self.cfg.normalization.clip_observations
        self.obs_buf = torch.clip(self.obs_buf, -clip_obs, clip_obs)
        if self.privileged_obs_buf is not None:
            self.privileged_obs_buf = torch.clip(self.privileged_obs_buf, -clip_obs, clip_obs)
        return self.obs_buf, self.privileged_obs_buf, self.rew_buf, self.reset_buf, self.extras

    # ---------------------------------------------------------------- legged_gym LeggedRobot internals
    def post_physics_step(self) -> None:
        self.episode_length_buf += 1
        self.check_termination()
        self.compute_reward()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()
        self.reset_idx(env_ids)
        self.compute_observations()

    def check_termination(self) -> None:
        self.reset_buf = self.pos.abs() > self.cfg.limit
        self.time_out_buf = self.episode_length_buf > self.max_episode_length
        self.reset_buf |= self.time_out_buf

    def compute_reward(self) -> None:
        self.rew_buf[:] = 0.0
        terms = {"tracking": -(self.pos - self.target).abs(), "effort": self.actions[:, 0].square()}
        for name, scale in self.cfg.rewards.scales.items():
            rew = terms[name] * scale * self.dt
            self.rew_buf += rew
            self.episode_sums[name] += rew

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) == 0:
            return
        k = len(env_ids)
        self.pos[env_ids] = (torch.rand(k, generator=self.generator, device=self.device) - 0.5)
        self.vel[env_ids] = 0.0
        self.target[env_ids] = (torch.rand(k, generator=self.generator, device=self.device) - 0.5)
        self.episode_length_buf[env_ids] = 0
        self.reset_buf[env_ids] = 1
        self.extras["episode"] = {}
        for key in self.episode_sums:
            mean_sum = torch.mean(self.episode_sums[key][env_ids])
            self.extras["episode"]["rew_" + key] = mean_sum / self.max_episode_length_s
            self.episode_sums[key][env_ids] = 0.0
        if self.cfg.env.send_timeouts:
            self.extras["time_outs"] = self.time_out_buf

    def compute_observations(self) -> None:
        self.obs_buf = torch.stack((self.pos - self.target, self.vel, self.actions[:, 0]), dim=-1)
        if self.privileged_obs_buf is not None:
            self.privileged_obs_buf = torch.cat((self.obs_buf, self.target.unsqueeze(-1)), dim=-1)
