"""A training run on disk: its checkpoints, the config that made them, and the policy they hold.

A run directory (``logs/<task>/<date>_<time>/``) holds ``.hydra/config.yaml`` (the composed config, written
by Hydra) and ``model_<it>.pt`` checkpoints, each of which also carries the runner's ``train_cfg`` with a
``task`` entry (name, num_envs, env settings). ``play`` and ``export`` rebuild the task and the policy
from these; ``train`` uses them to refuse, before anything runs, a checkpoint written for another
task or model.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlcore.checkpoint.io import find_checkpoint, load_checkpoint, model_differences, obs_group_differences
from rlcore.config.cli import UserError


@dataclass
class RunInfo:
    """A checkpoint and what it was trained with."""

    checkpoint: str  # the model_<it>.pt file
    ckpt: dict  # its contents (weights_only load)
    train_cfg: dict  # the runner's nested train config stored in it
    task: dict  # name, num_envs, env (+ obs_groups, ... when read from the run's Hydra config)
    run_dir: str  # folder of the checkpoint
    config: dict | None = None  # the run's composed Hydra config (resolved), when found
    config_path: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def algorithm(self) -> str:
        return str((self.train_cfg.get("algorithm") or {}).get("class_name", "PPO"))

    @property
    def policy_set(self) -> str:
        """The observation set the deployed policy reads: ``student`` after distillation, else ``actor``."""
        return "student" if "student" in self.train_cfg else "actor"


def open_checkpoint(path: str, what: str = "checkpoint") -> tuple[str, dict]:
    """``(file, contents)`` of a checkpoint or a run directory's newest checkpoint, with one-line errors.

    ``what`` names the argument in messages (``checkpoint``, ``resume``, ``teacher``).
    """
    if path is None or str(path).strip() == "":
        raise UserError(f"{what}= is empty; give a model_<it>.pt file or a run directory.")
    try:
        file = find_checkpoint(str(path))
    except FileNotFoundError as err:
        raise UserError(f"{what}={path}: {err}") from None
    try:
        ckpt = load_checkpoint(file, map_location="cpu")
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{what}={path}: '{file}' is not a readable rlcore checkpoint ({first}).") from None
    if not isinstance(ckpt, dict) or not any(k.endswith("_state_dict") for k in ckpt):
        raise UserError(f"{what}={path}: '{file}' holds no model weights (not an rlcore checkpoint).")
    return file, ckpt


def find_run_config(checkpoint: str, levels: int = 2) -> str | None:
    """The ``.hydra/config.yaml`` of the run a checkpoint belongs to (its folder or up to ``levels`` above)."""
    folder = os.path.dirname(os.path.abspath(checkpoint))
    for _ in range(levels + 1):
        candidate = os.path.join(folder, ".hydra", "config.yaml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def load_run_config(path: str) -> dict | None:
    """A Hydra ``config.yaml`` resolved to a plain dict (None if it cannot be read or resolved)."""
    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OSError, OmegaConfBaseException, ValueError):
        return None


def checkpoint_task(ckpt: dict, checkpoint: str) -> tuple[dict | None, dict | None, str | None]:
    """``(task, run config, run config path)`` of a checkpoint: the run's Hydra config first, then its train_cfg."""
    config_path = find_run_config(checkpoint)
    config = load_run_config(config_path) if config_path else None
    if config is not None and isinstance(config.get("task"), dict) and config["task"].get("name"):
        return dict(config["task"]), config, config_path
    saved = (ckpt.get("train_cfg") or {}).get("task")
    if isinstance(saved, dict) and saved.get("name"):
        return dict(saved), config, config_path
    return None, config, config_path


def load_run(path: str, what: str = "checkpoint") -> RunInfo:
    """Open a checkpoint and find what it was trained with (task and train config)."""
    file, ckpt = open_checkpoint(path, what)
    train_cfg = ckpt.get("train_cfg")
    if not isinstance(train_cfg, dict) or not ("actor" in train_cfg or "student" in train_cfg):
        raise UserError(f"{what}={path}: '{file}' has no train_cfg with a policy config (was it written by rlcore?).")
    task, config, config_path = checkpoint_task(ckpt, file)
    if task is None:
        raise UserError(f"{what}={path}: cannot tell which task '{file}' was trained on: its run directory has no "
                        ".hydra/config.yaml and its train_cfg no task entry.")
    return RunInfo(checkpoint=file, ckpt=ckpt, train_cfg=copy.deepcopy(train_cfg), task=task,
                   run_dir=os.path.dirname(os.path.abspath(file)), config=config, config_path=config_path)


def resume_differences(ckpt: dict, checkpoint: str, train_cfg: dict) -> list[str]:
    """What makes a checkpoint unfit to resume a run with ``train_cfg`` (empty when it fits)."""
    saved = ckpt.get("train_cfg")
    if not isinstance(saved, dict):
        return []
    diffs = []
    task, _, _ = checkpoint_task(ckpt, checkpoint)
    new_task = train_cfg.get("task") or {}
    if task and new_task and task.get("name") != new_task.get("name"):
        diffs.append(f"task: checkpoint {task.get('name')!r} vs config {new_task.get('name')!r}")
    alg_a = (saved.get("algorithm") or {}).get("class_name")
    alg_b = (train_cfg.get("algorithm") or {}).get("class_name")
    if alg_a and alg_b and alg_a != alg_b:
        diffs.append(f"algorithm: checkpoint {alg_a} vs config {alg_b}")
        return diffs  # every model key would differ too: the algorithm says it all
    parts = ("student", "teacher") if "student" in train_cfg else ("actor", "critic")
    diffs += model_differences(saved, train_cfg, parts)
    diffs += obs_group_differences(saved, train_cfg, ("actor", "critic", "student", "teacher"))
    env_state = ckpt.get("env_state")
    if isinstance(env_state, dict) and "num_envs" in env_state and new_task.get("num_envs") is not None:
        if int(env_state["num_envs"]) != int(new_task["num_envs"]):
            diffs.append(f"task.num_envs: checkpoint {int(env_state['num_envs'])} vs config {int(new_task['num_envs'])}"
                         " (an exact resume restores every env's state)")
    return diffs


# ============================================================================ rebuilding the task and the policy
def make_run_env(info: RunInfo, num_envs: int, device: str, seed: int):
    """The checkpoint's task with its env settings, ``num_envs`` copies on ``device``."""
    from rlcore.env.task import make_task  # found through the task registry: rlcore never imports a task

    env_kwargs = dict(info.task.get("env") or {})
    return make_task(str(info.task["name"]), info.task.get("module"), num_envs=int(num_envs), device=device, seed=int(seed), **env_kwargs)


def make_run_policy(info: RunInfo, env, device: str):
    """The deployed policy of a checkpoint (PPO actor or distillation student), weights loaded, in eval mode."""
    from rlcore.algorithms.factory import construct_algorithm  # utils sit below algorithms: import on use

    cfg = copy.deepcopy(info.train_cfg)
    cfg["multi_gpu"] = None  # a checkpoint of a torchrun job is replayed in one process
    obs = env.get_observations().to(device)
    alg = construct_algorithm(obs, env, cfg, device)
    if info.policy_set == "student":
        load_cfg = {"student": True, "teacher": False, "optimizer": False}
    else:
        load_cfg = {"actor": True, "critic": False, "optimizer": False, "rnd": False}
    try:
        alg.load(info.ckpt, load_cfg, strict=True)
    except (RuntimeError, KeyError) as err:
        raise UserError(f"checkpoint '{info.checkpoint}' does not fit the model its own config describes "
                        f"({' '.join(str(err).split())[:300]}).") from None
    alg.eval_mode()
    policy = alg.get_policy()
    policy.reset()
    return policy
