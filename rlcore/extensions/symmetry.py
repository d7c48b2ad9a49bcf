"""Symmetry for PPO: mirrored data augmentation and a mirror loss (Mittal et al., ICRA 2024).

Both use one user function, rsl_rl-compatible::

    obs_aug, actions_aug = data_augmentation_func(env=env, obs=obs, actions=actions)

``obs`` (``TensorDict[B]``) and ``actions`` (``[B, A]``) may each be ``None``, and then the matching output is
``None``. Outputs stack along the batch dimension ``[original, mirror_1, ..., mirror_k]`` (``k >= 1``, so
``B * (k + 1)`` rows), the first block being the input itself.

- Data augmentation: PPO's loss sees the mini-batch plus its mirrored copies, labelled with mirrored actions.
- Mirror loss: the policy ``mu`` is symmetric when ``mu(mirror_obs(o)) == mirror_act(mu(o))``; the loss is
  ``MSE(mu(mirror_obs_i(o)), mirror_act_i(mu(o)).detach())`` over the mirrored blocks ``i = 1..k``.

With both uses off the extension does nothing (rsl_rl then still computes the mirror loss for its logs; rlcore
skips it). rsl_rl's mini-batch methods ``augment_batch`` and ``compute_loss`` work on a
``RolloutStorage.Batch`` in place; rlcore's PPO uses the :class:`Extension` hooks ``augment_mini_batch`` (a new,
augmented mini-batch) and ``extra_loss`` (the weighted mirror loss).
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from tensordict import TensorDict

from rlcore.errors import ConfigError
from rlcore.extensions.base import Algorithm, Batch, Extension


def resolve_function(func: str | Callable | None) -> Callable | None:
    """A callable as is, or one named ``"package.module:function"`` / ``"package.module.function"``.

    Raises:
        ValueError: the string has no module part, the module cannot be imported, it has no such attribute,
            or the attribute is not callable.
    """
    if func is None or callable(func):
        return func
    if not isinstance(func, str):
        raise ConfigError(f"data_augmentation_func must be a callable or a 'package.module:function' string, "
                         f"got {type(func).__name__}.")
    if ":" in func:
        module_name, attr = func.split(":", 1)
    elif "." in func:
        module_name, attr = func.rsplit(".", 1)
    else:
        raise ConfigError(f"data_augmentation_func '{func}' is not a 'package.module:function' path.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"data_augmentation_func '{func}': cannot import module '{module_name}' ({err}).") from None
    obj = module
    try:
        for part in attr.split("."):  # "module:Class.method" works too
            obj = getattr(obj, part)
    except AttributeError:
        raise ConfigError(f"data_augmentation_func '{func}': module '{module_name}' has no attribute '{attr}'.") \
            from None
    if not callable(obj):
        raise ConfigError(f"data_augmentation_func '{func}' resolved to a non-callable {type(obj).__name__}.")
    return obj


class Symmetry(Extension):
    """Mirrored data augmentation and/or mirror loss for PPO (feed-forward models only); a PPO :class:`Extension`
    named ``"symmetry"`` that logs the mirror loss as ``"symmetry"`` when ``use_mirror_loss`` is on.

    Args (rsl_rl's, in its order):
        env: the environment, passed to the augmentation function (e.g. to find observation terms).
        data_augmentation_func: the augmentation function or its import path (see the module docstring).
        use_data_augmentation: train PPO on the mini-batch plus its mirrored copies.
        use_mirror_loss: add ``mirror_loss_coeff * mirror_loss`` to PPO's loss.
        mirror_loss_coeff: weight of the mirror loss.

    Raises:
        ValueError: a use is enabled but the function is missing or cannot be resolved.
    """

    name = "symmetry"

    def __init__(
        self,
        env=None,
        data_augmentation_func: str | Callable | None = None,
        use_data_augmentation: bool = False,
        use_mirror_loss: bool = False,
        mirror_loss_coeff: float = 0.0,
    ) -> None:
        self.env = env
        self.use_data_augmentation = bool(use_data_augmentation)
        self.use_mirror_loss = bool(use_mirror_loss)
        self.mirror_loss_coeff = float(mirror_loss_coeff)
        self.loss_names = ("symmetry",) if self.use_mirror_loss else ()
        self._checked_identity = False
        if not (self.use_data_augmentation or self.use_mirror_loss):
            print("[rlcore] symmetry_cfg: use_data_augmentation and use_mirror_loss are both off, so the symmetry "
                  "extension does nothing.")
            self.data_augmentation_func = resolve_function(data_augmentation_func)
            return
        if data_augmentation_func is None:
            raise ConfigError("Symmetry extension: data_augmentation_func is required (a callable or a "
                             "'package.module:function' path) when use_data_augmentation or use_mirror_loss is on.")
        self.data_augmentation_func = resolve_function(data_augmentation_func)

    # ------------------------------------------------------------------ helpers
    def _call(self, obs: TensorDict | None, actions: torch.Tensor | None):
        if self.data_augmentation_func is None:
            raise ConfigError("Symmetry extension: data_augmentation_func is required to mirror observations/actions.")
        return self.data_augmentation_func(env=self.env, obs=obs, actions=actions)

    @staticmethod
    def _num_copies(n_in: int, n_out: int, what: str) -> int:
        """``k + 1``: how many blocks of ``n_in`` rows the augmented ``what`` holds."""
        if n_in <= 0 or n_out < 2 * n_in or n_out % n_in != 0:
            raise ConfigError(f"data_augmentation_func returned {n_out} {what} rows for {n_in} inputs; expected "
                             f"[original, mirrored...]: a multiple >= 2 of the input batch.")
        return n_out // n_in

    def _check_first_block(self, obs: TensorDict, obs_aug: TensorDict, actions, actions_aug) -> None:
        """Once: the first block of the output must be the input (the original samples come first)."""
        if self._checked_identity:
            return
        b = obs.batch_size[0]
        same = all(torch.equal(obs[k], obs_aug[k][:b]) for k in obs.keys(include_nested=True, leaves_only=True))
        if actions is not None and actions_aug is not None:
            same = same and torch.equal(actions, actions_aug[:b])
        if not same:
            raise ConfigError("data_augmentation_func must return the original samples first: "
                             "[original, mirrored_1, ..., mirrored_k] along the batch dimension.")
        self._checked_identity = True

    # ------------------------------------------------------------------ uses
    def augment(self, obs: TensorDict, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor]:
        """``(obs_aug TensorDict[B*(k+1)], actions_aug [B*(k+1), A])`` from ``obs[B]`` and ``actions[B, A]``."""
        b = actions.shape[0]
        obs_aug, actions_aug = self._call(obs, actions)
        if obs_aug is None or actions_aug is None:
            raise ConfigError("data_augmentation_func returned None for observations or actions it was given.")
        copies = self._num_copies(b, int(obs_aug.batch_size[0]), "observation")
        if actions_aug.shape[0] != copies * b:
            raise ConfigError(f"data_augmentation_func returned {obs_aug.batch_size[0]} observation rows but "
                             f"{actions_aug.shape[0]} action rows.")
        self._check_first_block(obs, obs_aug, actions, actions_aug)
        return obs_aug, actions_aug

    def mirror_loss(self, actor: nn.Module, obs: TensorDict) -> torch.Tensor:
        """Scalar ``MSE(mu(mirror_obs_i(o)), mirror_act_i(mu(o)).detach())`` over the mirrored blocks.

        ``obs`` is the (un-augmented) mini-batch ``TensorDict[B]``; ``mu`` is the actor's deterministic output
        (the mean). The actor's current distribution (from an earlier stochastic call) is left untouched.
        """
        b = int(obs.batch_size[0])
        obs_aug, _ = self._call(obs, None)
        return self._mirror_loss_on(actor, obs_aug, b)

    def _mirror_loss_on(self, actor: nn.Module, obs_aug: TensorDict, b: int) -> torch.Tensor:
        """The mirror loss on already augmented observations ``[B*(k+1)]`` whose first block is the original."""
        self._num_copies(b, int(obs_aug.batch_size[0]), "observation")
        means = actor(obs_aug, stochastic_output=False)  # [B*(k+1), A]
        _, mirrored = self._call(None, means[:b].detach())
        if mirrored is None or mirrored.shape != means.shape:
            raise ConfigError(f"data_augmentation_func mirrored {b} actions into shape "
                             f"{None if mirrored is None else tuple(mirrored.shape)}, expected {tuple(means.shape)}.")
        return F.mse_loss(means[b:], mirrored[b:].detach())

    # ------------------------------------------------------------------ PPO extension hooks
    @classmethod
    def check_algorithm(cls, alg: Algorithm) -> None:
        """Refuse recurrent models (checked before the extension is built): mirrored copies of a trajectory would
        need hidden states of their own."""
        if alg.actor.is_recurrent or alg.critic.is_recurrent:
            raise ConfigError("The symmetry extension does not support recurrent models (model=rnn); "
                             "use an MLP or CNN model with extension=symmetry.")

    def augment_mini_batch(self, batch: Batch) -> Batch:
        """A copy of ``batch`` augmented by :meth:`augment_batch` (with ``use_data_augmentation``; else ``batch``)."""
        if not self.use_data_augmentation:
            return batch
        augmented = copy.copy(batch)
        self.augment_batch(augmented, int(batch.actions.shape[0]))
        return augmented

    def extra_loss(self, alg: Algorithm, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """``mirror_loss_coeff * mirror_loss`` of the mini-batch's observations (with ``use_mirror_loss``)."""
        if not self.use_mirror_loss:
            return None
        mirror_loss = self.mirror_loss(alg.actor, batch.observations)
        return self.mirror_loss_coeff * mirror_loss, {"symmetry": mirror_loss}

    # ------------------------------------------------------------------ rsl_rl's mini-batch interface
    def augment_batch(self, batch, original_batch_size: int) -> None:
        """Augment a feed-forward ``RolloutStorage.Batch`` in place (only with ``use_data_augmentation``).

        ``observations`` and ``actions`` become ``[B*(k+1), ...]`` (originals first); ``old_actions_log_prob``,
        ``values``, ``advantages`` and ``returns`` are repeated ``k + 1`` times to match. The old distribution
        parameters keep the original rows only (the KL of the adaptive learning rate is measured on them).
        """
        if not self.use_data_augmentation:
            return
        batch.observations, batch.actions = self.augment(batch.observations, batch.actions)
        copies = int(batch.actions.shape[0]) // int(original_batch_size)
        for name in ("old_actions_log_prob", "values", "advantages", "returns", "noise_scale"):
            value = getattr(batch, name, None)
            if value is not None:
                setattr(batch, name, value.repeat(copies, *([1] * (value.dim() - 1))))

    def compute_loss(self, actor: nn.Module, batch, original_batch_size: int) -> torch.Tensor:
        """The mirror loss of a mini-batch; detached (for logging only) unless ``use_mirror_loss``.

        If the batch was not augmented by :meth:`augment_batch`, its observations are augmented here, in place.
        """
        if not self.use_data_augmentation:
            batch.observations, _ = self._call(batch.observations, None)
        loss = self._mirror_loss_on(actor, batch.observations, int(original_batch_size))
        return loss if self.use_mirror_loss else loss.detach()


def resolve_symmetry_config(alg_cfg: dict, env) -> dict:
    """Give ``alg_cfg["symmetry_cfg"]`` (if set) the env its augmentation function receives; None otherwise.

    Returns ``alg_cfg`` with a new ``symmetry_cfg`` dict (the caller's one is not modified).
    """
    sym_cfg = alg_cfg.get("symmetry_cfg")
    alg_cfg["symmetry_cfg"] = None if sym_cfg is None else {**dict(sym_cfg), "env": env}
    return alg_cfg


__all__ = ["Symmetry", "resolve_function", "resolve_symmetry_config"]
