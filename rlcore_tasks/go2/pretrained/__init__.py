"""Policies shipped with the Go2 task: exported ONNX files that carry their own interface.

Each file was trained and exported by rlcore's own pipeline with the command recorded here, and carries its
interface (version 2: joint order, gains, action law, timing, spawn state, observation layout, command semantics,
recurrent state with its reset rule; docs/deployment.md) in its ``metadata_props``, so ``python -m rlcore.play pretrained=<name>`` and ``python -m rlcore.robustness`` rebuild
the task from the file alone, with no checkpoint and no training::

    python -m rlcore.play task=go2 pretrained=go2_flat episodes=1 video=true

The task spec (:mod:`rlcore_tasks.go2.task`) hands this table to rlcore's tools.
"""

from __future__ import annotations

import os

from rlcore.env.task import Pretrained


def _here(file: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), file)


PRETRAINED: dict[str, Pretrained] = {
    "go2_flat": Pretrained(
        path=_here("go2_flat.onnx"),
        task="go2",
        summary="PPO teacher on flat ground (task=go2 defaults, a quarter of its commands a held yaw rate): MLP "
                "[128, 128, 128] over the policy group and its last 5 frames with a base-velocity estimator in the "
                "graph, trained on randomised and loaded robots; the graph carries the integral loop on the command "
                "(planar: gain 2, limit 0.15, band 0.2 m/s; yaw on the gyro: gain 2, limit and band 0.5 rad/s; state "
                "u_in/u_out [1, B, 3])",
        command="python -m rlcore.train task=go2 seed=2 (its policy.onnx, exported at the end with the defaults; or "
                "python -m rlcore.export checkpoint=<run>/model_369.pt format=onnx) (370 iterations; 16.0 min on 2 "
                "cores, shared with other work for part of it)",
        robustness="nominal_err=0.047 mean_err=0.050 worst_err=0.069 falls=0/221",
        yaw="yaw ratio nominal 1.00..1.01, min 1.00 (damping_3/yaw_-1.0); nominal_err_yaw=0.069 "
            "worst_err_yaw=0.144; rise_s nominal step_yaw_1.0=0.18 step_vx_1.0=0.66",
    ),
    "go2_flat_student": Pretrained(
        path=_here("go2_flat_student.onnx"),
        task="go2",
        summary="blind LSTM student (128 units) distilled from go2_flat: reads only the policy group (what the robot "
                "measures), its memory stands in for the teacher's history; a base-velocity estimator on the memory "
                "and the same integral loop as go2_flat (planar and yaw); randomised robots, collected with action "
                "noise 0.1 (the distillation default)",
        command="python -m rlcore.train task=go2 algorithm=distillation model=rnn teacher=<go2_flat run> seed=2 "
                "(280 iterations; its policy.onnx, or python -m rlcore.export checkpoint=<run>/model_279.pt "
                "format=onnx) (15.1 min on 2 cores)",
        robustness="nominal_err=0.049 mean_err=0.054 worst_err=0.068 falls=0/221",
        yaw="yaw ratio nominal 1.00..1.02, min 0.99 (ground_friction_1.2/vx_0.5_yaw_-1.0); nominal_err_yaw=0.069 "
            "worst_err_yaw=0.134; rise_s nominal step_yaw_1.0=0.14 step_vx_1.0=0.68",
    ),
}
