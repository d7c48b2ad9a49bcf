"""Resolve the rsl_rl-style nested train config: ``class_name`` keys and observation sets."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping

from tensordict import TensorDict

# Short names accepted for ``class_name``, resolved lazily so that lower layers do not import higher ones.
_KNOWN_CLASSES = {
    "MLPModel": "rlcore.models:MLPModel",
    "CNNModel": "rlcore.models:CNNModel",
    "RNNModel": "rlcore.models:RNNModel",
    "PPO": "rlcore.algorithms:PPO",
    "Distillation": "rlcore.algorithms:Distillation",
    "OnPolicyRunner": "rlcore.runners:OnPolicyRunner",
    "DistillationRunner": "rlcore.runners:DistillationRunner",
    # rsl_rl 4.x names, accepted for old configs
    "ActorCritic": "rlcore.models:MLPModel",
    "ActorCriticRecurrent": "rlcore.models:RNNModel",
    "ActorCriticCNN": "rlcore.models:CNNModel",
}


def resolve_callable(name: str | type):
    """A class from a short name (``"PPO"``), a ``"module:Class"`` or ``"module.Class"`` path, or a class."""
    if not isinstance(name, str):
        return name
    target = _KNOWN_CLASSES.get(name, name)
    if ":" in target:
        module_name, attr = target.split(":", 1)
    elif "." in target:
        module_name, attr = target.rsplit(".", 1)
    else:
        raise ValueError(f"Unknown class_name '{name}'. Known names: {', '.join(sorted(_KNOWN_CLASSES))}, "
                         "or give a full 'package.module:Class' path.")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"class_name '{name}' could not be resolved ({err}).") from None


def resolve_class(cfg: Mapping) -> tuple[type, dict]:
    """``(class, kwargs)`` from a config with a ``class_name`` key; ``cfg`` is not modified."""
    cfg = copy.deepcopy(dict(cfg))
    if "class_name" not in cfg:
        raise ValueError(f"Config {sorted(cfg)} has no 'class_name' key saying which class to build.")
    return resolve_callable(cfg.pop("class_name")), cfg


# Which set a missing observation set falls back to, in order of preference.
_SET_FALLBACKS = {
    "actor": ["policy"],
    "critic": ["actor", "policy"],
    "student": ["actor", "policy"],
    "teacher": ["critic", "actor", "policy"],
    "rnd_state": ["critic", "actor", "policy"],
}


def resolve_obs_groups(obs: TensorDict, obs_groups: Mapping | None, required_sets: list[str]) -> dict[str, list[str]]:
    """Complete ``obs_groups`` with defaults for ``required_sets`` and check every group exists.

    A missing set is filled, with a printed notice, by the first that applies: an env group with the
    set's own name (rsl_rl's rule: an env group ``critic`` feeds the critic); then another set —
    critic and student take the actor's, teacher and rnd_state the critic's, else the actor's; then
    the env group ``policy``. ``"policy"`` is also accepted as the legacy name of the actor set.

    Raises:
        ValueError: a set lists no groups or a group the environment does not provide (names it and
            lists the available groups), or a required set cannot be defaulted.
    """
    available = list(obs.keys())
    resolved: dict[str, list[str]] = {}
    for name, groups in dict(obs_groups or {}).items():
        groups = [groups] if isinstance(groups, str) else list(groups)
        if not groups:
            raise ValueError(f"obs_groups['{name}'] is an empty list; give at least one observation group "
                             f"from: {', '.join(available)}.")
        for g in groups:
            if g not in available:
                raise ValueError(
                    f"obs_groups['{name}'] uses observation group '{g}', which the environment does not provide; "
                    f"available groups: {', '.join(available)}."
                )
        resolved[name] = groups
    for name in required_sets:
        if name in resolved:
            continue
        if name in available:
            resolved[name] = [name]
            print(f"[rlcore] obs_groups: no '{name}' set given, using the environment's '{name}' group")
            continue
        for fallback in _SET_FALLBACKS.get(name, ["policy"]):
            if fallback in resolved:
                resolved[name] = list(resolved[fallback])
                print(f"[rlcore] obs_groups: no '{name}' set given, using the '{fallback}' set: {resolved[name]}")
                break
            if fallback == "policy" and fallback in available:
                resolved[name] = [fallback]
                print(f"[rlcore] obs_groups: no '{name}' set given, using observation group 'policy'")
                break
        if name not in resolved:
            raise ValueError(
                f"obs_groups has no '{name}' set and no default applies; give obs_groups['{name}'] as a list of "
                f"observation groups from: {', '.join(available)}."
            )
    return resolved
