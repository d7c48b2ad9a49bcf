"""``rlcore.train.run(cfg, log_dir, callback=...)``: the hook benchmarks use for time budgets (bench/teacher_student.py)."""

from __future__ import annotations

import os

from cli_helpers import TINY


def test_callback_sees_every_iteration_and_stops_training(tmp_path):
    from rlcore.config.cli import compose
    from rlcore.runners import OnPolicyRunner
    from rlcore.train import run

    seen = []

    def callback(runner, it: int, stats: dict) -> bool:
        seen.append((type(runner), it, runner.current_learning_iteration, "collect_s" in stats))
        return it == 1  # stop after the second iteration of five

    overrides = [o for o in TINY if not o.startswith("runner.max_iterations")]
    path = run(compose(["task=pendulum", *overrides, "runner.max_iterations=5"]), log_dir=str(tmp_path),
               callback=callback)
    assert seen == [(OnPolicyRunner, 0, 0, True), (OnPolicyRunner, 1, 1, True)]
    assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".pt")) == ["model_0.pt", "model_1.pt"]
    assert path == str(tmp_path / "policy.onnx") and os.path.isfile(path)  # the run still exports its policy
