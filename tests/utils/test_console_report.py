"""The per-iteration console block shows the task's metrics next to return and losses."""

from __future__ import annotations

import math

from rlcore.logging.logger import ConsoleReport


def test_console_report_shows_task_metrics_but_not_reward_terms(capsys):
    report = ConsoleReport(total_iterations=10)
    stats = {"Episode/mean_return": 1.5, "Episode/mean_length": 20.0, "Env/metrics/lin_vel_error": 0.3125,
             "Env/terrain_level": 2.5, "Env/reward/torques": -0.01, "Env/metrics/not_yet": math.nan}
    report.print(0, steps=1000, collect_s=0.5, learn_s=0.5, stats=stats, losses={"value": 0.25})
    out = capsys.readouterr().out
    assert "return 1.500" in out and "ep len 20.0" in out and "value 0.25" in out
    assert "lin_vel_error 0.3125" in out and "terrain_level 2.5" in out
    assert "torques" not in out and "not_yet" not in out  # reward terms stay in the logs; NaN (no episode yet) hidden
