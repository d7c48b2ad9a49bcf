"""examples/deploy_go2_mujoco.py, the reference deployer outside rlcore, against Go2Env.

The deployer reads only the ONNX file and runs its own MuJoCo model (rlcore_tasks/go2/assets/scene.xml). Beside it
Go2Env, rebuilt from the same file's interface with noise and randomisation off and 1 s episodes (so the 200 steps
end four episodes), runs the same policy through rlcore's own onnxruntime loop. Observations must agree to
1e-5 and actions to 1e-4 at every step; a deployer that reads the history in the wrong order, or skips the reset
rule at an episode start, must not.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

from rlcore.deployment import read_onnx_interface
from rlcore.robustness import OnnxPolicy
from rlcore_tasks.go2.env import Go2Env
from rlcore_tasks.go2.pretrained import PRETRAINED
from rlcore_tasks.go2.variants import overrides_from_interface

pytestmark = pytest.mark.slow  # closed loops in MuJoCo, seconds each

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deploy_go2_mujoco.py"
SCENE = ROOT / "rlcore_tasks" / "go2" / "assets" / "scene.xml"
COMMAND = [0.6, 0.0, 0.5]  # vx and a turn at once
STEPS = 200

sys.path.insert(0, str(EXAMPLE.parent))
import deploy_go2_mujoco as example  # noqa: E402


def shipped(name: str) -> str:
    path = PRETRAINED[name].path
    if read_onnx_interface(path, raw=True).get("interface_version") != 2:
        pytest.skip(f"{name} is a version-1 file; the example reads version 2")
    return path


def compare(path: str, deployer: example.Deployer | None = None, reset=None) -> tuple[float, float, int]:
    """``(max |obs_deployer - obs_env|, max |actions_deployer - actions_rlcore|, episode starts)`` over STEPS
    control steps under COMMAND; ``reset(deployer)`` is what the deployer does at an episode start (default: its
    rule, ``Deployer.reset``)."""
    meta = read_onnx_interface(path)
    overrides = overrides_from_interface(meta, episode_s=1.0, threads=1)
    overrides["commands"].update(lin_vel_x=[COMMAND[0]] * 2, lin_vel_y=[COMMAND[1]] * 2,
                                 ang_vel_yaw=[COMMAND[2]] * 2)  # a reset draws this command again
    env = Go2Env(num_envs=1, seed=0, **overrides)
    reference = OnnxPolicy(path, meta, 1)
    deployer = deployer or example.Deployer(path, str(SCENE))
    reset = reset or example.Deployer.reset
    obs, worst_obs, worst_act, starts = env.get_observations(), 0.0, 0.0, 0
    try:
        for _ in range(STEPS):
            expected = torch.cat([obs[g] for g in meta["obs_groups"]], dim=-1)[0].numpy()
            actions, _ = reference(obs)
            mine = deployer.observer(deployer.robot.quantities(np.asarray(COMMAND)))
            act = deployer.policy(mine)
            worst_obs = max(worst_obs, float(np.abs(mine - expected).max()))
            worst_act = max(worst_act, float(np.abs(act - actions[0]).max()))
            deployer.robot.apply(act)
            obs, _, done, _ = env.step(torch.from_numpy(actions))
            if done[0]:  # rlcore's loop: the env restarted the episode; the state goes back to its initial value
                starts += 1
                for s in meta["recurrent_state"]:
                    reference.state[s["input"]][:] = s["initial"]
                reset(deployer)
    finally:
        env.close()
    return worst_obs, worst_act, starts


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_the_deployer_reproduces_go2env(name):
    """MLP with a 5-frame history and the integral loop (go2_flat); LSTM with the loop (go2_flat_student)."""
    worst_obs, worst_act, starts = compare(shipped(name))
    assert starts == STEPS // 50  # every 1 s episode ends, the last on the last step
    assert worst_obs < 1e-5 and worst_act < 1e-4, (worst_obs, worst_act)


def test_a_history_read_oldest_first_fails_the_comparison():
    path = shipped("go2_flat")

    class OldestFirst(example.Observer):
        def __call__(self, quantities):
            obs = super().__call__(quantities)
            frames = obs[45:].reshape(5, 45)[::-1]  # the same frames, in the wrong order
            return np.concatenate([obs[:45], frames.ravel()])

    deployer = example.Deployer(path, str(SCENE))
    deployer.observer = OldestFirst(deployer.meta)
    worst_obs, worst_act, _ = compare(path, deployer)
    assert worst_obs > 1e-2 and worst_act > 1e-3


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_skipping_the_reset_rule_fails_the_comparison(name):
    """The robot respawns, but the history (go2_flat) and the LSTM's memory and u (both) carry over."""
    worst_obs, worst_act, starts = compare(shipped(name), reset=lambda d: d.robot.spawn())
    assert starts == STEPS // 50 and worst_act > 1e-3
    if name == "go2_flat":
        assert worst_obs > 1e-2  # the history holds the last episode's frames


def test_the_example_stays_small_and_outside_rlcore():
    """At most about 200 lines (230), and nothing but numpy, onnxruntime, mujoco and the standard library."""
    source = EXAMPLE.read_text()
    assert len(source.splitlines()) <= 230
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "argparse", "json", "os", "sys", "time", "mujoco", "numpy",
                        "onnxruntime"}, imported


def test_the_example_walks_from_its_command_line(tmp_path):
    """The script as a user runs it: the shipped teacher tracks a forward command and a turn without falling."""
    path = shipped("go2_flat")
    out = subprocess.run([sys.executable, str(EXAMPLE), path, str(SCENE), "--commands", "0:0.8,0,0 3:0,0,-1",
                          "--seconds", "6"], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("from")]
    assert "fell" not in out.stdout and len(lines) == 2, out.stdout
    forward = [float(v) for v in lines[0].split("reached [")[1].rstrip("]").split(",")]
    turn = [float(v) for v in lines[1].split("reached [")[1].rstrip("]").split(",")]
    assert abs(forward[0] - 0.8) < 0.1 and abs(turn[2] + 1.0) < 0.25, out.stdout


@pytest.mark.slow
def test_teleop_keys_move_the_command_under_xvfb(xvfb):
    """``--teleop``: MuJoCo's viewer on a virtual display, keys sent with xdotool; each press moves the command by
    its step inside the file's command ranges (printed by the script), space stops."""
    import os
    import time

    env = {**os.environ, "DISPLAY": xvfb, "MUJOCO_GL": "glfw", "LIBGL_ALWAYS_SOFTWARE": "1", "LP_NUM_THREADS": "1",
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), shipped("go2_flat"), str(SCENE), "--teleop"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    x = {**os.environ, "DISPLAY": xvfb}
    try:
        window = subprocess.run(["xdotool", "search", "--sync", "--name", "MuJoCo"], env=x, capture_output=True,
                                text=True, timeout=60).stdout.split()[-1]
        time.sleep(1.0)  # the viewer's loop runs
        for key in ("Up", "Up", "Up", "Left", "q", "e", "e", "space", "Down"):
            subprocess.run(["xdotool", "key", "--window", window, key], env=x, check=True, timeout=30)
            time.sleep(0.2)
        time.sleep(1.0)
        assert proc.poll() is None, "the viewer exited"
    finally:
        proc.kill()
        out = proc.communicate(timeout=30)[0]
    lines = [ln for ln in out.splitlines() if ln.startswith("command ")]
    assert lines == ["command vx +0.1 vy +0.0 wz +0.0", "command vx +0.2 vy +0.0 wz +0.0",
                     "command vx +0.3 vy +0.0 wz +0.0", "command vx +0.3 vy +0.1 wz +0.0",
                     "command vx +0.3 vy +0.1 wz +0.2", "command vx +0.3 vy +0.1 wz +0.0",
                     "command vx +0.3 vy +0.1 wz -0.2", "command vx +0.0 vy +0.0 wz +0.0",
                     "command vx -0.1 vy +0.0 wz +0.0"], out[-2000:]
