"""Go2's ``render()``, what every video shows: a checker floor that moves past a robot kept in the middle of the
frame, a sky down to the horizon (no black band), the robot's shadow. "fast" frames (no multisampling or
reflections; the default, what videos during training use) and MuJoCo's "full" ones show the same scene. The
scenery is visual only: the physics steps bit for bit as without it. A wrong quality is one line."""

from __future__ import annotations

import os

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
os.environ.setdefault("MUJOCO_GL", "egl")

import rlcore_tasks.go2.sim as go2_sim  # noqa: E402
from rlcore.env.task import make_task  # noqa: E402
from rlcore.errors import ConfigError  # noqa: E402

ROUGH = {"type": "rough"}


def make(quality: str = "fast", terrain: dict | None = None):
    return make_task("go2", num_envs=1, device="cpu", seed=0, sim={"threads": 1, "render_quality": quality},
                     **({"terrain": terrain} if terrain else {}))


def render(env, width: int = 160, height: int = 120) -> np.ndarray:
    try:
        return env.render(width=width, height=height)
    except Exception as err:  # no OpenGL context on this machine
        pytest.skip(f"cannot render here: {err}")


def frame(quality: str) -> np.ndarray:
    env = make(quality)
    try:
        return render(env)
    finally:
        env.close()


def floor_figures(env, width: int = 320, height: int = 240) -> dict:
    """What a frame shows of the ground: dark rows in the top quarter (the old scene's black band above the floor:
    11 of 60 rows at 320x240), the grey-level spread of the bottom quarter (the floor in front of the robot: 0.0 on
    the old bare grey plane, ~19.5 with the checker floor), and the share of those bottom-quarter pixels that change
    when the robot is 0.43 m further on (the camera follows it: 0.000 on the old plane, ~0.44 now)."""
    before = render(env, width, height)
    env.sim.qpos[0, :2] += [0.37, 0.21]  # the renderer draws a copy of this state; physics is not stepped
    after = render(env, width, height)
    bottom = slice(int(height * 0.75), height)
    changed = np.abs(before.astype(int) - after.astype(int)).sum(axis=2)[bottom] > 30
    return {"dark_top_rows": int((before[: height // 4].max(axis=(1, 2)) < 30).sum()),
            "floor_std": float(before[bottom].astype(float).mean(axis=2).std()),
            "floor_moves": float(changed.mean())}


@pytest.mark.parametrize("terrain", [None, ROUGH], ids=["flat", "rough"])
@pytest.mark.slow
def test_a_frame_shows_the_floor_around_the_robot_and_sky_down_to_the_horizon(terrain):
    env = make("fast", terrain)
    try:
        figures = floor_figures(env)
    finally:
        env.close()
    assert figures["dark_top_rows"] == 0, figures  # sky, not a black band, above the floor
    assert figures["floor_std"] > 8.0, figures  # checker squares and grid lines below the robot, not a bare plane
    assert figures["floor_moves"] > 0.1, figures  # the floor moves past the followed robot


def pixel_of(model: mujoco.MjModel, qpos: np.ndarray, point: np.ndarray, width: int, height: int) -> np.ndarray:
    """Where ``point`` (world) lands in a ``width x height`` frame of the ``track`` camera, in fractions of the frame."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    cam = model.camera("track").id
    v = data.cam_xmat[cam].reshape(3, 3).T @ (point - data.cam_xpos[cam])  # camera frame: x right, y up, -z ahead
    focal = (height / 2) / np.tan(np.radians(model.cam_fovy[cam]) / 2)
    return np.array([0.5 + focal * v[0] / -v[2] / width, 0.5 - focal * v[1] / -v[2] / height])


@pytest.mark.parametrize("shift", [(0.0, 0.0), (5.0, -3.0)])
def test_the_camera_keeps_the_robot_in_the_middle_of_the_frame(shift):
    """The old camera looked at the ground under the robot: its base sat 26 % of the height from the top (0.259)."""
    env = make("fast")
    try:
        qpos = env.sim.qpos[0].astype(np.float64).copy()
        qpos[:2] += shift
        centre = pixel_of(env.sim.model, qpos, qpos[:3], 640, 480)
    finally:
        env.close()
    assert np.all(np.abs(centre - 0.5) < 0.08), centre


@pytest.mark.slow
def test_fast_and_full_frames_show_the_same_scene_and_both_draw_the_robots_shadow():
    env = make("fast")
    try:
        fast = render(env)
        # The robot's shadow: turning the light's shadow off brightens the ground under the robot (half as bright
        # with it) far more than the rest of the floor (where a shadow-casting light draws 1.17x brighter).
        env.sim.model.light_castshadow[:] = 0
        unshadowed = render(env).astype(float).mean(axis=2)
        qpos = env.sim.qpos[0].astype(np.float64).copy()
        below = np.array([qpos[0], qpos[1], 0.0])
        col, row = (pixel_of(env.sim.model, qpos, below, 160, 120) * [160, 120]).astype(int)
    finally:
        env.close()
    full = frame("full")
    assert fast.shape == full.shape == (120, 160, 3) and fast.dtype == np.uint8
    assert fast.std() > 10 and full.std() > 10  # both draw a scene, not a blank
    diff = np.abs(fast.astype(int) - full.astype(int)).sum(axis=2)
    # Same camera, robot, floor and shadow: only the smoothed (multisampled) edges differ.
    assert 0.001 < (diff > 30).mean() < 0.1
    ratio = fast.astype(float).mean(axis=2) / np.maximum(unshadowed, 1.0)
    under, floor = ratio[row - 1:row + 2, col - 1:col + 2].mean(), np.median(ratio[-20:])
    assert under < 0.8 * floor, (under, floor)


@pytest.mark.parametrize("terrain", [None, ROUGH], ids=["flat", "rough"])
def test_the_scenery_changes_no_physics(monkeypatch, terrain):
    """The floor's material, sky, light and camera leave every physics step bit for bit as without them."""
    env = make("fast", terrain)
    cfg, ground = env.cfg_task, env.terrain
    env.close()
    dressed = go2_sim.build_model(cfg, ground)
    monkeypatch.setattr(go2_sim, "add_scenery", lambda spec, geom: None)
    bare = go2_sim.build_model(cfg, ground)
    assert dressed.nmat == bare.nmat + 1 and dressed.ntex == bare.ntex + 2 and dressed.nlight == bare.nlight + 1
    states = []
    for model in (dressed, bare):
        data = mujoco.MjData(model)
        rng = np.random.default_rng(0)
        trace, contacts = [], 0
        for _ in range(300):
            data.ctrl[:] = model.key_ctrl[0] if model.nkey else 0.0
            data.ctrl[:] += rng.normal(0.0, 0.3, model.nu)
            mujoco.mj_step(model, data)
            contacts = max(contacts, data.ncon)
            trace.append(np.concatenate([data.qpos, data.qvel, data.sensordata]))
        states.append((np.array(trace), contacts))
    assert np.array_equal(states[0][0], states[1][0])
    assert states[0][1] >= 4  # the feet touched the ground: contacts were simulated


def test_unknown_render_quality_is_one_line():
    with pytest.raises(ConfigError, match=r"go2.sim.render_quality: 'nice'; use one of \['fast', 'full'\]"):
        make_task("go2", num_envs=1, device="cpu", seed=0, sim={"render_quality": "nice"})
