"""``python -m rlcore.train task=<task> model=<mlp|cnn|rnn> algorithm=<ppo|distillation> extension=[rnd,symmetry]``.

Composes the Hydra config in ``conf/``, turns it into the rsl_rl 5.x-style nested train config, builds
the task and the runner, trains, and leaves a run directory with the resolved config (``.hydra/``),
TensorBoard/wandb logs, ``model_<it>.pt`` checkpoints and the exported ``policy.onnx``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: no busy-waiting OpenMP threads

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")


class UserError(Exception):
    """A mistake in the command line or config: reported as one line, no stack trace."""


def build_train_cfg(cfg: DictConfig, teacher_ckpt: dict | None = None) -> dict:
    """The nested train-config dict the runners take, from the composed Hydra config."""
    c = OmegaConf.to_container(cfg, resolve=True)
    runner = dict(c["runner"])
    runner.pop("init_at_random_ep_len", None)
    train = {**runner, "seed": c["seed"], "logger": c["logger"]["type"],
             "wandb_project": c["logger"]["wandb_project"]}
    alg = dict(c["algorithm"])
    task_groups = dict(c["task"]["obs_groups"])
    extensions = c.get("extension") or {}
    if alg["class_name"] == "Distillation":
        if extensions:
            raise UserError(f"algorithm=distillation does not support extensions ({', '.join(extensions)}); "
                            "drop extension=... or use algorithm=ppo.")
        if teacher_ckpt is None:
            raise UserError("algorithm=distillation needs a trained teacher: add teacher=<path to a PPO "
                            "model_<it>.pt or its run directory>.")
        saved = teacher_ckpt.get("train_cfg") or {}
        if "actor" not in saved:
            raise UserError("The teacher checkpoint has no actor config (was it written by a PPO run of rlcore?).")
        _drop_ppo_only_settings(alg)
        train["student"] = c["model"]["actor"]
        train["teacher"] = {k: v for k, v in saved["actor"].items() if k != "distribution_cfg"}
        train["obs_groups"] = {"student": task_groups.get("actor", ["policy"]),
                               "teacher": saved.get("obs_groups", {}).get("actor", ["policy"])}
    else:
        train["actor"] = c["model"]["actor"]
        train["critic"] = c["model"]["critic"]
        train["obs_groups"] = task_groups
        if "rnd" in extensions:
            alg["rnd_cfg"] = dict(extensions["rnd"])
        if "symmetry" in extensions:
            func = c["task"].get("symmetry_function")
            if not func:
                raise UserError(f"extension=symmetry needs a mirror function, but task={c['task']['name']} "
                                "defines no task.symmetry_function.")
            alg["symmetry_cfg"] = {**extensions["symmetry"], "data_augmentation_func": func}
    train["algorithm"] = alg
    return train


def _drop_ppo_only_settings(alg: dict) -> None:
    """Task files tune PPO (gamma, entropy_coef, ...); those keys mean nothing to Distillation."""
    import inspect

    from rlcore.algorithms import PPO, Distillation

    ppo_keys = set(inspect.signature(PPO.__init__).parameters)
    dist_keys = set(inspect.signature(Distillation.__init__).parameters)
    dropped = sorted(k for k in alg if k in ppo_keys and k not in dist_keys)
    for k in dropped:
        alg.pop(k)
    if dropped:
        print(f"[rlcore] algorithm=distillation: ignoring PPO-only settings {', '.join(dropped)}")


def run(cfg: DictConfig) -> None:
    import torch

    from rlcore.runners import DistillationRunner, OnPolicyRunner
    from rlcore.utils.checkpoint import find_checkpoint, load_checkpoint
    from tasks.registry import make_task

    device = str(cfg.device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device={device} but CUDA is not available on this machine; use device=cpu.")
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    teacher_ckpt = None
    teacher_path = None
    if cfg.algorithm.class_name == "Distillation" and cfg.teacher:
        teacher_path = find_checkpoint(str(cfg.teacher))
        teacher_ckpt = load_checkpoint(teacher_path)
    train_cfg = build_train_cfg(cfg, teacher_ckpt)
    resume_path = find_checkpoint(str(cfg.resume)) if cfg.resume else None

    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    env = make_task(cfg.task.name, num_envs=int(cfg.task.num_envs), device=device, seed=int(cfg.seed), **env_kwargs)
    log_dir = hydra.core.hydra_config.HydraConfig.get().runtime.output_dir
    runner_cls = DistillationRunner if cfg.algorithm.class_name == "Distillation" else OnPolicyRunner
    runner = runner_cls(env, train_cfg, log_dir=log_dir, device=device)
    if teacher_path is not None:
        runner.load(teacher_path)
        print(f"[rlcore] teacher loaded from {teacher_path}")
    if resume_path is not None:
        runner.load(resume_path)
        print(f"[rlcore] resumed from {resume_path} at iteration {runner.current_learning_iteration}")
    print(f"[rlcore] run directory: {log_dir}")
    try:
        runner.learn(init_at_random_ep_len=bool(cfg.runner.init_at_random_ep_len))
    finally:
        runner.close()
    if runner.is_main:
        path = runner.export_policy_to_onnx(log_dir)
        print(f"[rlcore] exported {path}")


@hydra.main(version_base=None, config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except KeyboardInterrupt:
        sys.exit(130)
    except (UserError, ValueError, FileNotFoundError, KeyError, TypeError) as err:
        if os.environ.get("RLCORE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
