"""mjlab's own train path with rlcore's runner in place of rsl_rl's (run in an environment where mjlab is installed).

What a user does to try rlcore inside mjlab: before mjlab is imported, point ``rsl_rl.runners.OnPolicyRunner`` at
``rlcore.runners.OnPolicyRunner``; mjlab's runner classes (``MjlabOnPolicyRunner`` and the velocity task's
``VelocityOnPolicyRunner``, whose ``save()`` exports ONNX with mjlab's metadata) then subclass rlcore's. Then
mjlab's ``launch_training`` runs as its ``train`` command would: it builds the env and its ``RslRlVecEnvWrapper``,
the runner, calls ``add_git_repo_to_log``, ``learn``, ``save`` at every ``save_interval``; a second call resumes
(``agent.resume``: ``runner.load`` of the newest checkpoint) and trains on.

Usage: ``python mjlab_train_path.py <log_root> [task_id]``. Prints one JSON line ``mjlab_train_path: {...}`` with
what it found (runner classes, checkpoints, the ONNX file and its metadata keys, iterations, seconds).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    log_root = Path(sys.argv[1]).resolve()
    task_id = sys.argv[2] if len(sys.argv) > 2 else "Mjlab-Velocity-Flat-Unitree-Go1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # Warp's CPU device and torch on the CPU
    os.environ.setdefault("WANDB_MODE", "disabled")

    import rsl_rl.runners

    import rlcore.runners

    rsl_rl.runners.OnPolicyRunner = rlcore.runners.OnPolicyRunner  # the swap, before mjlab imports it

    import mjlab.tasks  # noqa: F401  (fills mjlab's task registry)
    from mjlab.scripts.train import TrainConfig, launch_training
    from mjlab.tasks.registry import load_runner_cls

    runner_cls = load_runner_cls(task_id)
    assert issubclass(runner_cls, rlcore.runners.OnPolicyRunner), runner_cls.__mro__

    def config(iterations: int, resume: bool) -> TrainConfig:
        base = TrainConfig.from_task(task_id)
        base.env.scene.num_envs = 4
        agent = dataclasses.replace(base.agent, max_iterations=iterations, num_steps_per_env=8, save_interval=1,
                                    logger="tensorboard", upload_model=False, experiment_name="dropin",
                                    resume=resume, load_run=".*")
        return dataclasses.replace(base, agent=agent, log_root=str(log_root), gpu_ids=None)

    t0 = time.perf_counter()
    launch_training(task_id, config(2, resume=False))
    first_s = time.perf_counter() - t0
    runs = sorted((log_root / "dropin").iterdir())
    first = runs[-1]
    checkpoints = sorted(p.name for p in first.glob("model_*.pt"))
    onnx = first / f"{first.name}.onnx"
    metadata = {}
    if onnx.is_file():
        import onnx as onnx_lib

        metadata = {p.key: p.value for p in onnx_lib.load(str(onnx)).metadata_props}
    time.sleep(1.1)  # the resumed run's directory is named by the second
    t0 = time.perf_counter()
    launch_training(task_id, config(1, resume=True))
    resumed_s = time.perf_counter() - t0
    second = sorted((log_root / "dropin").iterdir())[-1]
    import torch

    resumed_ckpt = sorted(second.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    last_iter = int(torch.load(resumed_ckpt[-1], weights_only=False)["iter"]) if resumed_ckpt else -1
    print("mjlab_train_path: " + json.dumps({
        "runner_mro": [c.__module__ + "." + c.__name__ for c in runner_cls.__mro__[:4]],
        "first_run": first.name, "checkpoints": checkpoints, "onnx": onnx.is_file(),
        "onnx_metadata_keys": sorted(metadata)[:12], "resumed_run": second.name,
        "resumed_checkpoints": [p.name for p in resumed_ckpt], "resumed_last_iter": last_iter,
        "git_files": sorted(p.name for p in (first / "git").glob("*")) if (first / "git").is_dir() else [],
        "first_s": round(first_s, 1), "resumed_s": round(resumed_s, 1)}))


if __name__ == "__main__":
    main()
