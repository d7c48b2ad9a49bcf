"""A training run on disk: its checkpoints, the config that made them, and the policy they hold.

A run directory (``logs/<task>/<date>_<time>/``) holds ``model_<it>.pt`` checkpoints, each of which carries the
runner's ``train_cfg`` with a ``task`` entry (name, module, num_envs, env settings): a checkpoint's own record of how
it was made, which ``play`` and ``export`` rebuild the task and the policy from, and ``train`` uses to refuse, before
anything runs, a checkpoint written for another task or model.

Each command that trained in the directory leaves its record: the first one's ``.hydra/`` (Hydra's composed config
and the command's overrides) and ``config.yaml`` (resolved, checked) at the top, each ``resume=`` into the same
directory its own, beside them in ``resumes/<first iteration>/`` (:func:`new_record_dir`), so that no record is
rewritten after the fact. A resume takes the settings of the command that wrote its checkpoint
(:func:`command_overrides`), and the new command changes only what it names.
"""

from __future__ import annotations

import copy
import os
import re
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
    task: dict  # name, module, num_envs, env: the checkpoint's own train_cfg["task"] (:func:`checkpoint_task`)
    run_dir: str  # folder of the checkpoint
    config: dict | None = None  # the composed Hydra config (resolved) of the command that wrote it, when found
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


#: Where each resume into a run directory keeps its record (``resumes/<first iteration>[-<n>]/``).
RESUMES_DIR = "resumes"


def run_records(run_dir: str) -> list[tuple[int, str]]:
    """``(first iteration, folder)`` of each command that trained in ``run_dir`` and left a ``.hydra/`` record, in
    the order they ran: the first command's (``run_dir`` itself, iteration 0) and each resume's."""
    records = [(0, run_dir)] if os.path.isdir(os.path.join(run_dir, ".hydra")) else []
    resumes = os.path.join(run_dir, RESUMES_DIR)
    found = []
    for name in os.listdir(resumes) if os.path.isdir(resumes) else []:
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", name)
        if m and os.path.isdir(os.path.join(resumes, name, ".hydra")):
            found.append((int(m.group(1)), int(m.group(2) or 1), os.path.join(resumes, name)))
    return records + [(start, folder) for start, _, folder in sorted(found)]


def new_record_dir(run_dir: str, first_iteration: int) -> str:
    """The folder, relative to ``run_dir``, for the record of a resume whose first iteration is ``first_iteration``
    (``resumes/<it>``; ``resumes/<it>-2``, ... when a resume from the same checkpoint already left one)."""
    base, n = os.path.join(RESUMES_DIR, str(int(first_iteration))), 1
    name = base
    while os.path.exists(os.path.join(run_dir, name)):
        n += 1
        name = f"{base}-{n}"
    return name


def checkpoint_record(checkpoint: str) -> str | None:
    """The record folder (holding ``.hydra/``) of the command that wrote ``checkpoint``: of the commands that trained
    in its directory, the last one that started at or before its iteration (``model_<it>.pt``; the last one when the
    name carries no iteration). None when the directory has no record."""
    run_dir = os.path.dirname(os.path.abspath(checkpoint))
    records = run_records(run_dir)
    m = re.fullmatch(r"model_(\d+)\.pt", os.path.basename(checkpoint))
    if m:
        records = [r for r in records if r[0] <= int(m.group(1))] or records[:1]
    return records[-1][1] if records else None


def command_overrides(checkpoint: str) -> list[str] | None:
    """The command-line overrides (Hydra's ``.hydra/overrides.yaml``) of the command that wrote ``checkpoint``;
    None when its run directory has no such record (a run made from Python code, a checkpoint copied elsewhere)."""
    record = checkpoint_record(checkpoint)
    path = os.path.join(record, ".hydra", "overrides.yaml") if record else None
    if path is None or not os.path.isfile(path):
        return None
    try:
        overrides = OmegaConf.to_container(OmegaConf.load(path))
    except (OSError, OmegaConfBaseException, ValueError):
        return None
    return [str(o) for o in overrides] if isinstance(overrides, list) else None


def find_run_config(checkpoint: str, levels: int = 2) -> str | None:
    """The ``.hydra/config.yaml`` of the command that wrote a checkpoint (:func:`checkpoint_record`), else the first
    one found in its folder or up to ``levels`` above."""
    record = checkpoint_record(checkpoint)
    if record and os.path.isfile(os.path.join(record, ".hydra", "config.yaml")):
        return os.path.join(record, ".hydra", "config.yaml")
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
    """``(task, run config, run config path)`` of a checkpoint.

    The task is the checkpoint's own record (``train_cfg["task"]``: what it was trained with, which no later command
    can change); a key it lacks (``module`` in checkpoints written before it was stored) comes from the config of
    the command that wrote it, when that config names the same task. A checkpoint without a task entry (an old
    one) falls back to that config's task.
    """
    config_path = find_run_config(checkpoint)
    config = load_run_config(config_path) if config_path else None
    from_config = config.get("task") if config is not None and isinstance(config.get("task"), dict) else None
    saved = (ckpt.get("train_cfg") or {}).get("task")
    if isinstance(saved, dict) and saved.get("name"):
        task = dict(saved)
        if from_config and from_config.get("name") == task["name"] and "module" not in task:
            task["module"] = from_config.get("module")
        return task, config, config_path
    if from_config and from_config.get("name"):
        return dict(from_config), config, config_path
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
