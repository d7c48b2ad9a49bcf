"""Files of deployment interface version 1 (exported before 2026-12-07) still run in ``rlcore.robustness`` and
``play``.

A version-1 file is rebuilt here from a shipped graph and the metadata the shipped files carried before their
re-export (``data/<name>_v1_metadata.json``, read from them unchanged): the same graph shape, the old keys
(``command_ranges``, the integral loop's ``law`` prose, ``start``/``stop`` in ``obs_layout``, ``noise``/``bias`` per
term, no ``interface_version``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest

pytest.importorskip("mujoco")

from rlcore.config.cli import parse_key_values
from rlcore.config.schema import PlayCfg
from rlcore.deployment import METADATA_PREFIX, read_onnx_interface, write_onnx_metadata
from rlcore.play import play
from rlcore.robustness import evaluate
from rlcore_tasks.go2.pretrained import PRETRAINED

pytestmark = pytest.mark.slow  # closed loops in MuJoCo, seconds each

DATA = Path(__file__).parent / "data"


def version_1_file(name: str, tmp_path: Path) -> str:
    """The shipped ``name``'s graph with its version-1 metadata."""
    path = str(tmp_path / f"{name}_v1.onnx")
    shutil.copy(PRETRAINED[name].path, path)
    model = onnx.load(path)
    kept = [p for p in model.metadata_props if not p.key.startswith(METADATA_PREFIX)]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, path)
    write_onnx_metadata(path, json.loads((DATA / f"{name}_v1_metadata.json").read_text()), validate=False)
    return path


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_a_version_1_file_runs_in_robustness_and_play(name, tmp_path, capsys):
    path = version_1_file(name, tmp_path)
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
