"""Gymnasium vector environments as rlcore ``VecEnv``s.

:class:`GymnasiumVecEnv` turns a ``gymnasium.vector.VectorEnv`` (sync or async; numpy in, numpy out) into the
rlcore contract: torch tensors on the chosen device, observations as a ``TensorDict`` of groups, episodes that
end on ``terminated or truncated`` with the reset done in the same step, ``time_outs`` from truncation,
``final_observations`` from Gymnasium's autoreset information, and episode statistics in ``extras["log"]``.

Gymnasium >= 1.1 is needed (``pip install "rlcore[gym]"``): it has the autoreset modes and the partial resets
(``reset(options={"reset_mask": ...})``) this adapter relies on. Gymnasium is imported lazily, so rlcore works
without it.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from rlcore.env.vec_env import VecEnv
from rlcore.errors import ConfigError

#: ``max_episode_length`` of an env without a time limit (no ``max_episode_steps`` in its spec).
NO_TIME_LIMIT = 2**31 - 1

SUPPORTED_ACTION_SPACES = ("Box action spaces with finite low/high (the policy's [-1, 1] is rescaled to "
                           "[low, high]); an unbounded Box only with rescale_actions=False")
SUPPORTED_OBSERVATION_SPACES = "Box observation spaces and Dict observation spaces of Box entries (one group each)"


def import_gymnasium():
    """The ``gymnasium`` module, or a clear ImportError when it is missing or older than 1.1."""
    try:
        import gymnasium
    except ImportError as err:
        raise ImportError("GymnasiumVecEnv needs gymnasium>=1.1: pip install 'rlcore[gym]' "
                          "(or pip install 'gymnasium[mujoco]>=1.1' for the MuJoCo envs).") from err
    major_minor = tuple(int(p) for p in re.findall(r"\d+", gymnasium.__version__)[:2])
    if major_minor < (1, 1):
        raise ImportError(f"GymnasiumVecEnv needs gymnasium>=1.1 (vector autoreset modes and partial resets); "
                          f"found gymnasium {gymnasium.__version__}: pip install -U 'gymnasium>=1.1'.")
    return gymnasium


class GymnasiumVecEnv(VecEnv):
    """A Gymnasium vector environment behind the rlcore ``VecEnv`` contract.

    Build it from an id with :meth:`make` (sync or async vectorisation, same-step autoreset), or wrap a vector
    env you built yourself (``gym.make_vec``, ``SyncVectorEnv``, ``AsyncVectorEnv``, vector wrappers), or a
    single ``gymnasium.Env`` (vectorised as one env).

    Observations: a ``Box`` space becomes the group ``obs_group`` (default ``"policy"``); a ``Dict`` space
    becomes one group per key. 1-D boxes stay ``[N, D]``, 3-D boxes are images ``[N, C, H, W]`` (Gymnasium's
    ``H x W x C`` pixels are transposed unless ``channels_last=False``), any other shape is flattened to
    ``[N, D]``. Everything is float32; normalisation is the models' job (``obs_normalization``).

    Actions: ``[N, A]`` from the policy, clipped to ``[-1, 1]`` and mapped linearly onto the action space's
    ``[low, high]`` (``rescale_actions=True``, the default); with ``rescale_actions=False`` they are passed
    unchanged (clipped to the bounds where those are finite). Only ``Box`` action spaces are accepted.

    Episodes: ``dones = terminated | truncated`` and ``extras["time_outs"] = truncated & ~terminated``; the
    observation returned for a finished env is the first one of its next episode and
    ``extras["final_observations"]`` holds the observation it reached before the reset, so PPO bootstraps a
    truncated episode from the value of its true last state. Vector envs in Gymnasium's same-step autoreset
    mode give that observation in ``infos["final_obs"]``; envs in next-step (Gymnasium's default) or disabled
    mode are reset by the adapter itself right after the step that ended (``reset(options={"reset_mask": ...})``),
    so the step after a done never wastes an action.

    ``episode_length_buf`` counts the steps of each env's episode and the adapter also ends an episode by
    time-out when it reaches ``max_episode_length`` (the env's ``max_episode_steps`` unless given): so the
    runner's ``init_at_random_ep_len`` spreads the first time-outs over the first episode, as with the
    built-in tasks. Without a time limit ``max_episode_length`` is :data:`NO_TIME_LIMIT`.

    ``extras["log"]`` has ``/episode_return`` and ``/episode_length``: the means over the episodes that
    finished at this step (NaN when none did; the runner's logger skips NaN).

    Args:
        env: a ``gymnasium.vector.VectorEnv`` (or vector wrapper), or a single ``gymnasium.Env``.
        device: device of every tensor the adapter returns.
        seed: seeds the first reset (env ``i`` gets ``seed + i``) and the action space; ``None``: unseeded.
        obs_group: group name of a ``Box`` observation.
        rescale_actions: map the policy's ``[-1, 1]`` onto ``[low, high]``.
        max_episode_length: the adapter's own time limit (default: the env's ``max_episode_steps``).
        channels_last: 3-D observation boxes are ``H x W x C`` (transposed to ``C x H x W``).
        step_dt: seconds per env step; default: ``dt`` of the unwrapped sub-env (MuJoCo envs, Pendulum), else
            ``1 / metadata["render_fps"]``, else ``None`` (then RND refuses to start and asks for it).
    """

    def __init__(
        self,
        env: Any,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        obs_group: str = "policy",
        rescale_actions: bool = True,
        max_episode_length: int | None = None,
        channels_last: bool = True,
        step_dt: float | None = None,
    ) -> None:
        gym = import_gymnasium()
        from gymnasium.vector import AutoresetMode, SyncVectorEnv
        from gymnasium.vector import VectorEnv as GymVectorEnv

        if isinstance(env, gym.Env):
            single = env
            env = SyncVectorEnv([lambda: single], autoreset_mode=AutoresetMode.SAME_STEP)
        elif not isinstance(env, GymVectorEnv):
            raise ConfigError(f"GymnasiumVecEnv wraps a gymnasium.vector.VectorEnv (gym.make_vec(...)) or a "
                            f"gymnasium.Env; got {type(env).__name__}.")
        self.env = env
        self.num_envs = int(env.num_envs)
        self.device = torch.device(device)
        self.rescale_actions = bool(rescale_actions)
        self.channels_last = bool(channels_last)

        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode) if not isinstance(mode, AutoresetMode) else mode
        self._same_step = self.autoreset_mode == AutoresetMode.SAME_STEP

        self._obs_plan = self._plan_observations(env.single_observation_space, obs_group)
        self._setup_actions(env.single_action_space)
        self.max_episode_length = int(max_episode_length) if max_episode_length is not None else _max_steps(env)
        self.step_dt: float | None = float(step_dt) if step_dt is not None else _step_dt(env)
        spec = getattr(env, "spec", None)
        self.cfg: dict = {
            "env_id": getattr(spec, "id", None),
            "num_envs": self.num_envs,
            "device": str(self.device),
            "seed": seed,
            "autoreset_mode": self.autoreset_mode.value,
            "max_episode_length": self.max_episode_length,
            "rescale_actions": self.rescale_actions,
            "step_dt": self.step_dt,
        }

        n = self.num_envs
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self._ep_return = np.zeros(n, dtype=np.float64)
        self._ep_steps = np.zeros(n, dtype=np.int64)
        if seed is not None:
            env.action_space.seed(int(seed))
        obs_np, _ = env.reset(seed=None if seed is None else int(seed))
        self._obs = self._to_tensordict(obs_np)

    @classmethod
    def make(
        cls,
        env_id: str,
        num_envs: int = 16,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        vectorization_mode: str = "sync",
        max_episode_steps: int | None = None,
        env_kwargs: dict | None = None,
        wrappers: list | None = None,
        **adapter_kwargs: Any,
    ) -> GymnasiumVecEnv:
        """``num_envs`` copies of the registered Gymnasium env ``env_id``, vectorised in same-step autoreset mode.

        Args:
            env_id: a registered id (``gymnasium.pprint_registry()``), e.g. ``"Pendulum-v1"``, ``"HalfCheetah-v5"``;
                ``"module:Env-v0"`` imports ``module`` first.
            vectorization_mode: ``"sync"`` (one process) or ``"async"`` (one worker process per env).
            max_episode_steps: override the id's time limit.
            env_kwargs: keyword arguments of the env's constructor.
            wrappers: Gymnasium wrappers applied to every sub-env.
            adapter_kwargs: the other arguments of :class:`GymnasiumVecEnv`.
        """
        gym = import_gymnasium()
        from gymnasium.vector import AutoresetMode

        if vectorization_mode not in ("sync", "async"):
            raise ConfigError(f"vectorization_mode must be 'sync' or 'async', got {vectorization_mode!r}.")
        if int(num_envs) < 1:
            raise ConfigError(f"num_envs must be at least 1, got {num_envs}.")
        kwargs = dict(env_kwargs or {})
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = int(max_episode_steps)
        try:
            vec = gym.make_vec(str(env_id), num_envs=int(num_envs), vectorization_mode=vectorization_mode,
                               vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, wrappers=wrappers,
                               **kwargs)
        except gym.error.Error as err:  # unknown id, missing dependency (e.g. mujoco), bad version
            raise ConfigError(f"cannot make Gymnasium env {env_id!r}: {err}") from None
        adapter = cls(vec, device=device, seed=seed, **adapter_kwargs)
        adapter.cfg.update({"env_id": str(env_id), "vectorization_mode": vectorization_mode,
                            "max_episode_steps": max_episode_steps, "env_kwargs": dict(env_kwargs or {})})
        return adapter

    # ------------------------------------------------------------------ spaces
    def _plan_observations(self, space, obs_group: str) -> list[tuple[str, str | None, str]]:
        """``(group, dict key or None, layout)`` for every group; layout is ``vector``, ``image`` or ``flat``."""
        from gymnasium import spaces

        def layout(box) -> str:
            if len(box.shape) == 1:
                return "vector"
            if len(box.shape) == 3:
                return "hwc" if self.channels_last else "image"
            return "flat"

        if isinstance(space, spaces.Box):
            return [(obs_group, None, layout(space))]
        if isinstance(space, spaces.Dict):
            bad = [k for k, s in space.spaces.items() if not isinstance(s, spaces.Box)]
            if bad:
                raise ConfigError(f"GymnasiumVecEnv cannot take the observation space {space}: entries {bad} are not "
                                 f"Box; supported are {SUPPORTED_OBSERVATION_SPACES}.")
            return [(str(k), k, layout(s)) for k, s in space.spaces.items()]
        raise ConfigError(f"GymnasiumVecEnv cannot take the observation space {space}; supported are "
                         f"{SUPPORTED_OBSERVATION_SPACES} (flatten others with a Gymnasium wrapper).")

    def _setup_actions(self, space) -> None:
        from gymnasium import spaces

        if not isinstance(space, spaces.Box):
            raise ConfigError(f"GymnasiumVecEnv cannot take the action space {space}; supported are "
                             f"{SUPPORTED_ACTION_SPACES}. Discrete, MultiDiscrete, MultiBinary, Dict and Tuple "
                             f"action spaces are not supported.")
        low, high = space.low.astype(np.float64).reshape(-1), space.high.astype(np.float64).reshape(-1)
        bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
        if self.rescale_actions and not bounded:
            raise ConfigError(f"GymnasiumVecEnv cannot take the action space {space}: it is unbounded, so the "
                             f"policy's [-1, 1] cannot be rescaled onto it; supported are {SUPPORTED_ACTION_SPACES}.")
        self.num_actions = int(np.prod(space.shape))
        self._action_shape = tuple(space.shape)
        self._action_dtype = space.dtype
        self._action_low, self._action_high = low, high
        self._action_bounded = bounded

    def _actions_to_numpy(self, actions: torch.Tensor) -> np.ndarray:
        a = actions.detach().reshape(self.num_envs, self.num_actions).to("cpu", torch.float64).numpy()
        if self.rescale_actions:
            a = self._action_low + (np.clip(a, -1.0, 1.0) + 1.0) * 0.5 * (self._action_high - self._action_low)
        a = np.clip(a, self._action_low, self._action_high)  # also exact at the bounds after rescaling
        return a.reshape(self.num_envs, *self._action_shape).astype(self._action_dtype, copy=False)

    def _to_tensordict(self, obs_np) -> TensorDict:
        groups = {}
        for group, key, layout in self._obs_plan:
            # A copy: vector envs made with copy=False overwrite their observation arrays on the next step.
            x = torch.from_numpy(np.array(obs_np if key is None else obs_np[key], dtype=np.float32))
            if layout == "hwc":
                x = x.permute(0, 3, 1, 2)
            elif layout == "flat":
                x = x.reshape(self.num_envs, -1)
            groups[group] = x.contiguous().to(self.device)
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    # ------------------------------------------------------------------ VecEnv API
    def get_observations(self) -> TensorDict:
        """Current observations, ``TensorDict[N]`` of groups."""
        return self._obs

    def reset(self, seed: int | None = None) -> TensorDict:
        """Reset every env (seeded with ``seed + i`` when given) and return the first observations."""
        obs_np, _ = self.env.reset(seed=seed)
        self.episode_length_buf.zero_()
        self._ep_return[:] = 0.0
        self._ep_steps[:] = 0
        self._obs = self._to_tensordict(obs_np)
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply ``actions [N, A]``; return ``(obs, rewards [N] float32, dones [N] bool, extras)``."""
        obs_np, rewards_np, terminated, truncated, infos = self.env.step(self._actions_to_numpy(actions))
        rewards_np = np.asarray(rewards_np, dtype=np.float64).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(truncated, dtype=bool).reshape(self.num_envs)

        # The runner may replace episode_length_buf (random initial lengths): read it every step.
        lengths = self.episode_length_buf.cpu().numpy().astype(np.int64) + 1
        ended = terminated | truncated
        cut = (lengths >= self.max_episode_length) & ~ended  # the adapter's own time limit
        dones = ended | cut
        time_outs = (truncated | cut) & ~terminated

        self._ep_return += rewards_np
        self._ep_steps += 1
        log = {"/episode_return": math.nan, "/episode_length": math.nan}
        final_obs = None
        if dones.any():
            log["/episode_return"] = float(self._ep_return[dones].mean())
            log["/episode_length"] = float(self._ep_steps[dones].mean())
            self._ep_return[dones] = 0.0
            self._ep_steps[dones] = 0
            lengths[dones] = 0
            final_np = copy.deepcopy(obs_np)  # rows of envs not yet reset hold their final observation
            if self._same_step and ended.any():
                if "final_obs" not in infos:
                    raise RuntimeError("The vector env declares same-step autoreset but its infos lack 'final_obs'.")
                for i in np.flatnonzero(ended):
                    self._set_row(final_np, i, infos["final_obs"][i])
            to_reset = cut if self._same_step else dones
            if to_reset.any():
                obs_np = self._partial_reset(to_reset)
            final_obs = self._to_tensordict(final_np)
        self.episode_length_buf.copy_(torch.as_tensor(lengths))

        self._obs = self._to_tensordict(obs_np)
        extras = {
            "time_outs": torch.as_tensor(time_outs, device=self.device),
            "final_observations": self._obs if final_obs is None else final_obs,
            "log": log,
        }
        rewards = torch.as_tensor(rewards_np, dtype=torch.float32).to(self.device)
        return self._obs, rewards, torch.as_tensor(dones, device=self.device), extras

    def _set_row(self, batch, i: int, row) -> None:
        if isinstance(batch, dict):
            for key in batch:
                batch[key][i] = row[key]
        else:
            batch[i] = row

    def _partial_reset(self, mask: np.ndarray):
        """Reset the envs of ``mask`` only; the observations of all envs after it."""
        try:
            obs_np, _ = self.env.reset(options={"reset_mask": np.asarray(mask, dtype=np.bool_)})
        except Exception as err:
            raise RuntimeError(
                f"GymnasiumVecEnv needs to reset some sub-envs of {type(self.env).__name__} "
                f"(autoreset mode {self.autoreset_mode.value}) with reset(options={{'reset_mask': ...}}), which failed "
                f"({type(err).__name__}: {err}). Create the vector env in same-step autoreset mode instead: "
                "gym.make_vec(id, num_envs, "
                "vector_kwargs={'autoreset_mode': gymnasium.vector.AutoresetMode.SAME_STEP}) "
                "or GymnasiumVecEnv.make(id, num_envs)."
            ) from err
        return obs_np

    def close(self) -> None:
        """Close the vector env (and its worker processes)."""
        self.env.close()


def _step_dt(env) -> float | None:
    """Seconds per step of the sub-envs: ``dt`` of the unwrapped sub-env, else ``1 / metadata["render_fps"]``,
    else None.

    The sub-env is asked first whether it has ``dt`` (``has_wrapper_attr``): asking an ``AsyncVectorEnv`` for a
    missing attribute directly would shut its workers down.
    """
    dt = None
    try:
        if env.call("has_wrapper_attr", "dt")[0]:
            dt = env.get_attr("dt")[0]
    except Exception:
        dt = None
    if isinstance(dt, (int, float)) and dt > 0:
        return float(dt)
    fps = (getattr(env, "metadata", None) or {}).get("render_fps")
    return 1.0 / float(fps) if fps else None


def _max_steps(env) -> int:
    """The time limit of the sub-envs (``max_episode_steps`` of their spec), or :data:`NO_TIME_LIMIT`."""
    candidates = []
    try:
        specs = env.get_attr("spec")
        candidates.append(getattr(specs[0], "max_episode_steps", None))
    except Exception:
        pass
    spec = getattr(env, "spec", None)
    if spec is not None:
        candidates.append((spec.kwargs or {}).get("max_episode_steps"))
        candidates.append(spec.max_episode_steps)
    for value in candidates:
        if value is not None:
            return int(value)
    return NO_TIME_LIMIT
