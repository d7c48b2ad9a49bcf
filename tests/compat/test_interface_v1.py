"""Files of deployment interface version 1 (exported before 2026-12-07) still run in ``rlcore.robustness`` and
``play``.

``data/<name>_v1.onnx`` are the shipped files of 2026-12-05, unchanged: the old keys (``command_ranges``, the
integral loop's ``law`` prose, ``start``/``stop`` in ``obs_layout``, ``noise``/``bias`` per term, no
``interface_version``), a planar-only integral loop (``u`` of 2 columns).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mujoco")

from rlcore.config.cli import parse_key_values
from rlcore.config.schema import PlayCfg
from rlcore.deployment import read_onnx_interface
from rlcore.play import play
from rlcore.robustness import evaluate

pytestmark = pytest.mark.slow  # closed loops in MuJoCo, seconds each

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_a_version_1_file_runs_in_robustness_and_play(name):
    path = str(DATA / f"{name}_v1.onnx")
    raw = read_onnx_interface(path, raw=True)
    assert "interface_version" not in raw and "law" in raw["command_integral"]
    result = evaluate(path, variants=["nominal"], commands=[("vx_0.8", (0.8, 0.0, 0.0)), ("yaw_1.0", (0.0, 0.0, 1.0))],
                      settle_s=1.0, measure_s=2.0, threads=1, table="none")
    assert result["falls"] == 0
    forward, turn = result["cases"]
    assert abs(forward["vel"][0] - 0.8) < 0.15 and turn["vel"][2] > 0.5  # the file walks and turns as it did
    played = play(parse_key_values([f"onnx={path}", "episodes=1", "num_envs=2", "max_steps=100", "threads=1",
                                    "seed=1"], PlayCfg, "play"))
    assert played["steps"] == 100 and played["returns"] == []  # nobody fell
    assert played["metrics"]["metrics/lin_vel_error_now"] < 0.3
