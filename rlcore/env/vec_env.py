"""The vectorised-environment contract every rlcore algorithm and runner talks to.

It is the rsl_rl 5.x contract, so environments written for rsl_rl (Isaac Lab, mjlab, MuJoCo Playground
wrappers) plug in unchanged, plus one optional rlcore addition: ``extras["final_observations"]``, and one
attribute that rsl_rl reads from ``env.unwrapped``: ``step_dt``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from tensordict import TensorDict


class VecEnv(ABC):
    """A batch of ``num_envs`` synchronised environments that reset themselves when an episode ends.

    Attributes:
        num_envs: number of environments N.
        num_actions: action dimension A.
        max_episode_length: episode length limit in control steps (int, or a tensor ``[N]``).
        episode_length_buf: current episode length of every env, ``[N]`` long tensor. Runners may
            randomise it once at start so that time-outs do not all happen on the same step.
        device: device of every tensor the env returns.
        cfg: the env's configuration (dict or object); runners store it with checkpoints.
        step_dt: seconds of simulated time per ``step`` (the control period). The RND extension scales its
            bonus by it and refuses to start without it (Isaac Lab keeps it on ``env.unwrapped.step_dt``,
            which is read too).

    Observations are a ``TensorDict`` of batch size ``[N]`` whose entries are observation *groups*:
    1D groups ``[N, D]`` and 2D groups ``[N, C, H, W]``.

    ``step`` returns ``(obs, rewards [N], dones [N], extras)``. ``dones`` is true where an episode ended
    at this step for any reason (the env has already reset those envs, so ``obs`` is the first
    observation of the next episode). ``extras`` keys understood by rlcore:

    - ``"time_outs"``: bool ``[N]``, the episode ended by its time limit, not in a terminal state.
    - ``"final_observations"``: ``TensorDict[N]``, the observation of the state each env reached
      *before* its reset (only rows where ``dones`` is true are read). With it, time-outs bootstrap
      from V(final observation) exactly instead of the rsl_rl approximation V(reset observation).
    - ``"log"``: dict of scalars / tensors to log; keys start with ``"/"``.
    - ``"episode"``: legacy name of ``"log"`` (also accepted).

    Optional method ``deployment_interface() -> dict``: how to run a policy of this task outside rlcore, as
    JSON-able data (e.g. joint names and order, default joint positions, PD gains, action scale and clip,
    physics step and decimation, observation layout per group, command ranges; see ``Go2Env``). ONNX export
    stores each entry in the file's ``metadata_props`` as ``rlcore.<key>`` (``rlcore.deployment``); a task
    without it still exports, with rlcore's own keys only.
    """

    num_envs: int
    num_actions: int
    max_episode_length: int | torch.Tensor
    episode_length_buf: torch.Tensor
    device: torch.device | str
    cfg: dict | object
    step_dt: float

    @abstractmethod
    def get_observations(self) -> TensorDict:
        """Return the current observations, ``TensorDict[N]`` of groups."""

    @abstractmethod
    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply ``actions [N, A]``; return ``(obs, rewards [N], dones [N], extras)``."""
