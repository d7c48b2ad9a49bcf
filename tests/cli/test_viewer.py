"""``python -m rlcore.play checkpoint=<run> viewer=true``: MuJoCo's viewer driven from the keyboard.

- :class:`rlcore.viewer.KeyCommands` (key -> velocity command, clamping) and the guides drawn in the scene,
  without a display;
- the errors: a task without velocity commands, no display (one line, exit status 2);
- the real thing under Xvfb with software GL: the viewer of a tiny Go2 policy opened in a subprocess, keys sent
  with xdotool, the command read back from the status file the viewer writes (``RLCORE_VIEWER_STATUS``) and
  seen in screenshots (the green command arrow appears and goes), reset and Ctrl+Q. The tiny policy does not
  walk, so that the robot follows the command is checked by hand with a trained one (README).
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from cli_helpers import REPO_ROOT, assert_user_error, check_ok, cli_env, run_module

from rlcore.errors import ConfigError
from rlcore.viewer import (
    KEY_BACKSPACE,
    KEY_DOWN,
    KEY_E,
    KEY_LEFT,
    KEY_Q,
    KEY_RIGHT,
    KEY_SPACE,
    KEY_UP,
    KeyCommands,
    check_display,
    draw_guides,
    make_viewer_env,
)

mujoco = pytest.importorskip("mujoco")

GO2_RANGES = [[-1.0, 1.0], [-0.5, 0.5], [-1.0, 1.0]]  # conf/task/go2.yaml


# ---------------------------------------------------------------------------- keys -> command (no display)
def test_each_press_moves_a_tenth_of_the_range_clamped_to_it():
    keys = KeyCommands(GO2_RANGES)
    assert keys.step == pytest.approx([0.2, 0.1, 0.2]) and keys.command == [0.0, 0.0, 0.0]
    for _ in range(3):
        assert keys.press(KEY_UP) == "command"
    assert keys.press(KEY_DOWN) == "command"
    assert keys.press(KEY_LEFT) == "command"
    assert keys.press(KEY_E) == "command"
    assert keys.command == [0.4, 0.1, -0.2]  # exact: no floating-point drift
    for _ in range(20):
        keys.press(KEY_UP), keys.press(KEY_RIGHT), keys.press(KEY_Q)
    assert keys.command == [1.0, -0.5, 1.0]  # clamped at the ends of the ranges
    assert keys.overlay() == ("vx\nvy\nyaw rate", "+1.00 m/s\n-0.50 m/s\n+1.00 rad/s")
    assert keys.press(KEY_SPACE) == "command" and keys.command == [0.0, 0.0, 0.0]
    assert keys.overlay()[1] == "+0.00 m/s\n+0.00 m/s\n+0.00 rad/s"  # never "-0.00"


def test_backspace_resets_and_stops_other_keys_change_nothing():
    keys = KeyCommands(GO2_RANGES)
    keys.press(KEY_UP), keys.press(KEY_Q)
    assert keys.press(ord("A")) is None and keys.press(KEY_SPACE + 1) is None
    assert keys.command == [0.2, 0.0, 0.2]
    assert keys.press(KEY_BACKSPACE) == "reset" and keys.command == [0.0, 0.0, 0.0]


def test_ranges_come_from_the_interface_and_are_checked():
    keys = KeyCommands.from_interface({"commands": {"ranges": {"lin_vel_x": [0.5, 1.5], "lin_vel_y": [-0.2, 0.2],
                                                                "ang_vel_yaw": [-2.0, 2.0]}}})
    assert keys.command == [0.5, 0.0, 0.0]  # "stop" is the nearest value to 0 within each range
    assert keys.step == pytest.approx([0.1, 0.04, 0.4])
    keys.press(KEY_DOWN)
    assert keys.command[0] == 0.5
    for bad, words in (([[1, -1], [0, 1], [0, 1]], "range of vx [1, -1]"), ([[0, 1], [0, 1]], "vx, vy and yaw"),
                       ([[0, 1], [0, math.nan], [0, 1]], "range of vy")):
        with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
            KeyCommands(bad)


def test_guides_turn_the_command_into_the_world_frame():
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><geom type='plane' size='0 0 1'/><body pos='0 0 0.3'><freejoint/>"
        "<geom type='box' size='.2 .1 .05'/></body></worldbody></mujoco>")
    data = mujoco.MjData(model)
    data.qpos[:] = [2.3, -0.6, 0.3, math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]  # yaw 90 degrees
    data.qvel[:2] = [0.0, 0.0]
    scn = mujoco.MjvScene(model, 200)
    draw_guides(scn, model, data, 0, [0.8, 0.0, 0.0], grid=True)
    arrow = scn.geoms[0]
    assert arrow.type == mujoco.mjtGeom.mjGEOM_ARROW and scn.ngeom == 1 + 2 * 17  # no velocity arrow at rest
    assert np.asarray(arrow.pos) == pytest.approx([2.3, -0.6, 0.55], abs=1e-6)
    assert np.asarray(arrow.mat).reshape(3, 3)[:, 2] == pytest.approx([0.0, 1.0, 0.0], abs=1e-6)  # forward is +y
    assert arrow.size[2] == pytest.approx(0.8, abs=1e-6)
    lines = [scn.geoms[i] for i in range(1, scn.ngeom)]
    assert {round(float(g.pos[0]), 3) for g in lines} >= {2.0 - 8, 2.0 + 8}  # a grid around the robot, on whole metres
    data.qvel[:2] = [0.5, 0.0]
    draw_guides(scn, model, data, 0, [0.0, 0.0, 0.0], grid=False)
    assert scn.ngeom == 1 and np.asarray(scn.geoms[0].mat).reshape(3, 3)[:, 2] == pytest.approx([1, 0, 0], abs=1e-6)


# ---------------------------------------------------------------------------- errors
def test_a_task_without_velocity_commands_is_one_config_error():
    from rlcore.checkpoint.run_files import RunInfo

    info = RunInfo(checkpoint="x.pt", ckpt={}, train_cfg={}, task={"name": "pendulum", "env": {}}, run_dir=".")
    with pytest.raises(ConfigError) as err:
        make_viewer_env(info, "cpu", 0)
    message = str(err.value)
    assert message.startswith("viewer=true: task pendulum is not a velocity-command task") and "\n" not in message
    assert "go2, go2_rough" in message and "viewer_env" in message  # the valid tasks, what the task lacks


def test_no_display_is_one_config_error(monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("the DISPLAY check is Linux's")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(ConfigError, match="viewer=true needs a display and DISPLAY is not set"):
        check_display()


def go2_args() -> list[str]:
    return ["task=go2", "task.num_envs=4", "runner.num_steps_per_env=4", "runner.max_iterations=1",
            "runner.save_interval=1", "logger=none", "model.actor.hidden_dims=[16]", "model.critic.hidden_dims=[16]",
            "algorithm.num_mini_batches=1", "algorithm.num_learning_epochs=1", "+task.env.sim.threads=1",
            "+task.env.domain_rand.num_variants=2", "seed=1"]


@pytest.fixture(scope="module")
def go2_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("viewer") / "go2"
    check_ok(run_module("rlcore.train", *go2_args(), f"hydra.run.dir={run_dir}"))
    return run_dir


@pytest.mark.slow
def test_play_viewer_without_a_display_exits_with_one_line(go2_run):
    env = cli_env()
    env.pop("DISPLAY", None), env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.run([sys.executable, "-m", "rlcore.play", f"checkpoint={go2_run}", "viewer=true"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert_user_error(proc, "viewer=true needs a display", "video=true")


# ---------------------------------------------------------------------------- the viewer under Xvfb
def read_xwd(data: bytes) -> np.ndarray:
    """An ``xwd`` dump (ZPixmap, 24/32 bits per pixel) as ``uint8 [H, W, 3]`` RGB."""
    header = struct.unpack(">25I", data[:100])
    header_size, width, height, byte_order = header[0], header[4], header[5], header[7]
    bits_per_pixel, bytes_per_line, ncolors = header[11], header[12], header[19]
    assert bits_per_pixel in (24, 32), f"xwd: {bits_per_pixel} bits per pixel"
    start = header_size + 12 * ncolors
    rows = np.frombuffer(data[start:start + bytes_per_line * height], dtype=np.uint8).reshape(height, bytes_per_line)
    pixels = rows[:, :width * bits_per_pixel // 8].reshape(height, width, bits_per_pixel // 8)
    return np.ascontiguousarray(pixels[..., 2::-1] if byte_order == 0 else pixels[..., -3:])  # LSB first: B G R X


def green_pixels(image: np.ndarray) -> int:
    """Pixels of the command arrow's green (nothing else in the scene is green)."""
    r, g, b = (image[..., i].astype(int) for i in range(3))
    return int(((g > r + 60) & (g > b + 60)).sum())


@pytest.mark.slow
def test_viewer_follows_the_keys_under_xvfb(go2_run, xvfb, tmp_path):
    status_file = tmp_path / "status.json"
    env = {**cli_env(), "DISPLAY": xvfb, "MUJOCO_GL": "glfw", "LIBGL_ALWAYS_SOFTWARE": "1", "LP_NUM_THREADS": "1",
           "RLCORE_VIEWER_STATUS": str(status_file)}
    x = {**os.environ, "DISPLAY": xvfb}
    proc = subprocess.Popen([sys.executable, "-m", "rlcore.play", f"checkpoint={go2_run}", "viewer=true"],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def status(until, what: str, timeout: float = 60.0) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc.poll() is not None:
                pytest.fail(f"the viewer exited ({proc.returncode}) waiting for {what}:\n{proc.stdout.read()[-3000:]}")
            try:
                s = json.loads(status_file.read_text())
                if until(s):
                    return s
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}; last status: {status_file.read_text() if status_file.exists() else None}")

    def screenshot(window: str) -> np.ndarray:
        return read_xwd(subprocess.run(["xwd", "-silent", "-id", window], env=x, capture_output=True,
                                       check=True, timeout=30).stdout)

    def drawn(window: str, check, what: str) -> np.ndarray:
        """A screenshot for which ``check`` holds, polled (the window redraws at its own pace on a loaded CPU)."""
        deadline = time.monotonic() + 20
        while True:
            image = screenshot(window)
            if check(image) or time.monotonic() > deadline:
                assert check(image), f"timed out waiting for {what}: {green_pixels(image)} green pixels"
                return image
            time.sleep(0.2)

    def keys(window: str, *names: str) -> None:
        subprocess.run(["xdotool", "key", "--window", window, *names], env=x, check=True, timeout=30)

    try:
        first = status(lambda s: s["step"] >= 10, "the viewer to run 10 steps")
        window = subprocess.run(["xdotool", "search", "--sync", "--name", "MuJoCo"], env=x, capture_output=True,
                                text=True, timeout=30).stdout.split()[-1]
        assert first["command"] == [0.0, 0.0, 0.0] and first["running"]
        assert 0.2 < first["base_pos"][2] < 0.45  # the robot stands (base about 0.3 m high)
        time.sleep(0.3)
        still = drawn(window, lambda im: im.std() > 10 and len(np.unique(im.reshape(-1, 3), axis=0)) > 100,
                      "a rendered scene")  # the first frames of a loaded machine may still be blank
        assert green_pixels(still) == 0  # no command, no arrow

        keys(window, "Up", "Up", "Up", "Left", "q", "q", "e")
        moved = status(lambda s: s["keys_handled"] >= 7, "7 key presses")
        assert moved["command"] == [0.6, 0.1, 0.2]
        assert moved["overlay"] == ["vx\nvy\nyaw rate", "+0.60 m/s\n+0.10 m/s\n+0.20 rad/s"]
        drawn(window, lambda im: green_pixels(im) > 100, "the command arrow")  # drawn over the tracked robot

        keys(window, "space", "Down")
        before = status(lambda s: s["keys_handled"] >= 9, "space, Down")
        assert before["command"] == [-0.2, 0.0, 0.0]
        keys(window, "BackSpace")
        after = status(lambda s: s["keys_handled"] >= 10 and s["resets"] > before["resets"], "the reset")
        assert after["command"] == [0.0, 0.0, 0.0] and after["keys_handled"] == 10
        assert before["episode_step"] > 10 and after["episode_step"] <= after["step"] - before["step"]  # a new episode
        drawn(window, lambda im: green_pixels(im) == 0, "the arrow to go after the reset")
        assert 0.3 < after["realtime_factor"] <= 1.1  # paced to the wall clock, never faster
        keys(window, "ctrl+q")
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    final = json.loads(status_file.read_text())
    assert not final["running"] and final["step"] > after["step"]
    assert f"viewer closed: {final['step']} steps" in out and f"{final['resets']} reset(s)" in out
    assert "policy=torch MLPModel, viewer" in out
