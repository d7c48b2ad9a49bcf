"""``bench/rough_eval.py``: the course evaluation of an ONNX policy, on tiny constant policies whose outcome is known.

- a policy of zero actions holds the default pose: every robot stands still (a timeout: no fall, no success); one of
  large constant actions collapses the robot (a fall, early); a robot spawned past the finish line crosses at once;
- the courses are what MuJoCo simulates: stairs_up_13cm's height field has 8 steps of 0.13 m, 0.3 m deep, the
  finish line on the landing; slope_25deg rises at tan(25 deg);
- the last line's form, and the run's mean terrain level read from the train.log next to the file.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
pytest.importorskip("onnxruntime")

import rough_eval

from tests.tasks.test_go2_robustness import constant_policy, go2_meta  # noqa: F401  (go2_meta: a fixture)

LAST = re.compile(r"^rough_eval: stairs_up_13cm=(\d\.\d\d|n/a) stairs_down_13cm=(\d\.\d\d|n/a) "
                  r"slope_25deg=(\d\.\d\d|n/a) rough=(\d\.\d\d|n/a) flat=(\d\.\d\d|n/a) "
                  r"mean_level=(-?\d+\.\d+|n/a) policy=(\S+)$")


@pytest.fixture(scope="module")
def policies(tmp_path_factory, go2_meta):  # noqa: F811
    d = tmp_path_factory.mktemp("rough_eval")
    return {"zero": constant_policy(d / "zero.onnx", 0.0, go2_meta),
            "collapse": constant_policy(d / "collapse.onnx", 4.0, go2_meta)}  # every joint target 1 rad off


@pytest.mark.slow
def test_the_evaluation_flags_a_robot_that_falls_and_one_that_stands_still(policies):
    stand = rough_eval.evaluate_course(policies["zero"], "stairs_up_13cm", robots=2, threads=1, limit_s=1.5)
    assert stand["rate"] == 0.0 and stand["falls"] == 0 and stand["timeouts"] == 2
    assert not stand["crossed"].any() and not stand["fell"].any() and np.isnan(stand["times"]).all()
    assert stand["finish_x"] == pytest.approx(5.0) and stand["limit_s"] == 1.5
    fall = rough_eval.evaluate_course(policies["collapse"], "flat", robots=2, threads=1)
    assert fall["rate"] == 0.0 and fall["falls"] == 2 and fall["timeouts"] == 0 and fall["unstable"] == 0
    assert fall["fell"].all() and not fall["crossed"].any()
    assert fall["limit_s"] == pytest.approx(2 * (7.0 - 1.0) / 0.5 + 4)  # the rule's limit: 28 s on flat


@pytest.mark.slow
def test_a_robot_past_the_finish_line_crosses(policies, monkeypatch):
    import rlcore_tasks.go2.terrain as terrain

    monkeypatch.setattr(terrain, "COURSE_SPAWN_X", 7.5)  # flat: finish at 7.0, the robots spawn past it
    r = rough_eval.evaluate_course(policies["zero"], "flat", robots=2, threads=1)
    assert r["rate"] == 1.0 and r["crossed"].all() and r["falls"] == 0 and r["timeouts"] == 0
    assert r["times"] == pytest.approx([0.02, 0.02])  # crossed at the first control step
    assert r["limit_s"] == pytest.approx(2 * (7.0 - 7.5) / 0.5 + 4)


def _mujoco_profile(course: str) -> tuple[np.ndarray, np.ndarray, float]:
    """x [m] and MuJoCo's ground height [m] of the course's vertices along the strip's centre line, finish x."""
    from rlcore_tasks.go2.env import Go2Env

    env = Go2Env(num_envs=1, seed=0, sim={"threads": 1}, terrain={"type": "course", "course": course})
    m, finish, hscale = env.sim.model, env.terrain.finish_x, env.terrain.hscale
    rows, cols = int(m.hfield_nrow[0]), int(m.hfield_ncol[0])
    geom = env.sim.ground_geom
    heights = m.hfield_data.reshape(rows, cols) * m.hfield_size[0, 2] + m.geom_pos[geom, 2]
    x = m.geom_pos[geom, 0] - m.hfield_size[0, 0] + np.arange(cols) * hscale
    y = m.geom_pos[geom, 1] - m.hfield_size[0, 1] + np.arange(rows) * hscale
    env.close()
    return x, heights[int(np.argmin(np.abs(y - 1.5)))], finish


@pytest.mark.slow
def test_stairs_up_13cm_as_mujoco_sees_them():
    x, h, finish = _mujoco_profile("stairs_up_13cm")
    rises = np.flatnonzero(np.abs(np.diff(h)) > 1e-6)
    assert len(rises) == 8 and np.allclose(np.diff(h)[rises], 0.13, atol=1e-5)  # 8 steps of 13 cm
    assert np.allclose(np.diff(x[rises + 1]), 0.3, atol=1e-6)  # 0.3 m deep
    assert x[rises[0] + 1] == pytest.approx(2.0) and np.allclose(h[x < 1.95], 0.0, atol=1e-6)  # flat start
    landing = x[rises[-1] + 1]  # where the top step (the landing) begins
    assert landing < finish < x[-1] and h[np.argmin(np.abs(x - finish))] == pytest.approx(8 * 0.13, abs=1e-5)
    assert np.allclose(h[x >= landing], 8 * 0.13, atol=1e-5)


@pytest.mark.slow
def test_slope_25deg_rises_at_tan_25():
    x, h, finish = _mujoco_profile("slope_25deg")
    up = (x >= 2.0 - 1e-6) & (x <= 4.0 + 1e-6)
    assert np.allclose(np.diff(h[up]) / np.diff(x[up]), math.tan(math.radians(25)), atol=1e-4)
    assert h[np.argmin(np.abs(x - finish))] == pytest.approx(0.0, abs=1e-5) and finish == pytest.approx(7.5)


@pytest.mark.slow
def test_last_line_and_mean_level(policies, tmp_path, capsys):
    import shutil

    path = shutil.copy(policies["zero"], tmp_path / "policy.onnx")
    (tmp_path / "train.log").write_text("it 1 terrain_level 0.800 physics_failures 0\n"
                                        "it 2 Episode/terrain_level 9.0 terrain_level 1.405 physics_failures 0\n")
    rough_eval.main([str(tmp_path), "--robots", "2", "--courses", "flat", "--threads", "1", "--limit-s", "0.5"])
    lines = capsys.readouterr().out.strip().splitlines()
    match = LAST.match(lines[-1])
    assert match, lines[-1]
    assert match.groups() == ("n/a", "n/a", "n/a", "n/a", "0.00", "1.405", str(path))  # a run dir: its policy.onnx
    assert re.match(r"^flat\s+2\s+0\.00\s+0\s+2\s+-\s+0\.5$", lines[-2]), lines[-2]  # 2 robots, 2 timeouts


def test_mean_level_of_a_bare_file(tmp_path):
    onnx = tmp_path / "policy.onnx"
    assert rough_eval.mean_level(str(onnx)) is None  # no train.log
    (tmp_path / "train.log").write_text("terrain_level 2.5 x\nnothing\n")
    assert rough_eval.mean_level(str(onnx)) == 2.5 == rough_eval.mean_level(str(tmp_path))
    exported = tmp_path / "exported"  # python -m rlcore.export's file: the run's log is one level up
    exported.mkdir()
    assert rough_eval.mean_level(str(exported / "policy.onnx")) == 2.5
    other = tmp_path / "elsewhere"  # any other folder without a log: none
    other.mkdir()
    assert rough_eval.mean_level(str(other / "policy.onnx")) is None


def test_training_log_gives_minutes_and_level_per_checkpoint_iteration(tmp_path):
    (tmp_path / "train.log").write_text(
        "[rlcore] run directory: x\n"
        "it 1/3  2,000 steps/s  (collect 5.00s, learn 7.00s)  return n/a\n"
        "    lin_vel_error 0.7  terrain_level 1.500  physics_failures 0\n"
        "it 2/3  2,000 steps/s  (collect 4.00s, learn 8.00s)  return 0.1\n"
        "    lin_vel_error 0.6  terrain_level 1.750  physics_failures 0\n"
        "it 3/3  2,000 steps/s  (collect 6.00s, learn 6.00s)  return 0.2\n")
    log = rough_eval.training_log(str(tmp_path))
    # console "it k" is iteration k - 1 (model_<k-1>.pt); minutes are the summed collect + learn times
    assert log == {0: (pytest.approx(12 / 60), 1.5), 1: (pytest.approx(24 / 60), 1.75), 2: (pytest.approx(36 / 60), None)}


@pytest.mark.slow
def test_course_robots_hold_heading_x_under_the_heading_controller(go2_meta):  # noqa: F811
    env = rough_eval.course_env(go2_meta, "flat", 3, threads=1)
    try:
        assert env.cfg_task.commands.heading_command and bool(env.heading_envs.all())
        assert float(env.heading_target.abs().max()) == 0.0
        env.commands[:] = torch.tensor([rough_eval.SPEED, 0.0, 0.0])
        env.sim.qpos[:, 3:7] = [math.cos(0.2), 0.0, 0.0, math.sin(0.2)]  # turned 0.4 rad left
        env.sim.refresh()
        env._refresh_state()
        env.step(torch.zeros(3, 12))
        # the yaw-rate command turns it back: 0.5 x the heading error (about -0.4 rad after one step)
        assert torch.all(env.commands[:, 2] < -0.15) and torch.all(env.commands[:, 0] == rough_eval.SPEED)
    finally:
        env.close()
