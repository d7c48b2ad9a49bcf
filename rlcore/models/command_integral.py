"""Integral action for a deployed velocity-tracking policy: an outer loop on the command it is shown.

A blind actor with a base-velocity estimator (:class:`~rlcore.models.mlp_model.StateEstimator`) closes the loop on
its estimate like a proportional controller: it corrects only part of a velocity error, so on a robot that differs
from its training pool's average it keeps a steady error (``bench/noise_gap.py --feedback``). The exported graph
built here adds the integral term a deployed controller would: the policy is shown ``cmd + u`` instead of ``cmd``,
with

    u_out = clip(u_in + gain * dt * (cmd_xy - estimate_xy), -limit, limit),   u = 0 at an episode start,

so the policy walks until its own estimate reads the command. ``u`` is a recurrent state of the graph
(``u_in [1, B, 2] -> u_out``, named and shaped like an RNN's state, so every rlcore tool that carries ``h_in``
carries it). Only the policy's own inputs and its estimate are used: nothing a robot does not have.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from rlcore.errors import ConfigError
from rlcore.models.mlp_model import ExportedPolicy

STATE_INPUT, STATE_OUTPUT = "u_in", "u_out"


class CommandIntegralPolicy(ExportedPolicy):
    """``(obs [B, D], u_in [1, B, 2]) -> (actions [B, A], u_out [1, B, 2])``: an MLP policy with a base-velocity
    estimator, its planar command columns shifted by ``u`` (see the module docstring).

    Args:
        normalizer, estimator, mlp, deterministic: the model's export parts (normaliser, estimator on the
            normalised input, head on ``[z, estimate]``, deterministic output).
        command_columns: ``(column, axis)`` pairs: the columns of ``obs`` that hold the planar command (axis 0: vx,
            1: vy), the current frame's and any history frames'; each is shifted by ``u[axis] * scale[axis]``.
        current: the two columns (vx, vy) of the current command, read as the command to reach.
        command_scale: ``(sx, sy)``: the observation scale of the command's vx and vy.
        velocity_scale: the observation scale of the estimator's base velocity (its first two outputs: vx, vy).
        gain: integral gain ``[1/s]``; dt: control period ``[s]``; limit: ``|u|`` bound per axis ``[m/s]``.
    """

    def __init__(self, normalizer: nn.Module, estimator: nn.Module, mlp: nn.Module, deterministic: nn.Module,
                 obs_dim: int, command_columns: Sequence[tuple[int, int]], current: tuple[int, int],
                 command_scale: tuple[float, float], velocity_scale: float, gain: float, dt: float,
                 limit: float) -> None:
        super().__init__()
        self.obs_normalizer, self.estimator, self.mlp, self.deterministic_output = (normalizer, estimator, mlp,
                                                                                  deterministic)
        shift = torch.zeros(2, obs_dim)  # u [B, 2] @ shift [2, D]: the command columns moved by u, scaled
        for column, axis in command_columns:
            shift[axis, column] = float(command_scale[axis])
        read = torch.zeros(obs_dim, 2)  # obs [B, D] @ read [D, 2]: the current planar command in m/s
        for axis, column in enumerate(current):
            read[column, axis] = 1.0 / float(command_scale[axis])
        self.register_buffer("shift", shift)
        self.register_buffer("read", read)
        self.velocity_scale, self.gain, self.dt, self.limit = float(velocity_scale), float(gain), float(dt), float(limit)
        self.set_onnx_interface(["obs", STATE_INPUT], ["actions", STATE_OUTPUT],
                                (torch.zeros(1, obs_dim), torch.zeros(1, 1, 2)),
                                {"obs": {0: "batch"}, STATE_INPUT: {1: "batch"}, "actions": {0: "batch"},
                                 STATE_OUTPUT: {1: "batch"}}, is_recurrent=True)
        self.input_size = obs_dim

    def forward(self, obs: torch.Tensor, u_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = u_in[0]  # [B, 2]
        z = self.obs_normalizer(obs + u @ self.shift)
        estimate = self.estimator(z)
        actions = self.deterministic_output(self.mlp(torch.cat([z, estimate], dim=-1)))
        error = obs @ self.read - estimate[:, :2] / self.velocity_scale  # cmd_xy - estimate_xy [m/s]
        u_out = torch.clamp(u + self.gain * self.dt * error, -self.limit, self.limit)
        return actions, u_out.unsqueeze(0)

    def metadata(self) -> dict:
        """The ``command_integral`` entry of the file's interface."""
        return {"state": STATE_INPUT, "gain": self.gain, "limit": self.limit, "dt": self.dt,
                "law": "obs command columns += u * scale; u_out = clip(u_in + gain * dt * (cmd_xy - estimate_xy), "
                       "-limit, limit); u = 0 at an episode start"}


def _cannot_carry(model: nn.Module) -> str | None:
    """Why ``model`` cannot carry the loop (None when it can): it needs a feed-forward actor whose estimator reads
    ``obs`` and regresses ``base_lin_vel``."""
    if getattr(model, "is_recurrent", False):  # an RNN's estimator reads its memory, not obs
        return (f"{type(model).__name__} is recurrent; the integral loop is written around a feed-forward actor "
                "(MLPModel) with a base_lin_vel estimator.")
    estimator = getattr(model, "estimator", None)
    if estimator is None or list(estimator.target_groups) != ["base_lin_vel"]:
        return (f"it needs an actor with a base_lin_vel estimator (estimator_cfg); this {type(model).__name__} has "
                f"{'none' if estimator is None else estimator.target_groups}.")
    return None


def _velocity_scale(groups: dict) -> float | None:
    """The observation scale of ``base_lin_vel`` in a task's described groups (None if not described)."""
    scale = ((groups.get("base_lin_vel") or {}).get("terms") or [{}])[0].get("scale")
    return None if scale is None else float(scale)


def command_integral_policy(model: nn.Module, layout: list[dict], velocity_scale: float, gain: float, dt: float,
                            limit: float) -> CommandIntegralPolicy:
    """The :class:`CommandIntegralPolicy` of ``model`` (an MLPModel with a ``base_lin_vel`` estimator), its command
    columns found by name in ``layout`` (the ``obs`` input's terms: ``velocity_commands`` and its history copies
    ``velocity_commands@t-k``, vx and vy first).

    Raises:
        ConfigError: a model without such an estimator, or an input without a velocity command term.
    """
    problem = _cannot_carry(model)
    if problem:
        raise ConfigError(f"command_integral_gain: {problem}")
    if not gain > 0 or not limit > 0:
        raise ConfigError(f"command_integral_gain={gain}, command_integral_limit={limit}: both must be > 0.")
    terms = [t for t in layout if t["name"].split("@")[0] == "velocity_commands"]
    current = [t for t in terms if t["name"] == "velocity_commands"]
    if not current:
        raise ConfigError("command_integral_gain: the policy's obs input has no 'velocity_commands' term; its terms: "
                          + ", ".join(t["name"] for t in layout[:12]) + ("..." if len(layout) > 12 else ""))
    scale = current[0]["scale"]
    scale = (float(scale[0]), float(scale[1])) if isinstance(scale, (list, tuple)) else (float(scale),) * 2
    columns = [(t["start"] + axis, axis) for t in terms for axis in (0, 1)]
    normalizer, head, det = model._export_parts()
    return CommandIntegralPolicy(normalizer, head.estimator, head.mlp, det, int(model.obs_dim), columns,
                                 (current[0]["start"], current[0]["start"] + 1), scale, velocity_scale, gain, dt,
                                 limit).eval()


def integral_for(policy: nn.Module, env, gain: float | None = None,
                 limit: float | None = None) -> CommandIntegralPolicy | None:
    """The exported graph of ``policy`` with its integral loop, or None for the policy alone.

    ``gain`` None: the task's default (``env.command_integral()``, e.g. Go2's ``commands.integral_gain``), applied
    when the policy can carry it (a feed-forward actor with a ``base_lin_vel`` estimator over a ``velocity_commands``
    term; a recurrent model, a distilled student or a task without the method: None). ``gain`` 0: None. ``gain`` > 0: required, so a policy
    that cannot carry it is a ConfigError. ``limit`` None: the task's default, else 0.3 m/s.
    """
    from rlcore.utils.export import obs_layout

    defaults = env.command_integral() if callable(getattr(env, "command_integral", None)) else {}
    requested = gain is not None
    gain = float(defaults.get("gain", 0.0) if gain is None else gain)
    limit = float(defaults.get("limit", 0.3) if limit is None else limit)
    if gain <= 0:
        return None
    interface = env.deployment_interface() if callable(getattr(env, "deployment_interface", None)) else {}
    groups = interface.get("observation_groups") or {}
    layout = obs_layout(list(getattr(policy, "obs_groups_1d", [])), groups)
    velocity = _velocity_scale(groups)
    described = layout is not None and velocity is not None
    if not requested and not (described and _cannot_carry(policy) is None):
        return None
    if not described:
        raise ConfigError(f"command_integral_gain: the task {type(env).__name__} does not describe its observation "
                          "terms and base_lin_vel scale (deployment_interface()); it needs task=go2's interface.")
    return command_integral_policy(policy, layout, velocity, gain, float(env.step_dt), limit)


def integral_from_interface(policy: nn.Module, meta: dict) -> CommandIntegralPolicy | None:
    """The torch twin of an exported file's integral loop (its ``rlcore.*`` metadata: ``command_integral``,
    ``obs_layout``, ``observation_groups``) around ``policy``; None when the file has no loop."""
    loop = meta.get("command_integral")
    if not loop:
        return None
    return command_integral_policy(policy, meta["obs_layout"], _velocity_scale(meta["observation_groups"]),
                                   float(loop["gain"]), float(loop["dt"]), float(loop["limit"]))


__all__ = ["STATE_INPUT", "STATE_OUTPUT", "CommandIntegralPolicy", "command_integral_policy", "integral_for",
           "integral_from_interface"]
