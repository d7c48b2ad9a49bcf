"""mjlab tasks as rlcore ``VecEnv``s: ``python -m rlcore.train task=mjlab task.id=Mjlab-Velocity-Flat-Unitree-Go1``.

`mjlab <https://github.com/mujocolab/mjlab>`_ (Isaac Lab's manager-based API on MuJoCo Warp) builds its envs as
``ManagerBasedRlEnv`` and hands them to rsl_rl through its ``RslRlVecEnvWrapper``, which already satisfies rlcore's
:class:`~rlcore.env.VecEnv` contract (observation groups as a ``TensorDict``, ``extras["time_outs"]`` and
``extras["log"]``). :func:`make_mjlab_env` does what mjlab's own ``train`` command does up to the runner: the
task's registered env config, ``num_envs`` and ``seed`` set, settings overridden, the env on ``device`` (Warp's
CPU device for ``cpu``), wrapped. rlcore's CLI, logging, report, ``keep_best`` and export then run on it.

mjlab is imported here on use only (rlcore does not depend on it); it pins its own MuJoCo and MuJoCo Warp, so it
usually lives in an environment of its own: ``pip install torch==2.13.0 mjlab==1.6.0 && pip install -e <rlcore>``
(docs/rsl_rl.md: "Inside mjlab").
"""

from __future__ import annotations

import os
from typing import Any

from rlcore.env.vec_env import VecEnv
from rlcore.errors import ConfigError


def _mjlab():
    os.environ.setdefault("WANDB_MODE", "disabled")  # mjlab's modules import wandb; rlcore logs on its own
    try:
        import mjlab.tasks  # noqa: F401  (fills mjlab's task registry)
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.rl import RslRlVecEnvWrapper
        from mjlab.tasks.registry import list_tasks, load_env_cfg
    except ImportError as err:
        raise ConfigError(f"task=mjlab needs mjlab ({err.name} is not importable): pip install mjlab, in an "
                          "environment of its own (it pins its MuJoCo; docs/rsl_rl.md)") from None
    return ManagerBasedRlEnv, RslRlVecEnvWrapper, list_tasks, load_env_cfg


def apply_settings(cfg: Any, settings: dict, where: str = "task.env.settings") -> None:
    """Set nested ``settings`` (``{"episode_length_s": 10, "scene": {"env_spacing": 3}}``) on mjlab's config
    dataclasses (dict-valued fields, such as its managers' terms, take keys); an unknown name is a ConfigError."""
    for key, value in settings.items():
        here = f"{where}.{key}"
        if isinstance(cfg, dict):
            if key not in cfg:
                raise ConfigError(f"{here}: no such entry; valid: {', '.join(map(str, cfg))}")
            current = cfg[key]
        elif hasattr(cfg, key):
            current = getattr(cfg, key)
        else:
            valid = [n for n in dir(cfg) if not n.startswith("_") and not callable(getattr(cfg, n))]
            raise ConfigError(f"{here}: no such setting of {type(cfg).__name__}; valid: {', '.join(valid)}")
        if isinstance(value, dict) and current is not None and not isinstance(current, (int, float, str, bool)):
            apply_settings(current, value, here)
        elif isinstance(cfg, dict):
            cfg[key] = value
        else:
            setattr(cfg, key, type(current)(value) if isinstance(current, tuple) else value)


def make_mjlab_env(task_id: str | None = None, num_envs: int = 1, device: str = "cpu", seed: int | None = 0,
                   clip_actions: float | None = None, settings: dict | None = None) -> VecEnv:
    """The mjlab task ``task_id`` with ``num_envs`` envs on ``device``, wrapped for rsl_rl-style runners.

    Args:
        task_id: a registered mjlab task, e.g. ``Mjlab-Velocity-Flat-Unitree-Go1`` (an unknown one lists the valid).
        clip_actions: the wrapper's action clip (None: mjlab's default, none).
        settings: nested overrides of the task's env config (:func:`apply_settings`).
    """
    env_cls, wrapper, list_tasks, load_env_cfg = _mjlab()
    valid = list_tasks()
    if task_id not in valid:
        raise ConfigError(f"task.id={task_id!r} is not an mjlab task; valid: {', '.join(valid)}")
    cfg = load_env_cfg(task_id)
    cfg.scene.num_envs = int(num_envs)
    cfg.seed = 0 if seed is None else int(seed)
    apply_settings(cfg, settings or {})
    env = env_cls(cfg=cfg, device=str(device))
    return wrapper(env, clip_actions=clip_actions)


__all__ = ["apply_settings", "make_mjlab_env"]
