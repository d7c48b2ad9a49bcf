"""Policies shipped with the Go2 task: exported ONNX files that carry their own interface.

Each file was trained and exported by rlcore's own pipeline with the command recorded here, and carries its
interface (joint order, gains, action scale, timing, observation layout, command ranges, recurrent state) in its
``metadata_props``, so ``python -m rlcore.play pretrained=<name>`` and ``python -m rlcore.robustness`` rebuild
the task from the file alone, with no checkpoint and no training::

    python -m rlcore.play task=go2 pretrained=go2_flat video=true

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
        summary="PPO teacher on flat ground (task=go2 defaults): MLP [128, 128, 128] over the policy group and its "
                "last 5 frames with a base-velocity estimator in the graph, trained on randomised and loaded robots; "
                "the graph carries the integral loop on the command (gain 2, limit 0.15, anti-windup band 0.2; state "
                "u_in/u_out)",
        command="python -m rlcore.train task=go2 seed=1; python -m rlcore.export checkpoint=<run>/model_369.pt "
                "format=onnx (370 iterations, 16-22 min on 2 cores)",
        robustness="nominal_err=0.047 mean_err=0.054 worst_err=0.079 falls=0/170",
    ),
    "go2_flat_student": Pretrained(
        path=_here("go2_flat_student.onnx"),
        task="go2",
        summary="blind LSTM student (128 units) distilled from go2_flat: reads only the policy group (what the robot "
                "measures), its memory stands in for the teacher's history; a base-velocity estimator on the memory "
                "and the same integral loop as go2_flat; randomised robots, collected with action noise 0.1 (the "
                "distillation default)",
        command="python -m rlcore.train task=go2 algorithm=distillation model=rnn teacher=<go2_flat run> seed=1 "
                "runner.max_iterations=280; python -m rlcore.export checkpoint=<run>/model_279.pt format=onnx (about "
                "16 min on 2 cores)",
        robustness="nominal_err=0.046 mean_err=0.053 worst_err=0.082 falls=0/170",
    ),
}
