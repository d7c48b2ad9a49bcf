"""Random Network Distillation: a curiosity bonus from how badly a trained net imitates a frozen random one.

Burda et al. (2018), "Exploration by Random Network Distillation"; Schwarke et al. (2023), "Curiosity-Driven
Learning of Joint Locomotion and Manipulation Tasks". Per environment step::

    x   = normalize(concat(obs[g] for g in obs_groups))          # [N, D]   (state normaliser optional)
    e   = || target(x) - predictor(x) ||_2                        # [N]      target: fixed random MLP
    e   = e / std(discounted sum of e)                             #          (reward normalisation optional)
    r_i = weight(step) * step_dt * e                               # added to the extrinsic reward by PPO

and per PPO mini-batch the predictor takes one Adam step on ``MSE(predictor(x), target(x))``, so states
that were visited often become "boring" (small error) while novel states keep a large bonus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from tensordict import TensorDict

from rlcore.distributed import all_reduce_mean_grads
from rlcore.errors import ConfigError
from rlcore.extensions.base import Algorithm, Batch, Extension
from rlcore.modules import MLP, EmpiricalDiscountedVariationNormalization, EmpiricalNormalization
from rlcore.modules.activation import activation_gain

WEIGHT_SCHEDULE_MODES = ("constant", "linear", "step")
"""Valid ``weight_schedule["mode"]`` values."""

_SCHEDULE_KEYS = {"constant": (), "step": ("final_step", "final_value"),
                  "linear": ("initial_step", "final_step", "final_value")}

NORMALIZER_UNTIL = int(1e8)
"""The state and reward normalisers freeze after this many samples (as in rsl_rl), so the RND input and the
bonus scale become stationary late in training."""


class RandomNetworkDistillation(nn.Module, Extension):
    """RND intrinsic reward with its own predictor optimiser; a PPO :class:`Extension` named ``"rnd"``.

    In PPO: the bonus joins each step's reward (:meth:`intrinsic_reward`), the predictor takes one Adam step
    after each of PPO's mini-batch steps (:meth:`after_step`, logged as ``"rnd"``), the state normaliser merges
    the rollout after the update, and checkpoints hold ``rnd_state_dict`` and ``rnd_optimizer_state_dict``.

    Args:
        num_states: size D of the concatenated RND state (the factory computes it from ``obs_groups``).
        obs_groups: 1D observation groups forming the RND state, in order (``cfg["obs_groups"]["rnd_state"]``);
            a dict with an ``"rnd_state"`` key (rsl_rl style) is accepted too.
        num_outputs: embedding size of target and predictor.
        predictor_hidden_dims, target_hidden_dims: hidden sizes (-1 = D).
        activation: activation of both MLPs.
        state_normalization: normalise the RND state with running statistics (updated by
            :meth:`update_normalization`, i.e. once per PPO update over the rollout).
        reward_normalization: divide the error by the running std of its discounted sum
            (:class:`EmpiricalDiscountedVariationNormalization`, gamma 0.99, statistics updated at every
            :meth:`get_intrinsic_reward` call while in train mode) before weighting.
        weight: intrinsic-reward weight (the schedule's initial value). It is per second of simulated time:
            the bonus is ``weight * step_dt * error``.
        weight_schedule: ``None`` / ``{"mode": "constant"}``; ``{"mode": "step", "final_step", "final_value"}``
            (``weight`` before ``final_step``, ``final_value`` from it on); ``{"mode": "linear", "initial_step",
            "final_step", "final_value"}`` (``weight`` up to ``initial_step``, linear to ``final_value`` at
            ``final_step``, constant after). Steps count :meth:`get_intrinsic_reward` calls (env steps).
            ``final_value`` is scaled by ``step_dt`` like ``weight``.
        learning_rate: Adam learning rate of the predictor.
        device: torch device.
        step_dt: control period of the environment [s] (required; :func:`resolve_rnd_config` takes it from
            ``env.step_dt``). Last, after rsl_rl's parameters, so rsl_rl's positional order holds.
    """

    name = "rnd"
    loss_names = ("rnd",)

    def __init__(
        self,
        num_states: int,
        obs_groups: Sequence[str] | Mapping[str, Sequence[str]],
        num_outputs: int = 64,
        predictor_hidden_dims: Sequence[int] = (256, 256),
        target_hidden_dims: Sequence[int] = (256, 256),
        activation: str = "elu",
        state_normalization: bool = False,
        reward_normalization: bool = False,
        weight: float = 0.5,
        weight_schedule: Mapping[str, Any] | None = None,
        learning_rate: float = 1e-3,
        device: str | torch.device = "cpu",
        step_dt: float | None = None,
    ) -> None:
        super().__init__()
        if isinstance(obs_groups, Mapping):
            obs_groups = obs_groups["rnd_state"]
        self.obs_groups = [obs_groups] if isinstance(obs_groups, str) else list(obs_groups)
        if not self.obs_groups:
            raise ConfigError("RND needs at least one observation group (obs_groups['rnd_state'] is empty).")
        self.num_states = int(num_states)
        self.num_outputs = int(num_outputs)
        self.initial_weight = float(weight)
        if step_dt is None or not float(step_dt) > 0.0:
            raise ConfigError(f"RND needs the env's control step (got step_dt={step_dt!r}): set env.step_dt (seconds "
                             "per env step) or rnd_cfg.step_dt.")
        self.step_dt = float(step_dt)
        self.learning_rate = float(learning_rate)
        self.device = device
        self.state_normalization = bool(state_normalization)
        self.reward_normalization = bool(reward_normalization)
        self.weight_schedule = self._check_schedule(weight_schedule)
        self.update_counter = 0  # get_intrinsic_reward calls so far; mirrored in the step_count buffer
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))  # saved, so a resume keeps the schedule

        self.state_normalizer: nn.Module = (
            EmpiricalNormalization(self.num_states, until=NORMALIZER_UNTIL) if self.state_normalization
            else nn.Identity()
        )
        self.reward_normalizer: nn.Module = (
            EmpiricalDiscountedVariationNormalization((), until=NORMALIZER_UNTIL) if self.reward_normalization
            else nn.Identity()
        )
        # Gain 1 on the output layer (not the MLP default 0.01): a near-zero random target would give a
        # near-zero, uninformative error from the start.
        self.predictor = MLP(self.num_states, self.num_outputs, predictor_hidden_dims, activation,
                             init_gains=self._gains(predictor_hidden_dims, activation))
        self.target = MLP(self.num_states, self.num_outputs, target_hidden_dims, activation,
                          init_gains=self._gains(target_hidden_dims, activation))
        self.target.requires_grad_(False)
        self.to(device)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=self.learning_rate)

    @staticmethod
    def _gains(hidden_dims: Sequence[int], activation: str) -> list[float]:
        return [activation_gain(activation)] * len(hidden_dims) + [1.0]

    @staticmethod
    def _check_schedule(schedule: Mapping[str, Any] | None) -> dict[str, Any]:
        schedule = {"mode": "constant"} if schedule is None else dict(schedule)
        mode = schedule.get("mode", "constant")
        if mode not in WEIGHT_SCHEDULE_MODES:
            raise ConfigError(f"Unknown RND weight_schedule mode '{mode}'. Valid: {', '.join(WEIGHT_SCHEDULE_MODES)}.")
        missing = [k for k in _SCHEDULE_KEYS[mode] if k not in schedule]
        if missing:
            raise ConfigError(f"RND weight_schedule mode '{mode}' needs the key(s) {', '.join(missing)}.")
        schedule["mode"] = mode
        return schedule

    # ------------------------------------------------------------------ weight schedule
    def weight_at(self, step: int) -> float:
        """Intrinsic-reward weight (before the ``step_dt`` factor) after ``step`` reward calls."""
        s = self.weight_schedule
        if s["mode"] == "step":
            return self.initial_weight if step < int(s["final_step"]) else float(s["final_value"])
        if s["mode"] == "linear":
            start, end, final = int(s["initial_step"]), int(s["final_step"]), float(s["final_value"])
            if step <= start:
                return self.initial_weight
            if step >= end:
                return final
            return self.initial_weight + (final - self.initial_weight) * (step - start) / (end - start)
        return self.initial_weight

    @property
    def weight(self) -> float:
        """Current weight (at the current step count, before the ``step_dt`` factor)."""
        return self.weight_at(self.update_counter)

    # ------------------------------------------------------------------ reward
    def get_rnd_state(self, obs: TensorDict) -> torch.Tensor:
        """``[..., D]``: the concatenation of the RND groups (not normalised)."""
        if len(self.obs_groups) == 1:
            return obs[self.obs_groups[0]]
        return torch.cat([obs[g] for g in self.obs_groups], dim=-1)

    def prediction_error(self, obs: TensorDict) -> torch.Tensor:
        """``[...]``: ``||target(x) - predictor(x)||_2`` with ``x`` the normalised RND state (no side effects)."""
        x = self.state_normalizer(self.get_rnd_state(obs))
        return torch.linalg.vector_norm(self.target(x) - self.predictor(x), dim=-1)

    def forward(self, obs: TensorDict) -> torch.Tensor:
        """Same as :meth:`prediction_error`."""
        return self.prediction_error(obs)

    @torch.no_grad()
    def get_intrinsic_reward(self, obs: TensorDict, sync: bool = False) -> torch.Tensor:
        """Intrinsic reward ``[N]`` of one environment step; advances the weight schedule by one step.

        With ``sync`` (distributed runs) the reward normaliser pools its statistics over all ranks.
        """
        self.update_counter += 1
        self.step_count.fill_(self.update_counter)
        error = self.prediction_error(obs)
        if self.reward_normalization:
            error = self.reward_normalizer(error, sync=sync)
        return (self.weight * self.step_dt) * error

    # ------------------------------------------------------------------ learning
    def compute_loss(self, obs: TensorDict, masks: torch.Tensor | None = None) -> torch.Tensor:
        """``MSE(predictor(x), target(x))`` over a batch with any leading dims (statistics unchanged).

        ``masks`` (same leading dims as ``obs``, e.g. ``[T, K]`` of a recurrent mini-batch) marks the real
        transitions: padding rows (mask false) are left out, so the predictor never learns the zero state.
        """
        states = self.get_rnd_state(obs)
        if masks is not None:
            states = states[masks.reshape(states.shape[:-1]).bool()]  # [n_valid, D]
        with torch.no_grad():
            x = self.state_normalizer(states.reshape(-1, self.num_states))
            target = self.target(x)
        return F.mse_loss(self.predictor(x), target)

    def train_step(self, obs: TensorDict, multi_gpu: bool = False, masks: torch.Tensor | None = None) -> float:
        """One Adam step of the predictor on a mini-batch (``[B]``, or padded ``[T, K]`` with its ``masks``);
        returns the loss.

        With ``multi_gpu`` the predictor's gradients are averaged over ranks before the step.
        """
        loss = self.compute_loss(obs, masks)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if multi_gpu:
            all_reduce_mean_grads(list(self.predictor.parameters()))
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def update_normalization(self, obs: TensorDict, sync: bool = False) -> None:
        """Merge observations with any leading dims into the state normaliser (pooled over ranks if ``sync``)."""
        if self.state_normalization:
            self.state_normalizer.update(self.get_rnd_state(obs).reshape(-1, self.num_states), sync=sync)

    # ------------------------------------------------------------------ PPO extension hooks
    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any], alg: Algorithm) -> RandomNetworkDistillation:
        """RND on the algorithm's device from a resolved ``rnd_cfg`` (see :func:`resolve_rnd_config`)."""
        cls.check_algorithm(alg)
        return cls(device=alg.device, **cfg)

    def intrinsic_reward(self, obs: TensorDict, sync: bool = False) -> torch.Tensor:
        """Same as :meth:`get_intrinsic_reward`."""
        return self.get_intrinsic_reward(obs, sync=sync)

    def after_step(self, batch: Batch, sync: bool = False) -> dict[str, float]:
        """One predictor step on the mini-batch's real transitions (recurrent mini-batches are padded)."""
        return {"rnd": self.train_step(batch.observations, multi_gpu=sync, masks=batch.masks)}

    def train_mode(self) -> None:
        """``nn.Module.train()``: the reward normaliser learns from the bonuses it scales."""
        self.train()

    def eval_mode(self) -> None:
        """``nn.Module.eval()``: normaliser statistics frozen."""
        self.eval()

    def save(self) -> dict[str, Any]:
        """``rnd_state_dict`` and ``rnd_optimizer_state_dict`` (rsl_rl's checkpoint keys)."""
        return {"rnd_state_dict": self.state_dict(), "rnd_optimizer_state_dict": self.optimizer.state_dict()}

    def load(self, state: Mapping[str, Any]) -> None:
        """Restore from a checkpoint dict with ``rnd_state_dict`` (and optionally the optimiser's state)."""
        if "rnd_state_dict" in state:
            self.load_state_dict(state["rnd_state_dict"])
            if "rnd_optimizer_state_dict" in state:
                self.optimizer.load_state_dict(state["rnd_optimizer_state_dict"])

    def rank_state_dict(self) -> dict[str, Any]:
        """The reward normaliser's running discounted return of each of this rank's envs (its statistics are shared
        and saved by :meth:`save`, where the return is rank 0's)."""
        if not self.reward_normalization:
            return {}
        return {"reward_disc_return": self.reward_normalizer.disc_return.detach().clone()}

    def load_rank_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`rank_state_dict`'s output."""
        if self.reward_normalization and "reward_disc_return" in state:
            saved = torch.as_tensor(state["reward_disc_return"])
            self.reward_normalizer.disc_return = saved.to(self.reward_normalizer.emp_norm._mean.device).clone()

    # ------------------------------------------------------------------ persistence
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict`` that also accepts rsl_rl checkpoints (no step counter) and a saved
        discounted return of any size (the reward normaliser sizes it lazily to the number of envs)."""
        state_dict = dict(state_dict)
        state_dict.setdefault("step_count", self.step_count.detach().clone())
        key = "reward_normalizer.disc_return"
        if self.reward_normalization and key in state_dict:
            # A fresh (non-inference) buffer of the saved size, so the copy below neither mismatches nor
            # writes into a tensor created under torch.inference_mode during collection.
            saved = state_dict[key]
            self.reward_normalizer.disc_return = torch.zeros(saved.shape, dtype=saved.dtype,
                                                             device=self.reward_normalizer.emp_norm._mean.device)
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self.update_counter = int(self.step_count)
        return result


def env_step_dt(env: Any) -> float:
    """The env's control step ``env.step_dt`` in seconds (also looked up on ``env.unwrapped``, as wrappers of
    rsl_rl-style envs keep it there); a clear error when the env does not state it."""
    for owner in (env, getattr(env, "unwrapped", None)):
        dt = getattr(owner, "step_dt", None) if owner is not None else None
        if dt is not None:
            dt = float(dt)
            if not dt > 0.0:
                raise ConfigError(f"{type(env).__name__}.step_dt must be a positive number of seconds, got {dt}.")
            return dt
    raise ConfigError(f"RND needs the env's control step: set env.step_dt (seconds per env step) on "
                      f"{type(env).__name__} or rnd_cfg.step_dt.")


def resolve_rnd_config(alg_cfg: dict, obs: TensorDict, obs_groups: Mapping[str, Sequence[str]], env: Any) -> dict:
    """Complete ``alg_cfg["rnd_cfg"]`` with what the module needs from the env and the observations.

    Fills ``obs_groups`` (the ``"rnd_state"`` groups, in order), ``num_states`` (their summed feature size D)
    and, unless the config gives it, ``step_dt`` (:func:`env_step_dt`). The user's ``rnd_cfg`` dict is copied,
    not modified; ``alg_cfg`` gets the completed copy (``None`` when there is no RND) and is returned.

    Unlike rsl_rl's function of the same name, ``weight`` is left as configured: rlcore's module multiplies
    the bonus by ``step_dt`` itself (weights are per second of simulated time, schedules included).

    Raises:
        ConfigError: an RND group is not 1D (``[N, D]``), or the env states no positive control step.
    """
    rnd_cfg = alg_cfg.get("rnd_cfg")
    if rnd_cfg is None:
        alg_cfg["rnd_cfg"] = None
        return alg_cfg
    rnd_cfg = dict(rnd_cfg)
    groups = obs_groups["rnd_state"]
    rnd_cfg["obs_groups"] = [groups] if isinstance(groups, str) else list(groups)
    for g in rnd_cfg["obs_groups"]:
        if obs[g].dim() != 2:
            raise ConfigError(f"RND takes 1D observation groups, but '{g}' has shape {tuple(obs[g].shape)}; list "
                              "only 1D groups in obs_groups['rnd_state'] (command line: "
                              "task.obs_groups.rnd_state=[...]).")
    rnd_cfg["num_states"] = sum(int(obs[g].shape[-1]) for g in rnd_cfg["obs_groups"])
    # A wrong control period would scale the bonus by orders of magnitude: no silent default.
    if rnd_cfg.get("step_dt") is None:
        rnd_cfg["step_dt"] = env_step_dt(env)
    alg_cfg["rnd_cfg"] = rnd_cfg
    return alg_cfg


__all__ = ["WEIGHT_SCHEDULE_MODES", "RandomNetworkDistillation", "env_step_dt", "resolve_rnd_config"]
