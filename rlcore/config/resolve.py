"""Resolve the rsl_rl-style nested train config: ``class_name`` keys and observation sets."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from tensordict import TensorDict

from rlcore.config import registry
from rlcore.errors import ConfigError

_SEARCHED_PACKAGES = ("algorithms", "models", "modules", "runners", "storage", "extensions", "utils", "env")
"""Where a simple name that is not a known short name is looked up (``rlcore.<package>.<name>``), like rsl_rl."""


def resolve_callable(callable_or_name: type | Callable | str) -> Callable:
    """A class or function from itself, a short name, or an import path.

    Accepted forms: a callable (returned as is); a known short name (``"PPO"``, ``"MLPModel"``, rsl_rl 4.x
    aliases such as ``"ActorCritic"``); ``"package.module:Attr.Nested"``; ``"package.module.Attr"``; any other
    simple name exported by one of rlcore's packages (``"GaussianDistribution"``, ``"WandbLogWriter"``).

    Raises:
        ValueError: the name cannot be resolved (the message says why and lists the known short names).
    """
    if callable(callable_or_name):
        return callable_or_name
    name = callable_or_name
    if not isinstance(name, str):
        raise ConfigError(f"Expected a class, a function or a name, got {type(name).__name__} {name!r}.")
    entry = registry.find(name, registry.CLASS_KINDS)  # short names, resolved lazily (lower layers import no higher)
    target = entry.target if entry is not None else name
    if ":" in target:
        module_name, attr = target.split(":", 1)
    elif "." in target:
        module_name, attr = target.rsplit(".", 1)
    else:
        for package in _SEARCHED_PACKAGES:
            module = importlib.import_module(f"rlcore.{package}")
            if name in getattr(module, "__all__", ()):
                return getattr(module, name)
        known = sorted(n for e in registry.ENTRIES if e.kind in registry.CLASS_KINDS for n in (e.name, *e.aliases))
        raise ConfigError(f"Unknown class_name '{name}'. Known names: {', '.join(known)}, "
                         "or give a full 'package.module:Class' path.")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"class_name '{name}' could not be resolved ({err}).") from None


def resolve_class(cfg: Mapping) -> tuple[type, dict]:
    """``(class, kwargs)`` from a config with a ``class_name`` key; ``cfg`` is not modified."""
    cfg = copy.deepcopy(dict(cfg))
    if "class_name" not in cfg:
        raise ConfigError(f"Config {sorted(cfg)} has no 'class_name' key saying which class to build.")
    return resolve_callable(cfg.pop("class_name")), cfg


# Which set a missing observation set falls back to, in order of preference.
_SET_FALLBACKS = {
    "actor": ["policy"],
    "critic": ["actor", "policy"],
    "student": ["actor", "policy"],
    "teacher": ["critic", "actor", "policy"],
    "rnd_state": ["critic", "actor", "policy"],
}

#: Sets whose defaults take only the 1D groups ``[N, D]`` of the set they fall back to.
_FLAT_ONLY_SETS = ("rnd_state",)


def resolve_obs_groups(obs: TensorDict, obs_groups: Mapping | None, default_sets: list[str]) -> dict[str, list[str]]:
    """Complete ``obs_groups`` with defaults for the sets an algorithm needs (``default_sets``); check every group.

    A missing set is filled, with a printed notice, by the first that applies: an env group with the
    set's own name (rsl_rl's rule: an env group ``critic`` feeds the critic); then another set —
    critic and student take the actor's, teacher and rnd_state the critic's, else the actor's (rnd_state
    only their 1D groups: RND reads flat states); then the env group ``policy``. ``"policy"`` is also accepted as the legacy name of the actor set.

    Raises:
        ValueError: a set lists no groups or a group the environment does not provide (names it and
            lists the available groups), or a required set cannot be defaulted.
    """
    available = list(obs.keys())
    resolved: dict[str, list[str]] = {}
    for name, groups in dict(obs_groups or {}).items():
        groups = [groups] if isinstance(groups, str) else list(groups)
        if not groups:
            raise ConfigError(f"obs_groups['{name}'] is an empty list; give at least one observation group "
                             f"from: {', '.join(available)}.")
        for g in groups:
            if g not in available:
                raise ConfigError(
                    f"obs_groups['{name}'] uses observation group '{g}', which the environment does not provide; "
                    f"available groups: {', '.join(available)}."
                )
        resolved[name] = groups
    for name in default_sets:
        if name in resolved:
            continue
        if name in available:
            resolved[name] = [name]
            print(f"[rlcore] obs_groups: no '{name}' set given, using the environment's '{name}' group")
            continue
        for fallback in _SET_FALLBACKS.get(name, ["policy"]):
            if fallback in resolved:
                groups = list(resolved[fallback])
                if name in _FLAT_ONLY_SETS:  # RND's networks are MLPs: leave the 2D (image) groups out
                    groups = [g for g in groups if obs[g].dim() == 2]
                    if not groups:
                        continue
                resolved[name] = groups
                print(f"[rlcore] obs_groups: no '{name}' set given, using the '{fallback}' set: {resolved[name]}")
                break
            if fallback == "policy" and fallback in available:
                resolved[name] = [fallback]
                print(f"[rlcore] obs_groups: no '{name}' set given, using observation group 'policy'")
                break
        if name not in resolved:
            raise ConfigError(
                f"obs_groups has no '{name}' set and no default applies; give obs_groups['{name}'] as a list of "
                f"observation groups from: {', '.join(available)}."
            )
    return resolved


def get_param(param: Any, idx: int) -> Any:
    """The ``idx``-th entry of a per-layer setting given as a list or tuple, or the setting itself if it is scalar.

    E.g. ``get_param([3, 5], 1) == 5`` and ``get_param(3, 1) == 3`` (one kernel size for every layer).
    """
    return param[idx] if isinstance(param, (list, tuple)) else param
