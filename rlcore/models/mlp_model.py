"""MLPModel: the base model — observation groups -> ``get_latent`` -> MLP head -> optional distribution.

CNNModel and RNNModel subclass it and only change ``get_latent`` (and export), so PPO and
Distillation treat every model the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.errors import ConfigError
from rlcore.modules import MLP, EmpiricalNormalization, HiddenState, resolve_distribution
from rlcore.utils.trajectories import unpad_trajectories


def concat_groups(obs: TensorDict, groups: Sequence[str]) -> torch.Tensor:
    """The 1D groups ``groups`` of ``obs`` side by side, ``[..., sum of their sizes]``."""
    if len(groups) == 1:
        return obs[groups[0]]
    return torch.cat([obs[g] for g in groups], dim=-1)


def select_obs_groups(obs: TensorDict, obs_groups: dict[str, list[str]], obs_set: str) -> tuple[list[str], list[str]]:
    """Return the ``(1D groups, 2D groups)`` of ``obs_set``, checking each exists in ``obs``.

    Raises:
        ValueError: ``obs_set`` is not in ``obs_groups``; a group is missing from ``obs`` (the message
            names it and lists the groups present); a group is neither 1D ``[N, D]`` nor 2D ``[N, C, H, W]``.
    """
    if obs_set not in obs_groups:
        raise ConfigError(f"Observation set '{obs_set}' is not in obs_groups (sets given: {sorted(obs_groups)}).")
    groups = list(obs_groups[obs_set])
    if not groups:
        raise ConfigError(f"Observation set '{obs_set}' lists no observation groups.")
    present = list(obs.keys())
    one_d, two_d = [], []
    for group in groups:
        if group not in present:
            raise ConfigError(
                f"Observation group '{group}' (observation set '{obs_set}') is not provided by the environment; "
                f"available groups: {', '.join(present)}."
            )
        ndim = obs[group].dim() - obs.batch_dims
        if ndim == 1:
            one_d.append(group)
        elif ndim == 3:
            two_d.append(group)
        else:
            raise ConfigError(
                f"Observation group '{group}' has per-env shape {tuple(obs[group].shape[obs.batch_dims:])}; "
                "groups must be 1D [D] or 2D images [C, H, W]."
            )
    return one_d, two_d


class MLPModel(nn.Module):
    """Model over 1D observation groups: ``latent = normalize(concat(groups))``.

    Args:
        obs: example observations (``TensorDict[N]``), used for group shapes.
        obs_groups: observation sets -> groups, e.g. ``{"actor": ["policy"], "critic": ["policy", "privileged"]}``.
        obs_set: which set this model reads (``"actor"``, ``"critic"``, ``"student"``, ``"teacher"``).
        output_dim: output size (action dim for a policy, 1 for a value function).
        hidden_dims: MLP hidden sizes (-1 = input size).
        activation: activation name.
        obs_normalization: normalise the 1D latent with running statistics (exported with the model).
        distribution_cfg: e.g. ``{"class_name": "GaussianDistribution", "init_std": 1.0}``; None for a
            deterministic model (critic).
        init_gains: optional orthogonal-init gain per Linear layer of the head.
        estimator_cfg: optional state estimator, e.g. ``{"target_groups": ["base_lin_vel"],
            "hidden_dims": [128, 64]}``: a second MLP maps the latent to the target groups (privileged quantities a
            real robot does not measure, such as its base velocity) and its estimate, detached, joins the head's
            input. PPO trains it with a supervised loss beside its own (:class:`~rlcore.extensions.EstimatorLoss`);
            exports carry it inside the graph, so the deployed policy needs no extra input. See
            :class:`StateEstimator`.
    """

    is_recurrent: bool = False
    accepts_2d: bool = False

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        obs_normalization: bool = False,
        distribution_cfg: dict | None = None,
        init_gains: Sequence[float] | None = None,
        estimator_cfg: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.obs_set = obs_set
        self.obs_groups_1d, self.obs_groups_2d = select_obs_groups(obs, obs_groups, obs_set)
        self.obs_groups = self.obs_groups_1d + self.obs_groups_2d
        if self.obs_groups_2d and not self.accepts_2d:
            raise ConfigError(
                f"{type(self).__name__} takes only 1D observation groups, but '{obs_set}' includes 2D group(s) "
                f"{self.obs_groups_2d}; use CNNModel (model=cnn) for image-like groups."
            )
        self.obs_dim = sum(int(obs[g].shape[-1]) for g in self.obs_groups_1d)
        self.output_dim = int(output_dim)
        self.obs_normalization = obs_normalization
        self.activation = activation
        self.obs_normalizer: nn.Module = EmpiricalNormalization(self.obs_dim) if obs_normalization else nn.Identity()
        self.distribution = resolve_distribution(distribution_cfg, self.output_dim)
        head_out = self.distribution.input_dim if self.distribution is not None else self.output_dim
        self.estimator = None if estimator_cfg is None else StateEstimator.build(self, obs, estimator_cfg)
        self.last_estimate: torch.Tensor | None = None
        head_in = self._latent_dim() + (self.estimator.output_dim if self.estimator is not None else 0)
        self.mlp = MLP(head_in, head_out, hidden_dims, activation, init_gains=init_gains)
        if self.distribution is not None:
            self.distribution.init_mlp_weights(self.mlp)

    # ------------------------------------------------------------------ pipeline
    def forward(
        self,
        obs: TensorDict,
        masks: torch.Tensor | None = None,
        hidden_state: HiddenState = None,
        stochastic_output: bool = False,
    ) -> torch.Tensor:
        """Observations -> output ``[B, output_dim]`` (``[T, N, output_dim]`` in recurrent batch mode).

        With a distribution, ``stochastic_output=True`` samples (and keeps the distribution for
        log-prob/entropy queries); otherwise the deterministic output (the mean) is returned.
        """
        if masks is not None and not self.is_recurrent:
            obs = unpad_trajectories(obs, masks)  # padded recurrent batches given to a feed-forward model
        out = self._head(self.get_latent(obs, masks, hidden_state))
        if self.distribution is None:
            return out
        if stochastic_output:
            self.distribution.update(out)
            return self.distribution.sample()
        return self.distribution.deterministic_output(out)

    def get_latent(
        self, obs: TensorDict, masks: torch.Tensor | None = None, hidden_state: HiddenState = None
    ) -> torch.Tensor:
        """``[B, latent]``: the normalised concatenation of the 1D groups."""
        return self.obs_normalizer(self._concat_1d(obs))

    def _concat_1d(self, obs: TensorDict) -> torch.Tensor:
        return concat_groups(obs, self.obs_groups_1d)

    def _head(self, latent: torch.Tensor) -> torch.Tensor:
        """The MLP head on the latent, with the state estimate appended first when the model has an estimator.

        The estimate (with its graph) is kept as :attr:`last_estimate`, so that PPO's estimator loss on the same
        mini-batch does not run the estimator a second time.
        """
        if self.estimator is None:
            return self.mlp(latent)
        self.last_estimate = self.estimator.estimate(latent)
        return self.mlp(torch.cat([latent, self.last_estimate.detach()], dim=-1))

    def estimator_loss(self, obs: TensorDict, estimate: torch.Tensor | None = None, masks: torch.Tensor | None = None,
                       hidden_state: HiddenState = None) -> torch.Tensor:
        """Mean squared error of the state estimate against its target groups in ``obs``.

        Args:
            obs: a mini-batch ``[B]``, or padded trajectories ``[T, K]`` with their ``masks`` (recurrent batches).
            estimate: this model's estimate for ``obs`` when already computed (:attr:`last_estimate` of the forward
                pass on it: ``[B, D]``, or ``[T, N, D]`` for trajectories); otherwise it is computed here (a
                recurrent model then needs the ``hidden_state`` at the trajectory starts).
            masks, hidden_state: of a recurrent batch, as for :meth:`forward`.
        """
        if self.estimator is None:
            raise RuntimeError(f"This {type(self).__name__} has no estimator (no estimator_cfg was given).")
        if masks is not None and not self.is_recurrent:  # a feed-forward model in a recurrent batch, as in forward
            obs, masks = unpad_trajectories(obs, masks), None
        if estimate is None:
            estimate = self.estimator.estimate(self.get_latent(obs, masks, hidden_state))
        target = concat_groups(obs, self.estimator.target_groups)
        if masks is not None:  # padded trajectories [T, K, D] -> per env [T, N, D], like the estimate
            target = unpad_trajectories(target, masks)
        return (estimate - target).square().mean()

    def _latent_dim(self) -> int:
        return self.obs_dim

    # ------------------------------------------------------------------ recurrent interface (no-ops here)
    def reset(self, dones: torch.Tensor | None = None, hidden_state: HiddenState = None) -> None:
        """Reset recurrent state (nothing to do for a feed-forward model)."""

    def get_hidden_state(self) -> HiddenState:
        return None

    def detach_hidden_state(self, dones: torch.Tensor | None = None) -> None:
        """Cut the graph of the recurrent state (nothing to do for a feed-forward model)."""

    # ------------------------------------------------------------------ distribution queries
    def _dist(self):
        if self.distribution is None:
            raise RuntimeError(f"This {type(self).__name__} is deterministic (no distribution_cfg was given).")
        return self.distribution

    @property
    def output_mean(self) -> torch.Tensor:
        return self._dist().mean

    @property
    def output_std(self) -> torch.Tensor:
        return self._dist().std

    @property
    def output_entropy(self) -> torch.Tensor:
        return self._dist().entropy

    @property
    def output_distribution_params(self) -> tuple[torch.Tensor, ...]:
        return self._dist().params

    def get_output_log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-probability ``[B]`` of ``outputs [B, A]`` under the current distribution."""
        return self._dist().log_prob(outputs)

    def get_kl_divergence(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """KL(old || new) ``[B]``, summed over output dims."""
        return self._dist().kl_divergence(old_params, new_params)

    # ------------------------------------------------------------------ normalisation
    @torch.no_grad()
    def update_normalization(self, obs: TensorDict, sync: bool = False) -> None:
        """Merge a batch of observations (any leading dims, e.g. a whole rollout ``[T, N]``) into the stats.

        ``sync=True`` pools the batch over all distributed ranks first.
        """
        if self.obs_normalization:
            self.obs_normalizer.update(self._concat_1d(obs).reshape(-1, self.obs_dim), sync=sync)

    # ------------------------------------------------------------------ export
    def export_inputs(self) -> list[tuple[str, tuple[int, ...]]]:
        """Names and per-env shapes of the exported model's observation inputs, in call order."""
        return [("obs", (self.obs_dim,))]

    def _export_parts(self) -> tuple[nn.Module, nn.Module, nn.Module]:
        """Deep copies of (normaliser, head, deterministic output) for an exported graph; the head includes the
        state estimator when the model has one."""
        det = self.distribution.as_deterministic_output_module() if self.distribution is not None else nn.Identity()
        head = self.mlp if self.estimator is None else _EstimatorHead(self.estimator, self.mlp)
        return copy.deepcopy(self.obs_normalizer).cpu(), copy.deepcopy(head).cpu(), det.cpu()

    def as_jit(self) -> torch.jit.ScriptModule:
        """TorchScript policy: ``actions = f(obs [B, D])``, normaliser included, deterministic output."""
        return torch.jit.script(_ExportMLP(*self._export_parts()).eval())

    def as_onnx(self, verbose: bool = False) -> nn.Module:
        """ONNX-exportable wrapper (input ``obs``, output ``actions``); see :class:`ExportedPolicy` for its interface."""
        module = _ExportMLP(*self._export_parts()).eval()
        module.set_onnx_interface(["obs"], ["actions"], (torch.zeros(1, self.obs_dim),),
                                  {"obs": {0: "batch"}, "actions": {0: "batch"}}, is_recurrent=False, verbose=verbose)
        module.input_size = self.obs_dim
        return module


class StateEstimator(MLP):
    """An MLP from a model's latent (a recurrent model's: its memory's output) to privileged target groups: the
    concurrent state estimator of Ji et al.
    (2022, "Concurrent training of a control policy and a state estimator for dynamic and robust legged
    locomotion").

    A blind policy cannot measure its base velocity, so on a robot it was not tuned to it settles on a gait for
    the average robot (over- or under-shooting a velocity command); given a regressed estimate of the
    velocity, learned with supervision from the simulator's true value, it can close the loop on it. The
    estimate enters the policy head detached: only the supervised loss trains the estimator.

    Config keys (``estimator_cfg``): ``target_groups`` (1D observation groups to regress, in ``obs`` but not
    read by the model), ``hidden_dims`` (default ``[128, 64]``), ``activation`` (default: the model's),
    ``loss_coef`` (weight of the mean squared error in PPO's loss, default 1.0), ``train_latent`` (default true:
    the estimator's loss also trains what makes the latent, a recurrent model's memory or a CNN; false: the estimator
    reads the latent detached, so the memory learns from the policy's loss alone and the estimator only reads it).
    """

    KEYS = ("target_groups", "hidden_dims", "activation", "loss_coef", "train_latent")

    def __init__(self, input_dim: int, target_groups: Sequence[str], target_dim: int,
                 hidden_dims: Sequence[int] = (128, 64), activation: str = "elu", loss_coef: float = 1.0,
                 train_latent: bool = True) -> None:
        super().__init__(input_dim, target_dim, hidden_dims, activation)
        self.target_groups = list(target_groups)
        self.output_dim = int(target_dim)
        self.loss_coef = float(loss_coef)
        self.train_latent = bool(train_latent)

    def estimate(self, latent: torch.Tensor) -> torch.Tensor:
        """The estimate from a model's latent ``[..., D]`` in training, through the latent's graph only with
        ``train_latent``."""
        return self(latent if self.train_latent else latent.detach())

    @classmethod
    def build(cls, model: MLPModel, obs: TensorDict, cfg: Mapping[str, Any]) -> StateEstimator:
        """The estimator of ``model`` from its config, checking the keys and the target groups against ``obs``."""
        unknown = set(cfg) - set(cls.KEYS)
        if unknown:
            raise ConfigError(f"estimator_cfg: unknown keys {sorted(unknown)}; valid: {list(cls.KEYS)}.")
        targets = list(cfg.get("target_groups") or [])
        if not targets:
            raise ConfigError("estimator_cfg.target_groups must name at least one observation group to regress.")
        for group in targets:
            if group not in obs.keys() or obs[group].dim() - obs.batch_dims != 1:
                raise ConfigError(f"estimator_cfg.target_groups: '{group}' is not a 1D observation group of the "
                                  f"environment; available groups: {', '.join(obs.keys())}.")
            if group in model.obs_groups:
                raise ConfigError(f"estimator_cfg.target_groups: '{group}' is already an input of the "
                                  f"'{model.obs_set}' model; an estimator regresses what the model does not read.")
        given = {k: cfg[k] for k in ("hidden_dims", "loss_coef", "train_latent") if k in cfg}  # else the constructor's defaults
        return cls(model._latent_dim(), targets, sum(int(obs[g].shape[-1]) for g in targets),
                   activation=cfg.get("activation", model.activation), **given)


class _EstimatorHead(nn.Module):
    """Exported head of a model with a state estimator: ``mlp(cat(z, estimator(z)))``."""

    def __init__(self, estimator: nn.Module, mlp: nn.Module) -> None:
        super().__init__()
        self.estimator = estimator
        self.mlp = mlp

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([z, self.estimator(z)], dim=-1))


class ExportedPolicy(nn.Module):
    """Base of the modules that ``as_onnx()`` returns: the graph plus what an ONNX exporter needs to trace it.

    rsl_rl 5.x's interface, so code written for it exports rlcore models unchanged::

        m = model.as_onnx(verbose=False)
        torch.onnx.export(m, m.get_dummy_inputs(), "policy.onnx", input_names=m.input_names,
                          output_names=m.output_names)

    Attributes: ``input_names``, ``output_names``, ``is_recurrent``, ``verbose``, ``dynamic_axes`` (batch axes,
    for ``torch.onnx.export(..., dynamic_axes=...)``) and ``example_inputs`` (what ``get_dummy_inputs`` copies).
    """

    def set_onnx_interface(self, input_names: list[str], output_names: list[str], example_inputs: tuple,
                           dynamic_axes: dict, is_recurrent: bool, verbose: bool = False) -> None:
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.example_inputs = tuple(example_inputs)
        self.dynamic_axes = dynamic_axes
        self.is_recurrent = is_recurrent
        self.verbose = verbose

    def get_dummy_inputs(self) -> tuple[torch.Tensor, ...]:
        """Zero inputs of batch size 1, one per name of ``input_names`` and in that order (for tracing)."""
        return tuple(t.clone() for t in self.example_inputs)


class _ExportMLP(ExportedPolicy):
    """Deployable feed-forward policy: normalise -> MLP -> deterministic output."""

    def __init__(self, normalizer: nn.Module, mlp: nn.Module, deterministic: nn.Module) -> None:
        super().__init__()
        self.obs_normalizer = normalizer
        self.mlp = mlp
        self.deterministic_output = deterministic

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.deterministic_output(self.mlp(self.obs_normalizer(obs)))

    @torch.jit.export
    def reset(self) -> None:
        """No recurrent state; present so every exported policy can be reset the same way."""
