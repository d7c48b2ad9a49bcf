"""``python -m rlcore.play checkpoint=<run> viewer=true [onnx=<file>]``: a trained legged policy in MuJoCo's viewer,
driven from the keyboard.

One env of the checkpoint's task runs in real time (each step waits for the wall clock to reach the env's
``step_dt``) in ``mujoco.viewer.launch_passive``; the camera tracks the robot's base, the current velocity
command is shown in the top-left corner and drawn as a green arrow above the robot (its actual planar velocity
in blue), and a 1 m grid on a flat ground shows the motion. Keys (GLFW codes, as MuJoCo's ``key_callback`` passes them):

==============  ===========================================
Up / Down       forward velocity vx + / -
Left / Right    lateral velocity vy + / - (left is +y)
Q / E           yaw rate + / - (turn left / right)
Space           stop: every command back to 0
Backspace       reset the robot (and stop)
==============  ===========================================

Each press moves a command by a tenth of its range (the task's ``commands["ranges"]`` from
``deployment_interface()``), clamped to that range. MuJoCo's own viewer keys keep working (Esc: free camera,
mouse: rotate and zoom, Ctrl+Q: quit), except that the visualisation flags bound to Q and E (camera frames,
equality constraints) stay as they were: those letters are taken.

The task must be a MuJoCo task with velocity commands: its env has ``commands [N, 3]`` (vx, vy, yaw rate),
``sim.model`` (the ``MjModel`` drawn), ``sim.qpos [N, nq]`` and ``deployment_interface()["commands"]["ranges"]``, and
its :class:`~rlcore.env.task.TaskSpec` gives ``viewer_env``: the env settings for one robot driven by hand (the
Go2's: heading mode off, commands never resampled, no pushes, hour-long episodes; a fall still resets the robot).
The viewer builds the task with one env and those settings.

For scripts and tests, ``RLCORE_VIEWER_STATUS=<file.json>`` makes the loop write its state there every few
steps and after every key: step, episode step, command, base position and yaw, resets, the overlay text, real-time
factor.
"""

from __future__ import annotations

import copy
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence

import glfw
import mujoco
import mujoco.viewer
import numpy as np
import torch

from rlcore.checkpoint.run_files import make_run_env
from rlcore.config.cli import merge_settings
from rlcore.env.task import get_task, tasks_with
from rlcore.errors import ConfigError
from rlcore.logging.video import control_period

# GLFW key codes (what mujoco.viewer's key_callback receives).
KEY_SPACE, KEY_E, KEY_Q = 32, 69, 81
KEY_BACKSPACE, KEY_RIGHT, KEY_LEFT, KEY_DOWN, KEY_UP = 259, 262, 263, 264, 265

#: key -> (command index, direction): 0 vx, 1 vy, 2 yaw rate.
BINDINGS = {KEY_UP: (0, 1), KEY_DOWN: (0, -1), KEY_LEFT: (1, 1), KEY_RIGHT: (1, -1), KEY_Q: (2, 1), KEY_E: (2, -1)}
HELP = ("Up / Down\nLeft / Right\nQ / E\nSpace\nBackspace", "vx + / -\nvy + / -\nyaw rate + / -\nstop\nreset")

STATUS_ENV = "RLCORE_VIEWER_STATUS"


class KeyCommands:
    """The velocity command ``[vx, vy, yaw rate]`` set from key presses: pure state, no display.

    Args:
        ranges: ``[[lo, hi]] * 3``, the command ranges of vx, vy and yaw rate (the task's training ranges).
        divisions: presses that span a whole range (a press moves a command by ``(hi - lo) / divisions``).
    """

    NAMES = ("vx", "vy", "yaw rate")
    UNITS = ("m/s", "m/s", "rad/s")

    def __init__(self, ranges: Sequence[Sequence[float]], divisions: int = 10) -> None:
        ranges = [list(r) for r in ranges]
        if len(ranges) != 3 or any(len(r) != 2 for r in ranges):
            raise ConfigError(f"command ranges {ranges}: need [lo, hi] for vx, vy and yaw rate.")
        for name, (lo, hi) in zip(self.NAMES, ranges):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(f"command range of {name} [{lo}, {hi}]: need finite lo <= hi.")
        if int(divisions) < 1:
            raise ConfigError(f"divisions={divisions}: need >= 1.")
        self.low = [float(lo) for lo, _ in ranges]
        self.high = [float(hi) for _, hi in ranges]
        self.step = [(hi - lo) / int(divisions) for lo, hi in zip(self.low, self.high)]
        self.command = [0.0, 0.0, 0.0]
        self.stop()

    @classmethod
    def from_interface(cls, interface: dict) -> KeyCommands:
        """From an env's ``deployment_interface()`` (its ``commands["ranges"]``: lin_vel_x, lin_vel_y, ang_vel_yaw)."""
        ranges = (interface.get("commands") or {}).get("ranges") or {}
        return cls([ranges[k] for k in ("lin_vel_x", "lin_vel_y", "ang_vel_yaw")])

    def _clamp(self, i: int, value: float) -> float:
        return min(self.high[i], max(self.low[i], round(value, 6))) + 0.0  # + 0.0: no -0.0

    def stop(self) -> None:
        """Every command to 0 (to the nearest value within its range)."""
        self.command = [self._clamp(i, 0.0) for i in range(3)]

    def press(self, key: int) -> str | None:
        """Apply one key press; returns ``"command"`` (a command moved or stopped), ``"reset"`` (reset the robot;
        commands stopped) or None (not one of the viewer's keys: nothing changes)."""
        if key in BINDINGS:
            i, direction = BINDINGS[key]
            self.command[i] = self._clamp(i, self.command[i] + direction * self.step[i])
            return "command"
        if key == KEY_SPACE:
            self.stop()
            return "command"
        if key == KEY_BACKSPACE:
            self.stop()
            return "reset"
        return None

    def overlay(self) -> tuple[str, str]:
        """The two text columns shown on screen: names, and values with units."""
        return "\n".join(self.NAMES), "\n".join(f"{v:+.2f} {u}" for v, u in zip(self.command, self.UNITS))


# ============================================================================ the env
def check_viewer_env(env, task: str) -> None:
    """Raise ConfigError (one line) unless ``env`` is a MuJoCo task with velocity commands the viewer can drive."""
    sim = getattr(env, "sim", None)
    missing = []
    commands = getattr(env, "commands", None)
    if not (isinstance(commands, torch.Tensor) and commands.ndim == 2 and commands.shape[1] == 3):
        missing.append("a commands tensor [N, 3]")
    if not isinstance(getattr(sim, "model", None), mujoco.MjModel) or getattr(sim, "qpos", None) is None:
        missing.append("a MuJoCo model (sim.model, sim.qpos)")
    interface = env.deployment_interface() if callable(getattr(env, "deployment_interface", None)) else {}
    if "ranges" not in (interface.get("commands") or {}):
        missing.append("command ranges (deployment_interface())")
    if missing:
        raise ConfigError(f"viewer=true: task {task} has no {', no '.join(missing)}; the viewer drives MuJoCo tasks "
                          f"with velocity commands: {', '.join(tasks_with('viewer_env'))}.")


def make_viewer_env(info, device: str, seed: int):
    """The checkpoint's task (a :class:`~rlcore.checkpoint.run_files.RunInfo`) as one env for the viewer (see module doc)."""
    task = str(info.task["name"])
    settings = get_task(task).viewer_env
    if settings is None:
        raise ConfigError(f"viewer=true: task {task} is not a velocity-command task (its TaskSpec gives no viewer_env); "
                          f"the viewer drives MuJoCo tasks with velocity commands: {', '.join(tasks_with('viewer_env'))}.")
    viewer_info = copy.copy(info)
    viewer_info.task = {**info.task, "env": merge_settings(copy.deepcopy(dict(info.task.get("env") or {})), dict(settings))}
    try:
        env = make_run_env(viewer_info, 1, device, seed)
    except (ConfigError, TypeError) as err:  # a task without these settings cannot be driven by velocity commands
        raise ConfigError(f"viewer=true: task {task} is not a velocity-command task; the viewer drives MuJoCo tasks "
                          f"with velocity commands: {', '.join(tasks_with('viewer_env'))} (the task refused the viewer's settings: "
                          f"{' '.join(str(err).split())[:160]}).") from None
    check_viewer_env(env, task)
    return env


# ============================================================================ the window
def check_display() -> None:
    """Raise ConfigError unless a window can be opened here (a display, GLFW initialised)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError("viewer=true needs a display and DISPLAY is not set: run it on a desktop, over ssh -X, or "
                          "under xvfb-run; on a headless machine record a video instead (video=true).")
    errors: list[str] = []
    glfw.set_error_callback(lambda code, text: errors.append(text.decode() if isinstance(text, bytes) else str(text)))
    if not glfw.init():
        raise ConfigError(f"viewer=true: cannot open a window ({'; '.join(errors) or 'GLFW failed to initialise'}, "
                          f"DISPLAY={os.environ.get('DISPLAY')!r}); record a video instead (video=true).")


def _free_joint(model) -> tuple[int, int]:
    """``(qpos address, body id)`` of the model's first free joint (the robot's base)."""
    for j in range(model.njnt):
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            return int(model.jnt_qposadr[j]), int(model.jnt_bodyid[j])
    raise ConfigError("viewer=true: the task's MuJoCo model has no free joint (no floating base to track).")


def draw_guides(scn, model, data, base_adr: int, command: Sequence[float], grid: bool) -> None:
    """Fill ``scn`` (the viewer's ``user_scn``) with what the scene lacks for driving by hand: the commanded planar
    velocity (green arrow, turned from the base frame to the world) and the base's actual one (blue) above the
    robot, and on a plane a 1 m grid around it (the camera follows the robot: a bare plane would show no motion)."""
    pos = np.array(data.qpos[base_adr:base_adr + 3], dtype=np.float64)
    w, x, y, z = data.qpos[base_adr + 3:base_adr + 7]
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    c, s = math.cos(yaw), math.sin(yaw)
    top = pos + np.array([0.0, 0.0, 0.25])
    segments = [(np.array([c * command[0] - s * command[1], s * command[0] + c * command[1], 0.0]),
                 (0.1, 0.8, 0.2, 1.0), 0.02),
                (np.array([data.qvel[0], data.qvel[1], 0.0]), (0.2, 0.4, 1.0, 1.0), 0.012)]
    shapes = [(mujoco.mjtGeom.mjGEOM_ARROW, top + [0, 0, 0.05 * i], top + [0, 0, 0.05 * i] + v, rgba, width)
              for i, (v, rgba, width) in enumerate(segments) if np.linalg.norm(v) > 1e-3]
    if grid:
        cx, cy, half = round(float(pos[0])), round(float(pos[1])), 8
        for k in range(-half, half + 1):
            shapes.append((mujoco.mjtGeom.mjGEOM_LINE, np.array([cx + k, cy - half, 0.002]),
                           np.array([cx + k, cy + half, 0.002]), (1.0, 1.0, 1.0, 0.35), 1.5))
            shapes.append((mujoco.mjtGeom.mjGEOM_LINE, np.array([cx - half, cy + k, 0.002]),
                           np.array([cx + half, cy + k, 0.002]), (1.0, 1.0, 1.0, 0.35), 1.5))
    scn.ngeom = 0
    for kind, start, end, rgba, width in shapes[:scn.maxgeom]:
        geom = scn.geoms[scn.ngeom]
        mujoco.mjv_initGeom(geom, kind, np.zeros(3), np.zeros(3), np.eye(3).ravel(), np.array(rgba, dtype=np.float32))
        mujoco.mjv_connector(geom, kind, width, start, end)
        scn.ngeom += 1


def _write_status(path: str, status: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(status, f)
    os.replace(tmp, path)


def run_viewer(env, actor, device: str = "cpu", max_steps: int | None = None, status_path: str | None = None,
               out: Callable[[str], None] = print) -> dict:
    """Run ``actor`` (observations -> actions ``[1, A]``; ``reset(dones)``) in ``env`` in MuJoCo's viewer until the
    window closes (or ``max_steps``), commands from the keyboard (:class:`KeyCommands`), paced to real time.

    Returns ``steps``, ``sim_time``, ``wall_time``, ``realtime_factor``, ``resets`` and the last ``command``.
    """
    run = _ViewerRun(env, actor, device, status_path or os.environ.get(STATUS_ENV) or None)
    keys = run.keys
    out(f"[rlcore] viewer: Up/Down vx, Left/Right vy, Q/E yaw rate (steps {keys.step[0]:g}, {keys.step[1]:g}, "
        f"{keys.step[2]:g}), Space stop, Backspace reset; close the window or Ctrl+Q to quit")
    try:
        with torch.inference_mode():
            run.loop(max_steps)
    finally:
        result = run.close()
    out(f"[rlcore] viewer closed: {result['step']} steps, {result['sim_time']:.1f} s simulated in "
        f"{result['wall_time']:.1f} s ({result['realtime_factor']:.2f}x real time), {result['resets']} reset(s), "
        f"last command {keys.command}")
    return result


def _launch(model, data, on_key: Callable[[int], None]) -> tuple:
    """MuJoCo's passive viewer on ``model`` / ``data`` (key presses go to ``on_key``) and the threads it started
    (joined at the end, so that its render thread finishes before the interpreter tears GLFW down)."""
    before = set(threading.enumerate())
    try:
        viewer = mujoco.viewer.launch_passive(model, data, key_callback=on_key, show_left_ui=False,
                                              show_right_ui=False)
    except RuntimeError as err:  # macOS: a passive viewer needs MuJoCo's mjpython launcher
        if "mjpython" not in str(err):
            raise
        raise ConfigError("viewer=true on macOS runs under MuJoCo's launcher: mjpython -m rlcore.play ...") from None
    return viewer, [t for t in threading.enumerate() if t not in before]


class _ViewerRun:
    """One viewer session of :func:`run_viewer`: env and policy, the window and its key queue, and the counters the
    status reports. Each part of a loop iteration (keys, env step, drawing, pacing) is one method."""

    def __init__(self, env, actor, device: str, status_path: str | None) -> None:
        self.env, self.actor, self.device, self.status_path = env, actor, device, status_path
        self.keys = KeyCommands.from_interface(env.deployment_interface())
        self.model = env.sim.model
        self.data = mujoco.MjData(self.model)
        self.base_adr, base_body = _free_joint(self.model)
        self.plane = bool((self.model.geom_type == mujoco.mjtGeom.mjGEOM_PLANE).any())
        self.dt = control_period(env) or 0.02
        check_display()
        self.pressed: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.viewer, self.viewer_threads = _launch(self.model, self.data, self.pressed.put)
        # Q and E toggle visualisation flags in MuJoCo's viewer too: keep those flags as they are.
        letters = {chr(k) for k in BINDINGS if chr(k).isalpha()}
        self.pinned = [i for i, row in enumerate(mujoco.mjVISSTRING) if row[2] in letters]
        self.flags = self.viewer.opt.flags.copy()
        with self.viewer.lock():
            cam = self.viewer.cam
            cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            cam.trackbodyid = base_body
            cam.distance, cam.elevation, cam.azimuth = 2.5, -25.0, 135.0
        self.steps = self.resets = self.handled = 0
        self.shown: tuple[str, str] | None = None
        self.start = time.perf_counter()

    def set_command(self) -> None:
        """Write the keys' command into env 0 (the env never resamples it: the task's ``viewer_env``)."""
        commands = self.env.commands
        commands[0] = torch.tensor(self.keys.command, dtype=commands.dtype, device=commands.device)

    def status(self, running: bool) -> dict:
        """The state scripts and tests read (module doc), also written to ``status_path`` when one is set."""
        wall = time.perf_counter() - self.start
        adr, qpos = self.base_adr, self.data.qpos
        w, x, y, z = (float(v) for v in qpos[adr + 3:adr + 7])
        status = {"running": running, "step": self.steps, "sim_time": self.steps * self.dt, "wall_time": wall,
                  "realtime_factor": self.steps * self.dt / wall if wall > 0 else 0.0,
                  "command": list(self.keys.command), "base_pos": [float(v) for v in qpos[adr:adr + 3]],
                  "base_yaw": math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)), "resets": self.resets,
                  "episode_step": int(self.env.episode_length_buf[0]),
                  "keys_handled": self.handled, "overlay": list(self.shown or ("", ""))}
        if self.status_path:
            _write_status(self.status_path, status)
        return status

    def loop(self, max_steps: int | None) -> None:
        """Keys, one env step, drawing and pacing, until the window closes or ``max_steps`` steps ran."""
        self.set_command()
        obs = self.env.get_observations().to(self.device)
        deadline = time.perf_counter()
        while self.viewer.is_running() and (max_steps is None or self.steps < int(max_steps)):
            changed, reset = self.read_keys()
            obs = self.step(obs, changed, reset)
            self.show(changed)
            deadline = self.wait(deadline)

    def read_keys(self) -> tuple[bool, bool]:
        """Apply every key pressed since the last step; returns (a command changed, a reset was asked for)."""
        changed = reset = False
        while True:
            try:
                action = self.keys.press(self.pressed.get_nowait())
            except queue.Empty:
                break
            self.handled += action is not None
            changed |= action is not None
            reset |= action == "reset"
        return changed, reset

    def step(self, obs, changed: bool, reset: bool):
        """Do what the keys asked (reset the robot, a new command), then one env step of the policy; returns the
        next observations (on ``device``)."""
        env, device = self.env, self.device
        if reset:
            env.reset()
            self.actor.reset(torch.ones(env.num_envs, dtype=torch.bool, device=device))
            self.resets += 1
        if changed:  # the policy sees the new command from this step on
            self.set_command()
            obs = env.get_observations().to(device)
        obs, _, dones, _ = env.step(self.actor(obs).to(env.device))
        self.steps += 1
        dones = dones.to(torch.bool)
        if bool(dones.any()):  # a fall: the env reset the robot and drew a command of its own
            self.resets += 1
            self.actor.reset(dones.to(device))
            self.set_command()
            obs = env.get_observations()
        return obs.to(device)

    def show(self, changed: bool) -> None:
        """Copy env 0's state into the window, draw the guides and texts, and write the status file."""
        viewer, sim = self.viewer, self.env.sim
        text = self.keys.overlay()
        with viewer.lock():
            self.data.qpos[:] = sim.qpos[0]
            self.data.qvel[:] = sim.qvel[0] if getattr(sim, "qvel", None) is not None else 0.0
            mujoco.mj_forward(self.model, self.data)
            draw_guides(viewer.user_scn, self.model, self.data, self.base_adr, self.keys.command, self.plane)
            for i in self.pinned:
                viewer.opt.flags[i] = self.flags[i]
        if text != self.shown:
            self.shown = text
            viewer.set_texts([(None, mujoco.mjtGridPos.mjGRID_TOPLEFT, *text),
                              (mujoco.mjtFontScale.mjFONTSCALE_100, mujoco.mjtGridPos.mjGRID_BOTTOMLEFT, *HELP)])
        viewer.sync()
        if self.status_path and (changed or self.steps % 5 == 0):
            self.status(True)

    def wait(self, deadline: float) -> float:
        """Sleep until ``deadline + dt`` (real time); returns the next deadline."""
        deadline += self.dt
        delay = deadline - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.25:  # far behind (a slow machine): do not rush to catch up
            deadline = time.perf_counter()
        return deadline

    def close(self) -> dict:
        """Close the window, let its threads finish, and return the final status."""
        self.viewer.close()
        for thread in self.viewer_threads:  # let the render thread finish before the interpreter tears GLFW down
            thread.join(timeout=5.0)
        return self.status(False)


__all__ = ["BINDINGS", "KeyCommands", "check_display", "check_viewer_env", "make_viewer_env", "run_viewer"]
