"""Checking a composed train config against the typed configs (``rlcore.config.schema``).

:func:`validate_config` checks the composed, resolved config section by section (``OmegaConf.structured`` +
merge), so that a wrong type or an unknown key fails at start-up with its key path, e.g.
``runner.max_iterations: Value 'abc' of type 'str' could not be converted to Integer``; then it checks, once
each, the rules that span sections, as the registry (``rlcore.config.registry``) declares them: an algorithm
that takes no extensions or uses a teacher, an extension that needs a feed-forward model or a task setting.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlcore.config import registry
from rlcore.config.schema import (
    DistillationCfg,
    ExplorationCfg,
    LoggerCfg,
    PPOCfg,
    RunnerCfg,
    TaskCfg,
    TopLevelCfg,
)
from rlcore.errors import ConfigError


# ============================================================================ one section
def check_against(data: Any, schema: type, path: str, closed: bool = True) -> dict:
    """``data`` merged onto ``schema``'s defaults, type-checked; returns a plain dict (enums as strings).

    Args:
        data: the section (a mapping).
        schema: its dataclass.
        path: the section's key path, used in messages (``"runner"``, ``"model.actor"``).
        closed: unknown keys are errors (else they are kept unchecked).

    Raises:
        ConfigError: naming the key path of the first wrong value or unknown key.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {data!r}.")
    known = {f.name for f in fields(schema)}
    extra = {k: v for k, v in data.items() if k not in known}
    if extra and closed:
        key = sorted(extra)[0]
        owner = data.get("class_name") or schema.__name__.removesuffix("Cfg")
        raise ConfigError(f"{_join(path, key)}: unknown key for {owner}; valid keys: {', '.join(sorted(known))}.")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), {k: v for k, v in data.items() if k in known})
        out = OmegaConf.to_container(merged, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{_join(path, str(getattr(err, 'full_key', '') or ''))}: {_first_line(err)}.") from None
    for name, value in out.items():
        if value == MISSING:
            raise ConfigError(f"{_join(path, name)}: required, but not set.")
    out.update(copy.deepcopy(extra))
    return out


def _join(path: str, key: str) -> str:
    if not key:
        return path
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}" if path else key


def _first_line(err: Exception) -> str:
    msg = getattr(err, "msg", None) or str(err)
    return str(msg).strip().splitlines()[0].rstrip(".")


def _check_positive(section: dict, path: str, keys: tuple[str, ...], minimum: int = 1) -> None:
    for key in keys:
        value = section.get(key)
        if value is not None and value < minimum:
            raise ConfigError(f"{_join(path, key)}: must be >= {minimum}, got {value}.")


def _check_bound(section: dict, path: str, key: str, low: float, high: float | None = None,
                 low_open: bool = False) -> None:
    """``section[key]`` (when set) within ``[low, high]``, or ``(low, high]`` with ``low_open``."""
    value = section.get(key)
    if value is None:
        return
    if (value <= low if low_open else value < low) or (high is not None and value > high):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        if high is not None:
            bound = f"in {'(' if low_open else '['}{low:g}, {high:g}]"
        raise ConfigError(f"{_join(path, key)}: must be {bound}, got {value}.")


def _check_choice(section: dict, path: str, key: str, valid: list[str]) -> None:
    value = section.get(key)
    if value is not None and str(value).lower() not in valid:
        raise ConfigError(f"{path}.{key}: unknown value {value!r}; valid: {', '.join(valid)}.")


def _activations() -> list[str]:
    from rlcore.modules.activation import ACTIVATIONS  # imports torch: only when a section names an activation

    return sorted(ACTIVATIONS)


def _optimizers() -> list[str]:
    from rlcore.utils.optimizer import OPTIMIZERS  # imports torch

    return sorted(OPTIMIZERS)


# ============================================================================ models, algorithms, extensions
def _check_distribution(dist: dict, path: str) -> dict:
    """A model's ``distribution_cfg`` checked against its distribution's typed config (user classes as given)."""
    name = dist.get("class_name")
    if isinstance(name, str) and registry.is_path(name):
        return dist  # a user's own distribution: its constructor checks its arguments
    entry = registry.find(name, ("distribution",)) if isinstance(name, str) else None
    if entry is None:
        raise ConfigError(f"{path}.class_name: unknown distribution {name!r}; valid: "
                          f"{', '.join(registry.names('distribution'))}.")
    checked = check_against({**dist, "class_name": entry.name}, entry.config_class(), path)
    checked["class_name"] = name
    return checked


def _check_model(data: Any, path: str, with_distribution: bool) -> dict:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of model settings, got {data!r}.")
    name = data.get("class_name")
    valid = ", ".join(registry.names("model"))
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.class_name: required (choose a model group: model=mlp|cnn|rnn, or set it to one of "
                          f"{valid} or a 'package.module:Class' path).")
    if registry.is_path(name):
        return copy.deepcopy(data)  # a user's own model class: its constructor checks its arguments
    entry = registry.find(name, ("model",))
    if entry is None:
        raise ConfigError(f"{path}.class_name: unknown model '{name}'; valid: {valid}, or a 'package.module:Class' "
                          "path.")
    out = check_against(data, entry.config_class(), path)
    if any(int(h) < 1 and int(h) != -1 for h in out["hidden_dims"]):
        raise ConfigError(f"{path}.hidden_dims: sizes must be >= 1 (or -1 for the input size), "
                          f"got {out['hidden_dims']}.")
    _check_positive(out, path, ("rnn_hidden_dim", "rnn_num_layers"))
    _check_choice(out, path, "activation", _activations())
    if out.get("distribution_cfg") is not None:
        out["distribution_cfg"] = _check_distribution(out["distribution_cfg"], f"{path}.distribution_cfg")
    elif with_distribution:
        raise ConfigError(f"{path}.distribution_cfg: the policy needs an action distribution, e.g. "
                          "{class_name: GaussianDistribution, init_std: 1.0}.")
    return out


def _check_models(model: Any) -> dict:
    if not isinstance(model, dict):
        raise ConfigError(f"model: expected actor and critic settings, got {model!r}.")
    unknown = sorted(set(model) - {"actor", "critic"})
    if unknown:
        raise ConfigError(f"model.{unknown[0]}: unknown key; a model group holds 'actor' and 'critic'.")
    if "actor" not in model:
        raise ConfigError("model.actor: missing; a model group must define the actor (the student in distillation).")
    out = {"actor": _check_model(model["actor"], "model.actor", with_distribution=True)}
    if model.get("critic") is not None:
        out["critic"] = _check_model(model["critic"], "model.critic", with_distribution=False)
    return out


def _check_algorithm(alg: Any, notices: list[str]) -> dict:
    """The algorithm section; an algorithm's typed config is chosen by ``class_name``. With algorithm=distillation,
    PPO-only keys that a task file sets (``gamma``, ``entropy_coef``, ...) are dropped with a notice."""
    if not isinstance(alg, dict) or not isinstance(alg.get("class_name"), str):
        raise ConfigError("algorithm.class_name: required (PPO or Distillation, or a 'package.module:Class' path).")
    name = alg["class_name"]
    if registry.is_path(name):
        return copy.deepcopy(alg)
    entry = registry.find(name, ("algorithm",))
    if entry is None:
        raise ConfigError(f"algorithm.class_name: unknown algorithm '{name}'; valid: "
                          f"{', '.join(registry.names('algorithm'))}, or a 'package.module:Class' path.")
    schema = entry.config_class()
    alg = _move_exploration_keys(alg, notices)
    if schema is DistillationCfg:
        ppo_only = {f.name for f in fields(PPOCfg)} - {f.name for f in fields(DistillationCfg)}
        dropped = sorted(k for k in alg if k in ppo_only)
        alg = {k: v for k, v in alg.items() if k not in ppo_only}
        if dropped:
            notices.append(f"algorithm=distillation: ignoring PPO-only settings {', '.join(dropped)}")
    out = check_against(alg, schema, "algorithm")
    _check_positive(out, "algorithm", ("num_learning_epochs", "num_mini_batches", "gradient_length"))
    for key in ("learning_rate", "clip_param", "desired_kl", "max_grad_norm"):
        _check_bound(out, "algorithm", key, 0.0, low_open=True)
    for key in ("gamma", "lam"):
        _check_bound(out, "algorithm", key, 0.0, 1.0)
    _check_bound(out, "algorithm", "value_loss_coef", 0.0)
    _check_choice(out, "algorithm", "optimizer", _optimizers())
    return out


def _move_exploration_keys(alg: dict, notices: list[str]) -> dict:
    """The exploration schedule's settings that older configs set directly in ``algorithm`` (``low_noise_fraction``,
    ``std_max_schedule``, ...) moved into ``algorithm.exploration_cfg`` (with a notice)."""
    moved = [f.name for f in fields(ExplorationCfg) if f.name in alg]
    if not moved:
        return alg
    alg = dict(alg)
    exploration = dict(alg.get("exploration_cfg") or {})
    for key in moved:
        if key in exploration:
            raise ConfigError(f"algorithm.{key} and algorithm.exploration_cfg.{key} both given; keep the second.")
        exploration[key] = alg.pop(key)
    alg["exploration_cfg"] = exploration
    notices.append(f"algorithm: {', '.join(moved)} are keys of algorithm.exploration_cfg now; read from there")
    return alg


def _check_extensions(ext: Any) -> dict:
    ext = ext or {}
    if not isinstance(ext, dict):
        raise ConfigError(f"extension: expected a mapping, got {ext!r}; choose extensions with "
                          "extension=[rnd,symmetry].")
    checked = {}
    for key, value in ext.items():
        entry = registry.find(key, ("extension",))
        if entry is None:
            raise ConfigError(f"extension.{key}: unknown extension; valid: {', '.join(registry.names('extension'))}.")
        checked[key] = check_against(value, entry.config_class(), f"extension.{key}")
        _check_choice(checked[key], f"extension.{key}", "activation", _activations())
    return checked


# ============================================================================ rules across sections
def _check_combination(c: dict) -> None:
    """The rules between sections, each checked here once, as the registry declares them."""
    alg = registry.algorithm_traits(c["algorithm"]["class_name"])
    option = f"algorithm={alg.name.lower()}"
    if c["resume"] and c["init_from"]:
        raise ConfigError(f"resume={c['resume']} and init_from={c['init_from']} exclude each other: resume continues "
                          "a run exactly, init_from starts a new run from a checkpoint's weights; keep one.")
    if c["teacher"] and not alg.uses_teacher:
        raise ConfigError(f"teacher={c['teacher']} is only used by algorithm=distillation; add algorithm=distillation "
                          "or drop teacher=.")
    if c["extension"] and not alg.takes_extensions:
        raise ConfigError(f"{option} does not support extensions ({', '.join(sorted(c['extension']))}); "
                          f"drop extension=... or use algorithm=ppo.")
    for part, role in zip(("actor", "critic"), alg.models):
        if part not in c["model"]:
            raise ConfigError(f"model.{part}: missing; {alg.name} needs a {role} model (model=mlp|cnn|rnn define one).")
    for key, settings in c["extension"].items():
        _check_extension_needs(registry.get("extension", key), settings, c, alg)


def _check_extension_needs(ext: registry.Entry, settings: dict, c: dict, alg: registry.Entry) -> None:
    """What an extension needs from the task and the models (its registry entry says which)."""
    if ext.task_key and not c["task"].get(ext.task_key):
        raise ConfigError(f"extension={ext.name} needs a mirror function, but task={c['task']['name']} defines no "
                          f"task.{ext.task_key}.")
    if ext.feed_forward_only:
        from rlcore.config.resolve import resolve_callable  # imports the model classes (torch)

        for part in ("actor", "critic")[:len(alg.models)]:
            name = c["model"][part].get("class_name")
            if getattr(resolve_callable(name), "is_recurrent", False):
                raise ConfigError(f"extension={ext.name} does not support recurrent models (model.{part} is {name}); "
                                  f"use a feed-forward model (model=mlp or model=cnn) with extension={ext.name}.")
    if ext.name == "symmetry" and not (settings["use_data_augmentation"] or settings["use_mirror_loss"]):
        raise ConfigError("extension=symmetry with extension.symmetry.use_data_augmentation=false and "
                          "use_mirror_loss=false does nothing; enable one or drop the extension.")


# ============================================================================ the whole config
def validate_config(cfg: dict) -> tuple[dict, list[str]]:
    """Check a composed, resolved Hydra config (a plain dict) and return ``(typed config, notices)``.

    The returned dict has every typed section filled with its defaults and converted to its declared
    types. With ``algorithm=distillation``, PPO-only algorithm keys that a task file sets (``gamma``,
    ``entropy_coef``, ...) are dropped with a notice instead of being rejected.

    Raises:
        ConfigError: one line naming the key path (or the two settings that do not go together).
    """
    out = copy.deepcopy(cfg)
    notices: list[str] = []
    top = {f.name for f in fields(TopLevelCfg)}
    out.update(check_against({k: v for k, v in cfg.items() if k in top}, TopLevelCfg, ""))
    _check_positive(out, "", ("threads",))
    for group in ("task", "model", "algorithm", "runner", "logger"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"{group}: missing from the config (choose one with {group}=<option>).")

    out["runner"] = check_against(cfg["runner"], RunnerCfg, "runner")
    _check_positive(out["runner"], "runner", ("num_steps_per_env", "save_interval", "log_interval"))
    _check_positive(out["runner"], "runner", ("max_iterations", "normalizer_warmup_steps"), minimum=0)
    out["logger"] = check_against(cfg["logger"], LoggerCfg, "logger")
    task = check_against(cfg["task"], TaskCfg, "task", closed=False)
    _check_positive(task, "task", ("num_envs",))
    task["env"] = task.get("env") or {}
    out["task"] = task
    out["algorithm"] = _check_algorithm(cfg["algorithm"], notices)
    out["model"] = _check_models(cfg["model"])
    out["extension"] = _check_extensions(cfg.get("extension"))
    _check_combination(out)
    return out, notices


__all__ = ["check_against", "validate_config"]
