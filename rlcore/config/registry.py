"""The one table of names that configs use for classes: ``class_name: PPO``, ``extension=[rnd]``, ...

Each :class:`Entry` says what a name builds (an import path, imported on first use, so that this low-level
module imports nothing of rlcore's higher layers), which typed config checks its settings (a dataclass of
:mod:`rlcore.config.schema`), and the few facts about it that the config checks and the train
translation need (which runner trains an algorithm, whether it takes extensions, ...). The factory
(``resolve_callable``), the config checks, the Hydra defaults nodes and ``docs/config.md`` all read it.

To add a model, algorithm, distribution or extension: add its entry here and its typed config in
``config_schema.py``; ``python -m rlcore.config.doc > docs/config.md`` then documents it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from rlcore.errors import ConfigError

KINDS = ("algorithm", "model", "distribution", "extension", "runner")
"""The kinds of entry, in the order of ``docs/config.md``."""


@dataclass(frozen=True)
class Entry:
    """One name a config can use, and what it stands for."""

    kind: str  # one of KINDS
    name: str  # the ``class_name`` a config gives (an extension: its key, ``extension=[<name>]``)
    target: str  # "package.module:Class" that the name builds, imported on first use
    schema: str | None = None  # its typed config: a dataclass name in rlcore.config.schema (None: unchecked)
    aliases: tuple[str, ...] = ()  # other accepted names (rsl_rl 4.x class names, short names)
    runner: str | None = None  # algorithm: the name of the runner that trains it
    models: tuple[str, ...] = ()  # algorithm: the train-config keys that model.actor, model.critic fill, in order
    takes_extensions: bool = True  # algorithm: whether extension=[...] may be combined with it
    uses_teacher: bool = False  # algorithm: trains from a teacher checkpoint (teacher=<path>)
    cfg_key: str | None = None  # extension: its key in the algorithm's config (rsl_rl's name)
    feed_forward_only: bool = False  # extension: refuses recurrent models
    task_key: str | None = None  # extension: the task setting it needs (e.g. task.symmetry_function) ...
    task_arg: str | None = None  # ... and the argument of its config that the setting fills

    def load(self) -> type:
        """The class this entry names (imported now)."""
        module, _, attr = self.target.partition(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def config_class(self) -> type | None:
        """The typed config (dataclass) of this entry's settings, or None."""
        if self.schema is None:
            return None
        return getattr(importlib.import_module("rlcore.config.schema"), self.schema)


ENTRIES: tuple[Entry, ...] = (
    Entry("algorithm", "PPO", "rlcore.algorithms:PPO", "PPOCfg", runner="OnPolicyRunner",
          models=("actor", "critic")),
    Entry("algorithm", "Distillation", "rlcore.algorithms:Distillation", "DistillationCfg",
          runner="DistillationRunner", models=("student",), takes_extensions=False, uses_teacher=True),
    Entry("model", "MLPModel", "rlcore.models:MLPModel", "MLPModelCfg", aliases=("ActorCritic",)),
    Entry("model", "RNNModel", "rlcore.models:RNNModel", "RNNModelCfg", aliases=("ActorCriticRecurrent",)),
    Entry("model", "CNNModel", "rlcore.models:CNNModel", "CNNModelCfg", aliases=("ActorCriticCNN",)),
    Entry("distribution", "GaussianDistribution", "rlcore.modules.distribution:GaussianDistribution",
          "GaussianDistributionCfg", aliases=("gaussian",)),
    Entry("distribution", "HeteroscedasticGaussianDistribution",
          "rlcore.modules.distribution:HeteroscedasticGaussianDistribution",
          "HeteroscedasticGaussianDistributionCfg", aliases=("heteroscedastic_gaussian",)),
    Entry("distribution", "BetaDistribution", "rlcore.modules.distribution:BetaDistribution", "BetaDistributionCfg",
          aliases=("beta",)),
    Entry("extension", "rnd", "rlcore.extensions.rnd:RandomNetworkDistillation", "RNDCfg", cfg_key="rnd_cfg"),
    Entry("extension", "symmetry", "rlcore.extensions.symmetry:Symmetry", "SymmetryCfg", cfg_key="symmetry_cfg",
          feed_forward_only=True, task_key="symmetry_function", task_arg="data_augmentation_func"),
    Entry("runner", "OnPolicyRunner", "rlcore.runners:OnPolicyRunner"),
    Entry("runner", "DistillationRunner", "rlcore.runners:DistillationRunner"),
)


def entries(kind: str) -> list[Entry]:
    """The entries of one kind, in table order."""
    if kind not in KINDS:
        raise ConfigError(f"unknown registry kind '{kind}'; valid: {', '.join(KINDS)}.")
    return [e for e in ENTRIES if e.kind == kind]


def names(kind: str) -> list[str]:
    """The primary names of one kind, sorted (what error messages list as valid)."""
    return sorted(e.name for e in entries(kind))


CASE_INSENSITIVE_KINDS = ("distribution",)
"""Kinds whose names match in any case (``gaussian``, ``Gaussian``), as ``rlcore.modules.distribution`` accepts them."""


def find(name: str, kinds: tuple[str, ...] = KINDS) -> Entry | None:
    """The entry called ``name`` (or one of its aliases) among ``kinds``, None when no entry matches."""
    candidates = [e for e in ENTRIES if e.kind in kinds]
    for entry in candidates:
        if name == entry.name or name in entry.aliases:
            return entry
    folded = name.lower()
    for entry in candidates:
        if entry.kind in CASE_INSENSITIVE_KINDS and folded in (entry.name.lower(), *(a.lower() for a in entry.aliases)):
            return entry
    return None


def get(kind: str, name: str) -> Entry:
    """The entry of ``kind`` called ``name``.

    Raises:
        ConfigError: no such entry (the message lists the valid names).
    """
    entry = find(name, (kind,))
    if entry is None:
        raise ConfigError(f"unknown {kind} '{name}'; valid: {', '.join(names(kind))}.")
    return entry


def is_path(name: str) -> bool:
    """Whether ``name`` is an import path (a user's own class: ``package.module:Class``), not a registered name."""
    return ":" in name or "." in name


def algorithm_traits(class_name: str) -> Entry:
    """The entry of a registered algorithm; a user's own class (an import path) is planned like PPO (actor,
    critic, extensions, OnPolicyRunner)."""
    if is_path(class_name):
        return get("algorithm", "PPO")
    return get("algorithm", class_name)


CLASS_KINDS = ("algorithm", "model", "distribution", "runner")
"""Kinds whose names are ``class_name`` values (an extension is named by its key instead)."""

__all__ = ["CLASS_KINDS", "ENTRIES", "KINDS", "Entry", "algorithm_traits", "entries", "find", "get", "is_path", "names"]
