"""torchrun worker of ``test_resume_ranks.py``: each rank runs the resume-equality check of
``tests/runners/resume_check.py`` (PPO; PPO with RND and symmetry; Distillation from a distributed PPO teacher) and
writes what differs.

Usage: ``torchrun --nproc_per_node=2 resume_worker.py <outdir>``; every rank writes ``<outdir>/rank<r>.pt``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
from resume_check import differences, go2_plan, make_runner, run_pair, step_differences


def main(outdir: str) -> None:
    rank = int(os.environ["RANK"])
    out = {}
    ppo_dir = os.path.join(outdir, "ppo")  # every rank passes it, as rlcore.train does; rank 0 writes
    result = run_pair(go2_plan("ppo", ppo_dir), ppo_dir, 4, rank=rank)
    out["ppo"] = {"steps": step_differences(result["full_steps"], result["resumed_steps"]),
                  "state": differences(result["full"], result["resumed"]), "num_steps": result["num_steps"],
                  "counter": result["full"]["runner.env.common_step_counter"],
                  "first_obs": result["full_steps"][0]["obs/policy"], "checkpoint": result["checkpoint"]}
    ext_dir = os.path.join(outdir, "rnd_symmetry")  # per-env extension state: RND's reward normaliser (issue 52)
    plan = go2_plan("ppo", ext_dir, extra=("extension=[rnd,symmetry]", "extension.rnd.reward_normalization=true"))
    result = run_pair(plan, ext_dir, 4, rank=rank)
    out["rnd_symmetry"] = {"steps": step_differences(result["full_steps"], result["resumed_steps"]),
                           "state": differences(result["full"], result["resumed"]),
                           "num_steps": result["num_steps"], "checkpoint": result["checkpoint"],
                           "disc_return": result["full"]["runner.alg.extensions[0].reward_normalizer.disc_return"]}
    teacher_dir = os.path.join(outdir, "teacher")
    make_runner(go2_plan("ppo", teacher_dir), teacher_dir, rank).learn(1)
    student_dir = os.path.join(outdir, "student")
    plan = go2_plan("distillation", student_dir, teacher=os.path.join(teacher_dir, "model_0.pt"),
                    extra=("algorithm.start_weight=4", "algorithm.start_steps=10", "algorithm.forget_prob=0.01"))
    result = run_pair(plan, student_dir, 4, rank=rank)
    out["distillation"] = {"steps": step_differences(result["full_steps"], result["resumed_steps"]),
                           "state": differences(result["full"], result["resumed"]),
                           "num_steps": result["num_steps"], "episode_steps": result["resumed"]["runner.alg.episode_steps"]}
    torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
