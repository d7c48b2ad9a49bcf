"""Deterministic evaluation of a policy on a separate env, for ``runner.keep_best`` and ``runner.stop_at``.

An :class:`Evaluation` runs the policy's mean action on its own env (built from the same task as the training
env, e.g. by ``rlcore.train``), so it takes no step of the training envs. It draws nothing from the global
generators either (their states are restored afterwards), and restores the policy's mode and recurrent state:
a run with evaluations trains exactly as one without.

Before every evaluation the env is put into a fixed state, as far as it allows:

1. **Fixed start.** An env with ``state_dict``/``load_state_dict`` is put back into the state it had when the
   Evaluation was made (its own generators included).
2. **The training env's curricula.** With ``source_env`` (the training env) exposing ``curriculum_state() -> dict``
   and the evaluation env ``set_curriculum(state)``, the evaluation env adopts where the training env's curricula
   stand *now*: on Go2 the domain-randomisation progress and the reward-weight schedules (its step counter), the
   terrain levels (drawn from the training env's level distribution) and the training env's robot pool. So the
   evaluation robots are drawn from the distribution the policy trains on at that iteration: the same physical
   variants (the robots it trains on, not the evaluation env's own pool), as many of them as the
   domain-randomisation curriculum allows then, with sensor biases at the curriculum's strength, on the
   training env's terrain levels. Without ``source_env`` (or where either env lacks the method) the evaluation
   env keeps its own curricula: a Go2 env then draws the curriculum's first, mildest robot only, without sensor
   biases.
3. **Fresh episodes.** An env with ``reset()`` resets every env; the draw uses the evaluation env's own restored
   generator, so it depends on the curriculum point only, not on the training env's random stream: two
   evaluations at the same curriculum point (e.g. any two past the end of Go2's curriculum, on flat ground)
   replay the same robots, commands and noise, and differ only by the policy (a resumed run evaluates as the
   uninterrupted one).

   The VecEnv contract (rsl_rl 5.x: ``get_observations`` and ``step``; Isaac Lab's wrapper) has no ``reset()``.
   Such an env is *settled* instead: from ``get_observations()`` the policy acts until every env has ended an
   episode once (at most ``max_episode_length`` steps, not measured), so the measured episodes start from the
   env's own resets; an env still in its first episode after that counts its return from the evaluation's
   start. Without ``load_state_dict`` the evaluation then starts wherever the env was left (by the last
   evaluation), so values are comparable only statistically (more ``eval_num_envs`` / ``eval_steps`` help).

Metrics (all measured in one pass):

- ``return``: mean return of the episodes that ended during the evaluation (counted from the reset); an env
  whose first episode is still running at the end counts its partial return. Higher is better.
- a task metric by name: the mean over the measured steps (those after ``warmup_steps``) of the task's
  ``extras["log"]`` entry of that name: the full key (``metrics/lin_vel_error``) or its last part
  (``lin_vel_error``); a last part ``<name>_now`` (an instantaneous value of every env at every step, Go2's
  ``lin_vel_error_now``) is preferred to ``<name>`` (a mean over episodes that finished, few in a short
  evaluation). Direction: the task's ``metric_directions`` attribute (``{"lin_vel_error": "min"}``) when it
  names the metric, else lower is better for names with an ``error``, ``err``, ``loss``, ``cost``, ``fall``,
  ``falls`` or ``failures`` part, higher otherwise.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlcore.checkpoint.io import get_rng_states, set_rng_states
from rlcore.errors import ConfigError
from rlcore.logging.logger import find_log_key  # metric names are the logger's (the console's headline resolves alike)

STOP_FORM = ("'<metric> <op> <value>' with <op> one of <, <=, >, >= (e.g. runner.stop_at='return > -200' or "
             "runner.stop_at='lin_vel_error < 0.25')")
_STOP_RE = re.compile(r"^\s*([A-Za-z_][\w/.]*)\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_LOWER_IS_BETTER = {"error", "err", "loss", "cost", "fall", "falls", "failures"}


@dataclass(frozen=True)
class StopRule:
    """``metric op value`` from ``runner.stop_at``; :meth:`met` says whether an evaluated value meets it."""

    metric: str
    op: str
    value: float

    def met(self, value: float) -> bool:
        """Whether ``value`` meets the rule (a NaN never does)."""
        if not math.isfinite(value):
            return False
        return {"<": value < self.value, "<=": value <= self.value,
                ">": value > self.value, ">=": value >= self.value}[self.op]

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


def parse_stop_at(text: str) -> StopRule:
    """``"lin_vel_error < 0.25"`` -> ``StopRule("lin_vel_error", "<", 0.25)``; anything else: one ConfigError line."""
    m = _STOP_RE.match(str(text))
    if m is None:
        raise ConfigError(f"runner.stop_at={text!r}: not understood; the accepted form is {STOP_FORM}.")
    return StopRule(m.group(1), m.group(2), float(m.group(3)))


def check_settings(cfg: dict) -> None:
    """Check the runner's video, evaluation and headline keys of a train config (``cfg`` the runner section or the
    whole config).

    Raises:
        ConfigError: one line naming the key, the bad value and what is accepted.
    """
    minimums = {"video_interval": 0, "video_length": 1, "video_width": 1, "video_height": 1, "eval_interval": 1,
                "eval_num_envs": 1, "eval_steps": 1, "eval_warmup_steps": 0}
    for key, low in minimums.items():
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"runner.{key}={value!r}: must be an integer >= {low}"
                              + (" (null: one episode)." if key == "eval_steps" else "."))
    best = cfg.get("keep_best")
    if best is not None and (not isinstance(best, str) or not re.fullmatch(r"[A-Za-z_][\w/.]*", best)):
        raise ConfigError(f"runner.keep_best={best!r}: must be a metric name: 'return' or a task metric such as "
                          "'lin_vel_error' (null: off).")
    headline = cfg.get("headline_metric", "return")
    if not isinstance(headline, str) or not re.fullmatch(r"[A-Za-z_][\w/.]*", headline):
        raise ConfigError(f"runner.headline_metric={headline!r}: must be a metric name: 'return' or a task metric "
                          "such as 'lin_vel_error'.")
    if cfg.get("stop_at") is not None:
        parse_stop_at(cfg["stop_at"])


def metric_direction(env, name: str) -> str:
    """``"max"`` or ``"min"``: whether higher or lower values of metric ``name`` are better on ``env``'s task."""
    declared = getattr(env, "metric_directions", None) or {}
    short = name.strip("/").rsplit("/", 1)[-1]
    for key in (name, short):
        if key in declared:
            direction = str(declared[key]).lower()
            if direction not in ("min", "max"):
                raise ConfigError(f"{type(env).__name__}.metric_directions[{key!r}]={declared[key]!r}: "
                                  "must be 'min' or 'max'.")
            return direction
    if name == "return":
        return "max"
    parts = set(re.split(r"[/_.]", short.lower()))
    return "min" if parts & _LOWER_IS_BETTER else "max"


def is_better(value: float, best: float | None, direction: str) -> bool:
    """Whether ``value`` improves on ``best`` (None: nothing yet) in ``direction``; a NaN never does."""
    if not math.isfinite(value):
        return False
    if best is None or not math.isfinite(best):
        return True
    return value < best if direction == "min" else value > best


class Evaluation:
    """Runs a policy deterministically on ``env`` and measures ``metrics``.

    Args:
        env: a VecEnv of its own (not the training env): it is reset (or settled) and stepped by each evaluation.
        metrics: metric names (``return`` or task metrics, see the module docstring).
        num_steps: measured steps per evaluation (None: the env's ``max_episode_length``).
        warmup_steps: steps run before the task metrics are measured (returns count from the reset).
        setting: what error messages name (e.g. ``runner.keep_best``).
        source_env: the training env, whose curricula each evaluation adopts (``curriculum_state()`` read at
            every evaluation; see the module docstring). Only read, never stepped. None: ``env``'s own curricula.
    """

    def __init__(self, env, metrics: list[str], num_steps: int | None = None, warmup_steps: int = 0,
                 setting: str = "runner.keep_best", source_env=None) -> None:
        self.env = env
        self.source_env = source_env
        self.metrics = list(dict.fromkeys(metrics))
        self.max_episode_length = int(torch.as_tensor(env.max_episode_length).max())
        if num_steps is None:
            num_steps = self.max_episode_length
        self.num_steps, self.warmup_steps, self.setting = int(num_steps), int(warmup_steps), setting
        self._initial_state = env.state_dict() if _has(env, "state_dict") and _has(env, "load_state_dict") else None
        self._keys: dict[str, str] = {}  # task metric name -> extras["log"] key

    @property
    def follows_curriculum(self) -> bool:
        """Whether evaluations adopt ``source_env``'s curricula (both envs support it)."""
        return _has(self.source_env, "curriculum_state") and _has(self.env, "set_curriculum")

    def check(self, policy: torch.nn.Module, act: Callable | None = None) -> None:
        """Check, with one step, that the task reports every metric asked for (ConfigError naming those it has)."""
        self._run(policy, act, total_steps=1, settle=False)

    def __call__(self, policy: torch.nn.Module, act: Callable | None = None) -> dict[str, float]:
        """``{metric: value}`` of ``policy``; ``act(policy, obs) -> actions`` defaults to the policy's mean action."""
        return self._run(policy, act, total_steps=self.warmup_steps + self.num_steps, settle=True)

    def _restore(self) -> None:
        """Put the env into its fixed state and adopt the training env's curricula (module docstring, 1 and 2).
        Outside inference mode, so that the env's restored tensors stay ordinary ones."""
        if self._initial_state is not None:
            self.env.load_state_dict(self._initial_state)
        if self.follows_curriculum:
            self.env.set_curriculum(self.source_env.curriculum_state())

    def _run(self, policy: torch.nn.Module, act: Callable | None, total_steps: int, settle: bool) -> dict[str, float]:
        env = self.env
        act = act or (lambda p, o: p(o, stochastic_output=False))
        device = next((t.device for t in policy.parameters()), torch.device("cpu"))
        rng = get_rng_states()
        was_training = policy.training
        hidden = policy.get_hidden_state() if getattr(policy, "is_recurrent", False) else None
        policy.eval()
        try:
            self._restore()
            with torch.inference_mode():
                was_reset = _has(env, "reset")
                obs = (env.reset() if was_reset else env.get_observations()).to(device)
                policy.reset()
                n = env.num_envs
                running = torch.zeros(n, dtype=torch.float64, device=device)
                resolved = False

                def step(obs):
                    nonlocal resolved
                    obs, rewards, dones, extras = env.step(act(policy, obs).to(env.device))
                    obs, dones = obs.to(device), dones.to(device).reshape(-1).bool()
                    policy.reset(dones)
                    running.add_(rewards.to(device).reshape(-1).double())
                    if not resolved:
                        self._resolve_keys(extras.get("log") or {})
                        resolved = True
                    return obs, dones, extras

                if settle and not was_reset:  # no reset(): run until every env has started a new episode
                    started = torch.zeros(n, dtype=torch.bool, device=device)
                    for _ in range(self.max_episode_length):
                        obs, dones, _ = step(obs)
                        running.masked_fill_(dones, 0.0)
                        started |= dones
                        if bool(started.all()):
                            break
                ended = torch.zeros(n, dtype=torch.bool, device=device)
                ended_sum = torch.zeros((), dtype=torch.float64, device=device)
                ended_count = torch.zeros((), dtype=torch.float64, device=device)
                sums: dict[str, torch.Tensor] = {}
                counts: dict[str, torch.Tensor] = {}
                for t in range(total_steps):
                    obs, dones, extras = step(obs)
                    ended_sum += (running * dones).sum()
                    ended_count += dones.sum()
                    ended |= dones
                    running.masked_fill_(dones, 0.0)
                    if t >= total_steps - self.num_steps:
                        log = extras.get("log") or {}
                        for name, key in self._keys.items():
                            v = torch.as_tensor(log[key], device=device).double().mean()
                            finite = torch.isfinite(v)
                            sums[name] = sums.get(name, 0.0) + torch.where(finite, v, 0.0)
                            counts[name] = counts.get(name, 0.0) + finite.double()
                open_sum = running.masked_fill(ended, 0.0).sum()
                episodes = float(ended_count + (~ended).sum())
                out = {"return": float(ended_sum + open_sum) / episodes}
                for name in self._keys:
                    count = float(counts.get(name, 0.0))
                    out[name] = float(sums[name]) / count if count > 0 else math.nan
        finally:
            set_rng_states(rng)
            policy.train(was_training)
            policy.reset(hidden_state=hidden)  # the training rollout's recurrent state (None: none)
        return {m: out[m] for m in self.metrics}

    def _resolve_keys(self, log: dict) -> None:
        """Map each task metric to its ``extras["log"]`` key; ConfigError listing the available names if absent."""
        missing = []
        for name in self.metrics:
            if name == "return":
                continue
            key = find_log_key(log.keys(), name)
            if key is None:
                missing.append(name)
            else:
                self._keys[name] = key
        if missing:
            names = sorted({"return"} | {k.strip("/") for k in log} | {k.strip("/").rsplit("/", 1)[-1] for k in log})
            raise ConfigError(f"{self.setting}: {type(self.env).__name__} reports no metric "
                              f"{', '.join(repr(m) for m in missing)}; available: {', '.join(names)}.")


def _has(obj, name: str) -> bool:
    """Whether ``obj`` has a method ``name`` (an optional part of an env beyond the VecEnv contract)."""
    return obj is not None and callable(getattr(obj, name, None))
