"""The task protocol: what a task supplies to rlcore's tools, and the registry that finds tasks by name.

rlcore never imports a task. A task package describes itself with a :class:`TaskSpec` (how to build its env, and
the optional task-specific parts that rlcore's tools use) and makes it known in one of two ways:

- an entry point in the ``rlcore.tasks`` group of its package metadata, e.g. in ``pyproject.toml``::

      [project.entry-points."rlcore.tasks"]
      my_robot = "my_package.task:TASKS"      # a TaskSpec, or a list of them

  The registry loads these entry points the first time a task is looked up (:func:`get_task`, :func:`make_task`,
  :func:`list_tasks`); installing the package (``pip install -e .``) is all it takes;
- :func:`register_task` at import time of a module, with the task config's ``task.module`` naming that module
  (``python -m rlcore.train task=my_robot +task.module=my_package.task``), for a task that is not installed.

The task-specific parts a spec may carry, each optional (a tool that needs a missing one says so in one line):

=======================  =========================================================================================
``pretrained``           policies shipped with the task (:class:`Pretrained`): ``play pretrained=<name>``
``env_from_interface``   env settings that rebuild the task from an exported file's deployment interface:
                         ``play onnx=<file>`` without a checkpoint, ``pretrained=``
``robustness``           a function returning the robustness grid, its probe commands and the env that runs it
                         (:class:`RobustnessSuite`; called on use, so that listing tasks loads no simulator):
                         ``python -m rlcore.robustness``
``viewer_env``           env settings of the keyboard-driven viewer (one robot, commands set by hand):
                         ``play viewer=true``
=======================  =========================================================================================

What an *env* may add to the :class:`~rlcore.env.VecEnv` contract (each optional, looked up with ``getattr``):
``deployment_interface()`` (the dict written into an exported file's metadata), ``export_module(policy, **options)``
(the graph to export instead of the policy alone, e.g. the Go2's integral loop on the command; None for the policy
alone), ``curriculum_state()`` / ``load_curriculum_state()``, ``state_dict()`` / ``load_state_dict()``,
``render()``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from rlcore.env.vec_env import VecEnv
from rlcore.errors import ConfigError

#: The entry-point group through which installed packages register their tasks.
ENTRY_POINT_GROUP = "rlcore.tasks"


@dataclass(frozen=True)
class Pretrained:
    """One policy shipped with a task: its exported file, what it is, how it was made and how it measured."""

    path: str  # absolute path of the ONNX file (it carries its deployment interface in its metadata)
    task: str  # the task it was trained on (also in the file's metadata)
    summary: str  # what the policy is
    command: str  # the commands that reproduce it (training, then export)
    robustness: str  # ``python -m rlcore.robustness`` on the file: its last line's figures
    yaw: str = ""  # the same run's yaw figures: reached/commanded yaw rate on the held yaw commands, steps' rise times


@dataclass(frozen=True)
class RobustnessSuite:
    """A task's robustness check (``python -m rlcore.robustness``): robot variants x probe commands, closed loop.

    Attributes:
        grid: the variants, in report order; each has a ``name`` (one is ``"nominal"``).
        probe_commands: ``(name, command)`` held from the start, or ``(name, command, from_rest_s)``: a step from
            rest (zero command for ``from_rest_s`` seconds, then ``command``); every variant runs every command.
        make_env: ``make_env(interface, num_envs, episode_s=, threads=, solver_iterations=[, overrides=])``: the
            task rebuilt from an exported file's deployment interface (``overrides``: settings merged over it), with
            ``assign_variants(variants, env_variant)`` and a writable ``commands [N, C]`` tensor; a ConfigError when
            the interface describes something else.
        describe: ``describe(variant) -> str``: what a variant changes, for the report.
    """

    grid: Sequence[Any]
    probe_commands: Sequence[tuple[str, tuple[float, ...]] | tuple[str, tuple[float, ...], float]]
    make_env: Callable[..., VecEnv]
    describe: Callable[[Any], str]


@dataclass(frozen=True)
class TaskSpec:
    """A task, as rlcore's tools see it (see the module docstring for each part).

    Attributes:
        name: its name on the command line (``task=<name>``) and in checkpoints.
        make_env: ``make_env(num_envs=, device=, seed=, **env_settings) -> VecEnv``.
        summary: one line for listings.
    """

    name: str
    make_env: Callable[..., VecEnv]
    summary: str = ""
    pretrained: Mapping[str, Pretrained] = field(default_factory=dict)
    env_from_interface: Callable[[dict], dict] | None = None
    robustness: Callable[[], RobustnessSuite] | None = None  # called on use: a grid may need the simulator
    viewer_env: Mapping[str, Any] | None = None


class UnknownTaskError(ConfigError, KeyError):
    """Raised for a task name that no registered task has (catchable as either base)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


_REGISTRY: dict[str, TaskSpec] = {}
_entry_points_loaded = False
#: Entry-point name -> why that task plugin was skipped (:func:`load_entry_points`).
_BROKEN_PLUGINS: dict[str, str] = {}


def register_task(task: TaskSpec | str, factory: Callable[..., VecEnv] | None = None, *,
                  overwrite: bool = False) -> TaskSpec:
    """Register a :class:`TaskSpec` (or ``name, factory``: a spec with only its env); returns the spec.

    Re-registering a name needs ``overwrite=True``, except for the very same spec (a module imported twice)."""
    spec = task if isinstance(task, TaskSpec) else TaskSpec(name=str(task), make_env=factory)
    if spec.make_env is None:
        raise ValueError(f"task {spec.name!r}: give a factory (make_env) that builds its env")
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec and not overwrite:
        raise ValueError(f"task {spec.name!r} is already registered (pass overwrite=True to replace it)")
    _REGISTRY[spec.name] = spec
    return spec


def load_entry_points() -> None:
    """Register the tasks of every installed package's ``rlcore.tasks`` entry points (once per process).

    One broken plugin must not hide the others: an entry point that does not load (its module fails to import) or
    gives no :class:`TaskSpec` is skipped, named in one line on stderr, and remembered, so that asking for one of
    its tasks says why it is missing (:func:`get_task`); every other task stays usable.
    """
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
        except Exception as err:  # the plugin's own error (an import that fails, a name it lacks), not rlcore's
            _skip_plugin(ep, f"does not load: {type(err).__name__}: {' '.join(str(err).split())[:200]}")
            continue
        specs = list(loaded) if isinstance(loaded, list | tuple) else [loaded]
        wrong = next((s for s in specs if not isinstance(s, TaskSpec)), None)
        if wrong is not None:
            _skip_plugin(ep, f"gives a {type(wrong).__name__}, not a rlcore.env.task.TaskSpec (or a list of them)")
            continue
        for spec in specs:
            _REGISTRY.setdefault(spec.name, spec)  # a task registered explicitly (register_task) wins


def _skip_plugin(ep: metadata.EntryPoint, why: str) -> None:
    """Leave out a broken task plugin: remember why (for :func:`get_task`'s error) and say so once, on rank 0."""
    line = f"task entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) {why}"
    _BROKEN_PLUGINS[ep.name] = line
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun every rank loads the plugins; one reports
        print(f"[rlcore] skipped: {line}; its tasks are unavailable, the others are not affected.", file=sys.stderr,
              flush=True)


def import_task_module(module: str | None) -> None:
    """Import ``module`` (a task config's ``task.module``), whose import registers a task; nothing for None."""
    if not module:
        return
    try:
        importlib.import_module(str(module))
    except ImportError as err:
        raise ConfigError(f"task.module={module}: cannot import it ({err}).") from None


def list_tasks() -> list[str]:
    """Sorted names of the registered tasks (entry points included)."""
    load_entry_points()
    return sorted(_REGISTRY)


def get_task(name: str) -> TaskSpec:
    """The registered task ``name``; an :class:`UnknownTaskError` listing the registered ones otherwise."""
    if name not in _REGISTRY:
        load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        hint = "" if _REGISTRY.keys() - {"gym"} else (
            f" (no task package is installed: tasks register through the {ENTRY_POINT_GROUP!r} entry point, e.g. "
            "pip install -e . in rlcore's checkout)")
        if _BROKEN_PLUGINS:  # the task may be one of theirs
            hint += "; skipped, " + "; ".join(_BROKEN_PLUGINS.values())
        raise UnknownTaskError(f"unknown task {name!r}; registered tasks: {', '.join(list_tasks())}{hint}") from None


def make_task(name: str, module: str | None = None, **kwargs: Any) -> VecEnv:
    """Build the env of task ``name``, passing ``kwargs`` (num_envs, device, seed, env settings) through; ``module``
    (a task config's ``task.module``) is imported first, so that a task it registers can be found."""
    import_task_module(module)
    return get_task(name).make_env(**kwargs)


def shipped_policies(task: str | None = None) -> dict[str, Pretrained]:
    """Name -> shipped policy, of ``task`` when given, else of every registered task."""
    specs = [get_task(task)] if task else [get_task(t) for t in list_tasks()]
    return {n: p for s in specs for n, p in s.pretrained.items()}


def find_pretrained(name: str, task: str | None = None) -> Pretrained:
    """The shipped policy ``name`` (of ``task`` when given, else of any registered task); a ConfigError listing the
    shipped names otherwise."""
    shipped = shipped_policies(task)
    if name not in shipped:
        where = f" for task {task}" if task else ""
        raise ConfigError(f"pretrained={name}: no such policy{where}; shipped: {', '.join(sorted(shipped)) or 'none'}.")
    if not os.path.isfile(shipped[name].path):
        raise ConfigError(f"pretrained={name}: its file {shipped[name].path} is missing from the installed task "
                          "package; reinstall it.")
    return shipped[name]


def tasks_with(part: str) -> list[str]:
    """Names of the registered tasks that supply ``part`` (e.g. ``"robustness"``), for one-line errors."""
    return [n for n in list_tasks() if getattr(_REGISTRY[n], part)]


# ---------------------------------------------------------------------------- built into rlcore itself
def _make_gym(env_id: str = "Pendulum-v1", **kwargs: Any) -> VecEnv:
    """Any registered Gymnasium id (``task=gym env_id=<id> num_envs=<n>``); kwargs go to ``GymnasiumVecEnv.make``."""
    from rlcore.env.gymnasium import GymnasiumVecEnv

    return GymnasiumVecEnv.make(env_id, **kwargs)


register_task(TaskSpec(name="gym", make_env=_make_gym, summary="any Gymnasium id through rlcore's adapter"))


def _make_mjlab(task_id: str | None = None, **kwargs: Any) -> VecEnv:
    """Any registered mjlab task (``task=mjlab task.id=<id>``); kwargs go to ``make_mjlab_env``."""
    from rlcore.env.mjlab import make_mjlab_env

    return make_mjlab_env(task_id, **kwargs)


register_task(TaskSpec(name="mjlab", make_env=_make_mjlab, summary="any mjlab task (MuJoCo Warp) through its wrapper"))
