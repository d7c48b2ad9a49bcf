"""``python -m rlcore.train task=<task> model=<mlp|cnn|rnn> algorithm=<ppo|distillation> extension=[rnd,symmetry]``.

Composes the Hydra config in ``conf/``, checks it against the typed configs
(``rlcore.config.check``), turns it into the rsl_rl 5.x-style nested train config, builds the task
and the runner, trains, and leaves a run directory with the composed config (``.hydra/config.yaml``, as
Hydra writes it) and its resolved, checked form (``config.yaml``), TensorBoard/wandb logs,
``model_<it>.pt`` checkpoints and the exported ``policy.onnx``.

Everything that can be wrong with the command (an unknown option, a wrong type, a missing or mismatched
checkpoint, distillation without a teacher, a device this machine lacks) is checked before the run
directory is made, and reported as one line with exit status 2.

Under ``torchrun`` every rank runs this module; rank 0 picks the run directory and the others follow it
(torch.distributed: Gloo on CPU, NCCL on GPUs).
"""

from __future__ import annotations

import os
import signal
import sys

if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "rlcore-train":
    # The command (not an import of this module): Ctrl-C while the imports below load ends it quietly with status 130;
    # nothing is written yet. main() then installs rlcore.config.cli.watch_interrupts.
    signal.signal(signal.SIGINT, lambda signum, frame: (os.write(2, b"interrupted\n"), os._exit(130)))

import contextlib
import importlib.util
import io
import logging
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import hydra
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlcore.config import registry
from rlcore.config.check import validate_config
from rlcore.config.cli import (
    INTERRUPT_EXIT,
    USER_ERROR_EXIT,
    USER_ERRORS,
    UserError,
    check_device,
    compose,
    config_dir,
    exit_interrupted,
    file_in_the_way,
    is_main_process,
    keep_interrupt_exit_status,
    one_line,
    user_errors,
    user_groups_help,
    watch_interrupts,
)
from rlcore.config.schema import LEARN_ARGUMENTS, RUNNER_LOGGER_KEYS

# torch, the runner and the tasks load inside the functions that use them, so that a bad command is refused in
# one line before torch (seconds to import) is loaded.

CONF_DIR = config_dir()

__all__ = ["CONF_DIR", "TrainPlan", "UserError", "build_train_cfg", "main", "prepare", "run"]


@dataclass
class TrainPlan:
    """A checked command: the typed config, the train config, and the checkpoints it names.

    Made once per command by :func:`prepare`; :func:`run` trains from it without checking anything again.
    """

    cfg: dict  # validated, resolved config (plain dict)
    train_cfg: dict  # the runner's nested train config
    device: str
    resume_path: str | None = None
    teacher_path: str | None = None
    init_path: str | None = None  # init_from=: a fresh run from these weights
    num_iterations: int | None = None  # learn()'s iterations: runner.max_iterations, less those done by a resumed run
    notices: list[str] = field(default_factory=list)
    source: dict | None = None  # the composed config it was made from (plain; run() checks it is the same)
    record_dir: str | None = None  # where run() writes config.yaml, relative to the run directory (None: at its top)


# ============================================================================ config -> train config
def _plain_config(cfg) -> dict:
    """A composed config as a resolved plain dict (the ``hydra`` node dropped); interpolation errors name the key."""
    if isinstance(cfg, dict):
        return {k: v for k, v in cfg.items() if k != "hydra"}
    if "hydra" in cfg:  # compose(return_hydra_config=True): Hydra's own node is not ours to resolve
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    try:
        out = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", "") or ""
        first = str(getattr(err, "msg", None) or err).strip().splitlines()[0]
        raise UserError(f"{key + ': ' if key else ''}{first}") from None
    out.pop("hydra", None)
    return out


def build_train_cfg(cfg, teacher_ckpt: dict | None = None, resume_ckpt: dict | None = None) -> dict:
    """The nested train-config dict the runners take (rsl_rl's layout), from the composed Hydra config.

    Args:
        cfg: the composed config (``DictConfig`` or plain dict); it is validated here.
        teacher_ckpt: the teacher's PPO checkpoint (algorithm=distillation): its actor config becomes the teacher.
        resume_ckpt: a checkpoint being resumed; a distillation checkpoint supplies the teacher config when
            no teacher is given.
    """
    checked, _ = validate_config(_plain_config(cfg))
    return _translate(checked, teacher_ckpt, resume_ckpt)


def _translate(c: dict, teacher_ckpt: dict | None, resume_ckpt: dict | None) -> dict:
    """A validated config in rsl_rl's layout. The Hydra tree's sections go where the tables say: the runner's keys
    (less ``learn()``'s arguments), ``seed`` and the logger keys (``RUNNER_LOGGER_KEYS``) at the top; ``model.actor``,
    ``model.critic`` to the algorithm's model keys (the registry's ``models``: actor, critic / student); each
    ``extension.<name>`` to ``algorithm.<cfg_key>`` (``rnd_cfg``, ``symmetry_cfg``), with its task setting."""
    alg = registry.algorithm_traits(c["algorithm"]["class_name"])
    task = c["task"]
    train = {k: v for k, v in c["runner"].items() if k not in LEARN_ARGUMENTS}
    train.update({"seed": c["seed"], **{key: c["logger"][name] for key, name in RUNNER_LOGGER_KEYS.items()}})
    train["task"] = {"name": task["name"], **({"module": task["module"]} if task.get("module") else {}),
                     "num_envs": task["num_envs"], "env": dict(task.get("env") or {})}
    for part, key in zip(("actor", "critic"), alg.models):
        train[key] = c["model"][part]
    train["obs_groups"] = dict(task.get("obs_groups") or {})
    algorithm = dict(c["algorithm"])
    for name, settings in c["extension"].items():
        ext = registry.get("extension", name)
        algorithm[ext.cfg_key] = {**settings, **({ext.task_arg: task[ext.task_key]} if ext.task_arg else {})}
    train["algorithm"] = algorithm
    if alg.uses_teacher:
        _add_teacher(train, teacher_ckpt, resume_ckpt)
    return train


def _add_teacher(train: dict, teacher_ckpt: dict | None, resume_ckpt: dict | None) -> None:
    """Distillation: the teacher's model config and observation sets, from the teacher's PPO checkpoint (or the
    resumed distillation checkpoint); the student reads the task's ``student`` set, else its ``actor`` set, and keeps
    the ``estimator_cfg`` a task gives its actor (task=go2: a base-velocity estimator, trained during distillation,
    that the exported student's integral loop reads)."""
    resumed = (resume_ckpt or {}).get("train_cfg") or {}
    if teacher_ckpt is not None:
        saved = teacher_ckpt.get("train_cfg") or {}
        if "actor" not in saved:
            raise UserError("the teacher checkpoint has no actor config (it must be written by a PPO run of "
                            "rlcore: teacher=<PPO model_<it>.pt or its run directory>).")
        teacher = {k: v for k, v in saved["actor"].items() if k != "distribution_cfg"}
        teacher_groups = (saved.get("obs_groups") or {}).get("actor", ["policy"])
    elif "teacher" in resumed:
        teacher = dict(resumed["teacher"])
        teacher_groups = (resumed.get("obs_groups") or {}).get("teacher", ["policy"])
    else:
        raise UserError("algorithm=distillation needs a trained teacher: add teacher=<path to a PPO "
                        "model_<it>.pt or its run directory> (train one first with algorithm=ppo).")
    groups = train["obs_groups"]
    train["teacher"] = teacher
    train["obs_groups"] = {"student": groups.get("student", groups.get("actor", ["policy"])),
                           "teacher": groups.get("teacher", teacher_groups)}


# ============================================================================ planning a command
def prepare(cfg) -> TrainPlan:
    """Plan a command, once: check the composed config and the files it names; nothing is built or written.

    Each rule is checked once: the config's by ``validate_config`` (types, ranges, combinations), the runner's
    evaluation settings by the runner's own ``check_settings``, the device and the logger here, and the
    checkpoints (opened once each) here.

    Raises:
        UserError / ConfigError: one line saying what is wrong and how to fix it.
    """
    from rlcore.runners.evaluation import check_settings

    source = _plain_config(cfg)
    c, notices = validate_config(source)
    check_settings(c["runner"])  # video, keep_best, stop_at
    device = check_device(c["device"])
    if c["logger"]["type"] == "wandb" and importlib.util.find_spec("wandb") is None:
        raise UserError("logger=wandb needs the wandb package: pip install 'rlcore[wandb]' "
                        "(or use logger=tensorboard).")
    resume_path, resume_ckpt = _open_checkpoint_arg(c, "resume")
    init_path, init_ckpt = _open_checkpoint_arg(c, "init_from")
    teacher_path, teacher_ckpt = _open_teacher(c)
    train_cfg = _translate(c, teacher_ckpt, resume_ckpt or init_ckpt)
    num_iterations = int(c["runner"]["max_iterations"])
    if resume_ckpt is not None:
        from rlcore.checkpoint.run_files import resume_differences

        diffs = resume_differences(resume_ckpt, resume_path, train_cfg)
        if diffs:
            raise UserError(f"resume={c['resume']}: '{resume_path}' was written for a different run: "
                            + "; ".join(diffs) + ". A resume continues the run with its own settings, and these "
                            "cannot change (its weights and env states are made for them): leave them out of the "
                            "command, or start afresh (init_from=<checkpoint> starts a new run from its weights).")
        notices += _resume_rate_notice(resume_ckpt, train_cfg)
        done = int(resume_ckpt.get("iter", 0)) + 1  # iterations the run has completed
        num_iterations -= done
        if num_iterations <= 0:
            raise UserError(f"resume={c['resume']}: the run has completed {done} iterations, runner.max_iterations="
                            f"{c['runner']['max_iterations']} (the run's total) is reached; raise runner.max_iterations "
                            "to train further.")
        notices.append(f"resuming {os.path.dirname(resume_path)} after iteration {done}: training iterations "
                       f"{done + 1}..{done + num_iterations} of runner.max_iterations={c['runner']['max_iterations']}")
    if init_ckpt is not None:
        notices += _init_from_check(c, init_path, init_ckpt, train_cfg)
    return TrainPlan(cfg=c, train_cfg=train_cfg, device=device, resume_path=resume_path, teacher_path=teacher_path,
                     init_path=init_path, num_iterations=num_iterations, notices=notices, source=source)


def _init_from_check(c: dict, path: str, ckpt: dict, train_cfg: dict) -> list[str]:
    """Refuse, in one line, an ``init_from`` checkpoint whose models do not fit this run's; the notice it gives."""
    from rlcore.checkpoint.io import model_differences, obs_group_differences
    from rlcore.checkpoint.run_files import checkpoint_task

    saved = ckpt.get("train_cfg") or {}
    kind = "distillation" if "student_state_dict" in ckpt else "PPO"
    want = registry.algorithm_traits(c["algorithm"]["class_name"])
    if (kind == "distillation") != want.uses_teacher:
        hint = " (a PPO policy becomes a student's teacher with teacher=)" if want.uses_teacher else ""
        raise UserError(f"init_from={c['init_from']}: '{path}' is a {kind} checkpoint; this run is "
                        f"algorithm={c['algorithm']['class_name'].lower()}{hint}.")
    parts = ("student",) if want.uses_teacher else ("actor", "critic")
    diffs = model_differences(saved, train_cfg, parts) + obs_group_differences(saved, train_cfg, parts)
    if diffs:
        raise UserError(f"init_from={c['init_from']}: '{path}' holds other models: " + "; ".join(diffs) + ".")
    task, _, _ = checkpoint_task(ckpt, path)
    where = f" (trained on task={task.get('name')})" if task and task.get("name") != c["task"]["name"] else ""
    return [f"init_from: a new run starting from the weights of {path}{where}; optimiser, iteration 0, env and "
            "generators are fresh."]


def _resume_rate_notice(ckpt: dict, train_cfg: dict) -> list[str]:
    """A notice when ``algorithm.learning_rate`` was changed for a resume: the resumed optimiser continues at the
    checkpoint's own (possibly adapted) rate, so the new value is not used (an exact resume needs that)."""
    saved = ((ckpt.get("train_cfg") or {}).get("algorithm") or {}).get("learning_rate")
    given = (train_cfg.get("algorithm") or {}).get("learning_rate")
    restored = ckpt.get("learning_rate")
    if saved is None or given is None or restored is None or float(saved) == float(given):
        return []
    return [f"algorithm.learning_rate={float(given):g} is not used on resume: the optimiser continues at the "
            f"checkpoint's learning rate {float(restored):.4g} (its run started at {float(saved):g}); start a new run "
            f"to use another rate."]


def _open_checkpoint_arg(c: dict, key: str) -> tuple[str | None, dict | None]:
    """``(path, checkpoint)`` of ``resume=`` or ``init_from=`` (Nones without one)."""
    if not c[key]:
        return None, None
    from rlcore.checkpoint.run_files import open_checkpoint

    return open_checkpoint(str(c[key]), key)


def _open_teacher(c: dict) -> tuple[str | None, dict | None]:
    """``(path, checkpoint)`` of ``teacher=`` (Nones without one): a PPO checkpoint of the same task."""
    if not c["teacher"]:
        return None, None
    from rlcore.checkpoint.run_files import checkpoint_task, open_checkpoint

    path, ckpt = open_checkpoint(str(c["teacher"]), "teacher")
    if "actor_state_dict" not in ckpt:
        kind = "a distillation" if "student_state_dict" in ckpt else "not a PPO"
        raise UserError(f"teacher={c['teacher']}: '{path}' is {kind} checkpoint; the teacher must be a "
                        "PPO checkpoint (resume a distillation run with resume=<run> instead).")
    t_task, _, _ = checkpoint_task(ckpt, path)
    if t_task and t_task.get("name") != c["task"]["name"]:
        raise UserError(f"teacher={c['teacher']} was trained on task={t_task.get('name')}, this run is "
                        f"task={c['task']['name']}; give a teacher trained on the same task.")
    return path, ckpt


# ============================================================================ distributed set-up
def _init_distributed(device: str) -> tuple[int, int, str]:
    """``(rank, world size, device)`` of this process; initialises torch.distributed under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, device
    import torch
    import torch.distributed as dist

    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        if local_rank >= torch.cuda.device_count():
            raise UserError(f"torchrun started local rank {local_rank} but this machine has "
                            f"{torch.cuda.device_count()} CUDA device(s); lower --nproc_per_node.")
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo", rank=rank, world_size=world)
    return rank, world, device


def _make_run_dir(hydra_cfg: DictConfig, argv: list[str]) -> tuple[list[str], str | None, bool]:
    """Make the run directory before Hydra does, so that one that cannot be made is one line, not Hydra's traceback.

    ``hydra.run.dir`` (``logs/<experiment>/<time>`` unless the command gives it) is pinned on the command handed to
    Hydra, so that Hydra uses this very directory. Returns ``(argv, run directory, whether it was made here)``.

    Raises:
        UserError: the directory cannot be made or written into (a file in its path, no permission, ``/proc``).
    """
    if any(a.startswith("hydra.run.dir=") for a in argv):
        run_dir = _given_run_dir(argv)
        if run_dir is None:  # an interpolation of the command's own: Hydra resolves it
            return argv, None, False
    else:
        run_dir = str(hydra_cfg.hydra.run.dir)
        argv = argv + [f"hydra.run.dir={_quote(run_dir)}"]
    existed = os.path.isdir(run_dir)
    try:
        os.makedirs(run_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as err:
        if not existed and os.path.isdir(run_dir) and not os.listdir(run_dir):
            os.rmdir(run_dir)
        raise UserError(f"cannot create the run directory {run_dir}: {_why_not_made(run_dir, err)}; choose another "
                        "with hydra.run.dir=<dir>, or run from a writable directory.") from None
    return argv, run_dir, not existed


def _why_not_made(path: str, err: OSError) -> str:
    """``err``'s reason, naming the file that stands where a directory of ``path`` should be."""
    reason = err.strerror or one_line(err)
    blocking = file_in_the_way(path)
    if blocking is not None:
        shown = os.path.relpath(blocking) if not os.path.isabs(path) else blocking
        return f"{reason} ('{shown}' is a file, not a directory)"
    return reason


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _resume_run_dir(plan: TrainPlan, argv: list[str]) -> list[str]:
    """A resumed run continues in the run directory of its checkpoint (its checkpoints, logs and curves go on there),
    unless ``hydra.run.dir=`` says otherwise. In a directory that already holds a run's record, the resume keeps its
    own beside it (``resumes/<first iteration>/``: Hydra's ``.hydra/`` and ``config.yaml``), so that the record of
    how the earlier checkpoints were made is never rewritten (``rlcore.checkpoint.run_files``)."""
    if plan.resume_path is None:
        return []
    extra, run_dir = [], _given_run_dir(argv)
    if run_dir is None and not any(a.startswith("hydra.run.dir=") for a in argv):
        run_dir = os.path.dirname(os.path.abspath(plan.resume_path))
        extra.append(f"hydra.run.dir={_quote(run_dir)}")
    if run_dir is not None and _holds_a_record(run_dir):
        extra.append(f"hydra.output_subdir={_quote(os.path.join(_claim_record_dir(plan, run_dir), '.hydra'))}")
    return extra


def _claim_record_dir(plan: TrainPlan, run_dir: str) -> str:
    """Set and return ``plan.record_dir``: a new ``resumes/<first iteration>`` folder of ``run_dir`` for this resume's
    record (its first iteration: those the run had completed)."""
    from rlcore.checkpoint.run_files import new_record_dir

    plan.record_dir = new_record_dir(run_dir, plan.cfg["runner"]["max_iterations"] - plan.num_iterations)
    return plan.record_dir


def _given_run_dir(argv: list[str]) -> str | None:
    """The command's ``hydra.run.dir`` (its last one), None without one or when it is an interpolation."""
    given = [a for a in argv if a.startswith("hydra.run.dir=")]
    if not given:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    run_dir = str(OverridesParser.create().parse_override(given[-1]).value())
    return None if "${" in run_dir else run_dir


def _holds_a_record(run_dir: str) -> bool:
    """Whether an earlier command left its record (``.hydra/``, ``config.yaml``) in ``run_dir``."""
    return any(os.path.exists(os.path.join(run_dir, name)) for name in (".hydra", "config.yaml"))


#: Keys of an earlier command that a resume does not take over: what it started from, not how it trained.
_NOT_RESUMED = ("resume", "init_from", "teacher")


def resume_command(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` of a ``resume=<run>`` command, completed with the run's own settings: the overrides of the command
    that wrote the checkpoint (``rlcore.checkpoint.run_files.command_overrides``) first, then ``argv``'s, so that the
    command line changes only what it names (what cannot change, such as the model or ``task.num_envs``, is then
    refused by :func:`prepare` with the reason). Returns ``(argv, notice)``; ``argv`` unchanged (and no notice)
    without ``resume=`` or a record of the run's command. A ``+key=`` of the run that the command sets again keeps
    its ``+``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from rlcore.checkpoint.io import find_checkpoint
    from rlcore.checkpoint.run_files import command_overrides

    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(argv)
        resume = [o for o in parsed if o.key_or_group == "resume" and o.value() not in (None, "")]
        checkpoint = find_checkpoint(str(resume[-1].value())) if resume else None
        earlier = command_overrides(checkpoint) if checkpoint else None
        earlier_parsed = parser.parse_overrides(earlier) if earlier else []
    except (HydraException, OSError, ValueError):  # prepare() reports a bad resume= (or argv) in one line
        return argv, None
    if not earlier:
        return argv, None
    named = {o.key_or_group for o in parsed}
    taken = [(text, o) for text, o in zip(earlier, earlier_parsed)
             if o.key_or_group not in _NOT_RESUMED and not o.key_or_group.startswith("hydra")]
    added = {o.key_or_group for _, o in taken if o.is_add()}
    argv = list(argv)
    for i, o in enumerate(parsed):  # the run added the key (+key=): the command's new value must add it as well
        if o.key_or_group in added and not (o.is_add() or o.is_force_add() or o.is_delete()):
            argv[i] = "+" + argv[i]
    kept = [text for text, o in taken if o.key_or_group not in named]
    changed = [a for a, o in zip(argv, parsed) if o.key_or_group not in ("resume", "hydra.run.dir")
               and not o.key_or_group.startswith("hydra")]
    notice = (f"resume: the run's own settings ({' '.join(kept) or 'the defaults'})"
              + (f", changed by this command: {' '.join(changed)}" if changed else ""))
    return kept + argv, notice


def _distributed_overrides(hydra_cfg: DictConfig, plan: TrainPlan, argv: list[str]) -> list[str]:
    """Under torchrun: every rank writes into rank 0's run directory; only rank 0 keeps ``.hydra/`` and a log."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return []
    import torch.distributed as dist

    rank, _, _ = _init_distributed(plan.device)
    payload = [str(hydra_cfg.hydra.run.dir) if rank == 0 else None]
    dist.broadcast_object_list(payload, src=0)
    extra = []
    if not any(a.startswith("hydra.run.dir=") for a in argv):
        extra.append(f"hydra.run.dir={_quote(payload[0])}")
    if rank != 0:
        extra += ["hydra.output_subdir=null", "hydra/job_logging=none", "hydra/hydra_logging=none"]
    return extra


# ============================================================================ training
def run(cfg: DictConfig, log_dir: str | None = None,
        callback: Callable[[object, int, dict], bool | None] | None = None, plan: TrainPlan | None = None) -> str | None:
    """Train as ``cfg`` says, writing into ``log_dir`` (default: Hydra's output directory).

    ``callback(runner, iteration, stats)``, when given, runs after every iteration (main process); returning True
    stops training there (benchmarks use it for time budgets and evaluations). ``plan``: the :func:`prepare` of
    this ``cfg`` when it was already made (else it is made here). Returns the exported ``policy.onnx`` path on the
    main process, else None.
    """
    import torch

    from rlcore.env.task import make_task

    if plan is None or plan.source != _plain_config(cfg):
        plan = prepare(cfg)
    c = plan.cfg
    rank, _, device = _init_distributed(plan.device)
    if rank == 0:
        for notice in plan.notices:
            print(f"[rlcore] {notice}")
    if c["threads"]:
        torch.set_num_threads(int(c["threads"]))
    if log_dir is None:
        log_dir = hydra.core.hydra_config.HydraConfig.get().runtime.output_dir

    task = c["task"]
    env = make_task(task["name"], task.get("module"), num_envs=int(task["num_envs"]), device=device, seed=int(c["seed"]) + rank,
                    **dict(task.get("env") or {}))
    eval_env = _make_eval_env(c, device) if rank == 0 else None
    runner_cls = registry.get("runner", registry.algorithm_traits(c["algorithm"]["class_name"]).runner).load()
    runner = runner_cls(env, plan.train_cfg, log_dir=log_dir, device=device, eval_env=eval_env)
    for path, what in ((plan.teacher_path, "teacher"), (plan.resume_path, "resume"), (plan.init_path, "init_from")):
        if path is None:
            continue
        try:
            runner.init_from(path) if what == "init_from" else runner.load(path)
        except RuntimeError as err:  # torch's load_state_dict on weights of other shapes; anything else is a bug
            if "loading state_dict" not in str(err):
                raise
            raise UserError(f"{what}={c[what]}: '{path}' does not fit this run's model "
                            f"({' '.join(str(err).split())[:400]}).") from None
        if runner.is_main:
            done = {"teacher": "teacher loaded", "resume": "resumed", "init_from": "weights loaded"}[what]
            where = f" after iteration {runner.current_learning_iteration + 1}" if what == "resume" else ""
            print(f"[rlcore] {done} from {path}{where}")
    if runner.is_main:
        record = os.path.join(log_dir, _record_dir(plan, log_dir))
        os.makedirs(record, exist_ok=True)
        OmegaConf.save(OmegaConf.create(c), os.path.join(record, "config.yaml"))  # resolved, typed, defaults filled
        print(f"[rlcore] run directory: {log_dir}")
    try:
        hook = None if callback is None else (lambda it, stats: callback(runner, it, stats))
        runner.learn(plan.num_iterations, init_at_random_ep_len=bool(c["runner"]["init_at_random_ep_len"]),
                     callback=hook)
    finally:
        runner.close()
        if eval_env is not None and callable(getattr(eval_env, "close", None)):
            eval_env.close()
    path = None
    if runner.is_main:
        path = runner.export_policy_to_onnx(log_dir)
        print(f"[rlcore] exported {path}")
    _finish_distributed()
    return path


def _record_dir(plan: TrainPlan, log_dir: str) -> str:
    """Where this command's ``config.yaml`` goes, relative to ``log_dir``: the plan's (``resumes/<it>`` of a resume
    from the command line); a resume called from Python code into a directory with an earlier record gets its own
    folder too; else the directory itself."""
    if plan.record_dir is not None:
        return plan.record_dir
    if plan.resume_path is not None and _holds_a_record(log_dir):
        return _claim_record_dir(plan, log_dir)
    return ""


def _make_eval_env(c: dict, device: str):
    """The separate env of ``runner.keep_best`` / ``runner.stop_at``'s evaluation (None when both are off).

    Same task and settings as the training env, ``runner.eval_num_envs`` envs, seed ``seed + 10000``; built with
    the global generators' states put back afterwards, so that it leaves training as it would be without it.
    """
    from rlcore.checkpoint.io import get_rng_states, set_rng_states
    from rlcore.env.task import make_task

    if c["runner"]["keep_best"] is None and c["runner"]["stop_at"] is None:
        return None
    task, rng = c["task"], get_rng_states()
    try:
        return make_task(task["name"], task.get("module"), num_envs=int(c["runner"]["eval_num_envs"]), device=device,
                         seed=int(c["seed"]) + 10_000, **dict(task.get("env") or {}))
    finally:
        set_rng_states(rng)


def _finish_distributed() -> None:
    """Wait for every rank, then tear the process group down (Gloo aborts at exit when it is left up)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


_STARTED = time.time()

#: What a run writes before its first checkpoint: Hydra's bookkeeping, the resolved config, the git state and the
#: logger's files. A user error that stops a run with nothing else in its directory leaves no directory behind.
_START_FILES = (".hydra", "train.log", "config.yaml", "git", "events.out.tfevents.", "wandb")


def _remove_empty_run_dir(path: str | None, user_error: bool = False, interrupted: bool = False) -> None:
    """Remove a run directory that a failed start left with nothing but Hydra's bookkeeping.

    ``train.log`` holds the console's copy (:class:`_ConsoleCopy`) and third-party ``logging`` records, so a
    non-empty one does not make the run real. After a user error (e.g. a ``runner.keep_best`` metric the task does
    not report, found at the first evaluation) the files this process wrote before any checkpoint
    (:data:`_START_FILES`) go too; after Ctrl-C (``interrupted``), everything this process wrote when there is no
    checkpoint (``model_*.pt``) to resume from. Anything older than this process, or any other file, keeps the
    directory.
    """
    if not path or not os.path.isdir(path):
        return
    entries = os.listdir(path)
    if set(entries) <= {".hydra", "train.log"}:
        shutil.rmtree(path, ignore_errors=True)
        return
    if not (user_error or interrupted):
        return

    def new(entry: str) -> bool:
        return os.path.getmtime(os.path.join(path, entry)) >= _STARTED - 1.0

    if interrupted:
        remove = (not any(re.fullmatch(r"model_.*\.pt", e) for e in entries)
                  and all(new(e) for e in entries if e not in (".hydra", "train.log")))
    else:
        remove = all(e.startswith(_START_FILES) and new(e) for e in entries if e not in (".hydra", "train.log"))
    if remove:
        shutil.rmtree(path, ignore_errors=True)


#: Third-party loggers whose INFO records are noise in every run's output (TensorBoard's reader, used by the
#: end-of-run diagnosis: "No path found after <events file>"; PyOpenGL, imported by MuJoCo: "No OpenGL_accelerate
#: module loaded"). Set to WARNING when the logging config leaves them unset: their warnings and errors still show.
QUIET_LOGGERS = ("tensorboard", "OpenGL.acceleratesupport")


def _quiet_third_party_logs() -> None:
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


#: Terminal control sequences (colours, cursor moves, hyperlinks) that rich writes to a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class _ConsoleCopy:
    """``sys.stdout`` or ``sys.stderr`` written through to the console unchanged and, as plain text (no terminal
    codes), appended to the run's log file; every other attribute (``isatty``, ``fileno``, ``encoding``) is the
    console's, so that what is printed (rich's colours included) does not change."""

    def __init__(self, stream, log: io.TextIOBase) -> None:
        self._stream, self._log = stream, log

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if not self._log.closed:
            self._log.write(_ANSI.sub("", text))
        return written

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()
        if not self._log.closed:
            self._log.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _console_copied_to(path: str) -> Iterator[None]:
    """While the block runs, what is printed to stdout and stderr is also appended to ``path`` (the job's log,
    ``<run dir>/train.log``, where Hydra's log records go too): the iteration reports, ``[rlcore]`` lines, warnings
    and errors."""
    log = open(path, "a", encoding="utf-8", buffering=1)  # closed below, after the streams are put back
    copies = {name: _ConsoleCopy(getattr(sys, name), log) for name in ("stdout", "stderr")}
    for name, copy in copies.items():
        setattr(sys, name, copy)
    try:
        yield
    finally:
        for name, copy in copies.items():
            if getattr(sys, name) is copy:  # unless someone replaced it meanwhile
                copy.flush()
                setattr(sys, name, copy._stream)
        log.close()


_planned: list[TrainPlan] = []
"""The plan that main() made for the command it hands to Hydra (taken by the job, so that it is not made twice)."""


def _task_function(cfg: DictConfig) -> None:
    hydra_cfg = hydra.core.hydra_config.HydraConfig.get()
    output_dir = hydra_cfg.runtime.output_dir
    plan = _planned.pop() if _planned else None
    _quiet_third_party_logs()
    main_process = is_main_process()
    copy = (_console_copied_to(os.path.join(output_dir, f"{hydra_cfg.job.name}.log")) if main_process
            else contextlib.nullcontext())
    try:
        with copy, user_errors():
            run(cfg, output_dir, plan=plan)
    except SystemExit as stop:
        if stop.code not in (0, None) and main_process:
            _remove_empty_run_dir(output_dir, user_error=stop.code == USER_ERROR_EXIT,
                                  interrupted=stop.code == INTERRUPT_EXIT)
        raise


def sweep_jobs(overrides: list[str]) -> list[list[str]] | None:
    """The jobs of a basic Hydra sweep, each as its list of ``key=value`` overrides (``model=mlp,rnn seed=1,2``: four
    jobs), in Hydra's order; None when Hydra's basic sweeper does not expand it (another sweeper chosen, or a
    sweep it cannot list), which is then left to Hydra."""
    if any(o.lstrip("+~").startswith(("hydra/sweeper", "hydra.sweeper")) for o in overrides):
        return None
    from hydra.errors import HydraException

    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser
    except ImportError:  # a Hydra without this (internal) API: each job is planned when it starts
        return None
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except HydraException:  # an override Hydra reports itself (a parse error, an interval sweep)
        return None


def check_sweep(overrides: list[str]) -> None:
    """Plan every job of a ``-m`` sweep (:func:`prepare`; nothing is built or written).

    Raises:
        UserError: the first job that cannot run, named with its overrides, and what is wrong with it.
    """
    jobs = sweep_jobs(overrides)
    for k, job in enumerate(jobs or []):
        try:
            prepare(compose(job, return_hydra_config=True))
        except USER_ERRORS as err:
            raise UserError(f"sweep job #{k} of {len(jobs)} ({' '.join(job)}): {one_line(err)}") from None


# ``--help`` lists the groups a user chooses from (conf/config.yaml's hydra.help.template reads this resolver).
if not OmegaConf.has_resolver("rlcore_user_groups"):
    OmegaConf.register_new_resolver("rlcore_user_groups", user_groups_help)
_hydra_main = hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")(_task_function)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m rlcore.train`` and ``rlcore-train``.

    Plain ``key=value`` commands are composed and planned first (:func:`prepare`), so that a bad command fails in
    one line before a run directory exists; then the run directory is made (:func:`_make_run_dir`: one line when it
    cannot be) and Hydra's job trains from that plan. Ctrl-C at any point ends the command with ``interrupted`` and
    status 130, and removes a run directory that it leaves without a checkpoint. A sweep (``-m`` with ``key=a,b`` or
    ``range(...)`` lists) is planned job by job before Hydra starts the first, so that a bad value in the fifth job
    fails in one line instead of after four runs; each job is planned again when it starts. Hydra's other flags
    (``--help``, ``--cfg job``, ...) and other sweepers go straight to Hydra.
    """
    command = argv is None  # this process is the command (not a call from Python code)
    argv = list(sys.argv[1:] if argv is None else argv)
    _planned.clear()
    if command:
        keep_interrupt_exit_status()
    previous_sigint = signal.getsignal(signal.SIGINT)
    watch_interrupts()
    run_dir = made = None  # the run directory checked here, and whether this made it
    try:
        flags = {arg for arg in argv if arg.startswith("-")}
        if not flags:
            with user_errors():
                argv, resumed = resume_command(argv)
                hydra_cfg = compose(argv, return_hydra_config=True)
                plan = prepare(hydra_cfg)
                if resumed:
                    plan.notices.insert(0, resumed)
                argv = argv + _resume_run_dir(plan, argv)
                argv = argv + _distributed_overrides(hydra_cfg, plan, argv)
                if is_main_process():
                    argv, run_dir, made = _make_run_dir(hydra_cfg, argv)
                _planned.append(plan)
        elif flags <= {"-m", "--multirun"}:
            with user_errors():
                check_sweep([arg for arg in argv if not arg.startswith("-")])
        sys.argv = [sys.argv[0] if sys.argv else "rlcore-train", *argv]
        try:
            _hydra_main()
        finally:
            _planned.clear()
            if made and os.path.isdir(run_dir) and not os.listdir(run_dir):  # Hydra stopped before the job began
                os.rmdir(run_dir)
    except KeyboardInterrupt:  # in Hydra's own start-up or wind-down (the job reports its own)
        _remove_empty_run_dir(run_dir, interrupted=True)
        exit_interrupted()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous_sigint)


if __name__ == "__main__":
    main()
