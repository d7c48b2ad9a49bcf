"""rlcore inside mjlab: mjlab's own train path with rlcore's runner swapped in, and ``task=mjlab`` (rlcore's CLI on
an mjlab task), each run on Warp's CPU device with a handful of envs.

mjlab pins its own MuJoCo (3.11) and MuJoCo Warp, so it runs in an environment of its own: with
``RLCORE_MJLAB_PYTHON=<python of an environment with mjlab and rlcore>`` the tests use it; with
``RLCORE_TEST_MJLAB=1`` they make one (``RLCORE_MJLAB_VENV``, default ``~/.cache/rlcore/mjlab-1.6.0``:
``pip install torch==2.13.0 torchvision==0.28.0 mjlab==1.6.0`` and this checkout, about 1 min and 2.3 GB, kept
for the next run); otherwise they are skipped (``.ci/mjlab`` is the optional CI job that runs them). Without mjlab,
``task=mjlab`` says in one line what to install (tested here always).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.cli_helpers import REPO_ROOT, assert_user_error, check_ok, cli_env, run_module

VENV_PACKAGES = ["torch==2.13.0", "torchvision==0.28.0", "mjlab==1.6.0"]
TASK = "Mjlab-Velocity-Flat-Unitree-Go1"


@pytest.fixture(scope="module")
def mjlab_python() -> str:
    """An interpreter that imports mjlab and this checkout's rlcore (made on request; see the module doc)."""
    given = os.environ.get("RLCORE_MJLAB_PYTHON")
    if given:
        return given
    if os.environ.get("RLCORE_TEST_MJLAB") != "1":
        pytest.skip("mjlab runs in an environment of its own: set RLCORE_TEST_MJLAB=1 (makes one) or "
                    "RLCORE_MJLAB_PYTHON=<its python>")
    venv = Path(os.environ.get("RLCORE_MJLAB_VENV", Path.home() / ".cache" / "rlcore" / "mjlab-1.6.0"))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *VENV_PACKAGES], check=True, timeout=1800)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(REPO_ROOT)], check=True, timeout=900)
    return str(python)


def run_in(python: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**cli_env(), "CUDA_VISIBLE_DEVICES": "", "WANDB_MODE": "disabled"}
    return subprocess.run([python, *args], cwd=str(REPO_ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_mjlab_train_path_runs_with_rlcore_runner(mjlab_python, tmp_path):
    """mjlab's launch_training (Go1 flat, 4 envs, 2 iterations) with rlcore's runner under mjlab's runner classes:
    checkpoints, mjlab's ONNX export with its metadata in save(), add_git_repo_to_log, and a resume that trains
    iteration 3."""
    proc = check_ok(run_in(mjlab_python, "tests/compat/mjlab_train_path.py", str(tmp_path)))
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("mjlab_train_path: "))
    found = json.loads(line.split(": ", 1)[1])
    assert found["runner_mro"][:3] == ["mjlab.tasks.velocity.rl.runner.VelocityOnPolicyRunner",
                                       "mjlab.rl.runner.MjlabOnPolicyRunner",
                                       "rlcore.runners.on_policy_runner.OnPolicyRunner"]
    assert found["checkpoints"] == ["model_0.pt", "model_1.pt"] and found["onnx"]
    assert {"joint_names", "default_joint_pos", "action_scale"} <= set(found["onnx_metadata_keys"])
    assert found["resumed_checkpoints"] == ["model_2.pt"] and found["resumed_last_iter"] == 2
    assert "[WARN] ONNX export failed" not in proc.stdout
    onnx = tmp_path / "dropin" / found["first_run"] / f"{found['first_run']}.onnx"
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    out = session.run(None, {inp.name: np.zeros([1, inp.shape[1]], dtype=np.float32)})[0]
    assert out.shape == (1, 12)  # the Go1's 12 joints


@pytest.mark.slow
def test_task_mjlab_trains_with_rlcore_cli(mjlab_python, tmp_path):
    """``python -m rlcore.train task=mjlab task.id=...``: rlcore's CLI, runner and export on an mjlab env."""
    run = tmp_path / "run"
    proc = check_ok(run_in(mjlab_python, "-m", "rlcore.train", "task=mjlab", f"task.id={TASK}", "task.num_envs=4",
                           "runner.max_iterations=2", "runner.num_steps_per_env=8", "runner.save_interval=1",
                           "logger=none", f"hydra.run.dir={run}"))
    assert "it 2/2" in proc.stdout and (run / "model_1.pt").is_file() and (run / "policy.onnx").is_file()
    import onnxruntime as ort
    import torch

    ckpt = torch.load(run / "model_1.pt", weights_only=True)
    assert ckpt["train_cfg"]["task"]["env"]["task_id"] == TASK and ckpt["iter"] == 1
    session = ort.InferenceSession(str(run / "policy.onnx"), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    assert session.run(None, {inp.name: np.zeros([1, inp.shape[1]], dtype=np.float32)})[0].shape[-1] == 12
    bad = run_in(mjlab_python, "-m", "rlcore.train", "task=mjlab", "task.id=Mjlab-Nope", "task.num_envs=2",
                 "logger=none", f"hydra.run.dir={tmp_path / 'bad'}")
    assert_user_error(bad, "task.id='Mjlab-Nope' is not an mjlab task", TASK)


@pytest.mark.slow  # a train process: about 3 s
def test_task_mjlab_without_mjlab_says_what_to_install(tmp_path):
    pytest.importorskip("hydra")
    try:
        import mjlab  # noqa: F401
        pytest.skip("mjlab is installed here")
    except ImportError:
        pass
    proc = run_module("rlcore.train", "task=mjlab", "task.num_envs=2", "logger=none", f"hydra.run.dir={tmp_path}")
    assert_user_error(proc, "task=mjlab needs mjlab", "pip install mjlab")


def test_apply_settings_sets_nested_fields_and_names_unknown_ones():
    from dataclasses import dataclass, field

    from rlcore.env.mjlab import apply_settings
    from rlcore.errors import ConfigError

    @dataclass
    class Scene:
        num_envs: int = 1
        spacing: tuple = (2.0, 2.0)

    @dataclass
    class Cfg:
        episode_length_s: float = 20.0
        scene: Scene = field(default_factory=Scene)
        rewards: dict = field(default_factory=lambda: {"track": {"weight": 1.0}})

    cfg = Cfg()
    apply_settings(cfg, {"episode_length_s": 10.0, "scene": {"spacing": [3.0, 3.0]},
                         "rewards": {"track": {"weight": 2.0}}})
    assert cfg.episode_length_s == 10.0 and cfg.scene.spacing == (3.0, 3.0)
    assert cfg.rewards["track"]["weight"] == 2.0
    with pytest.raises(ConfigError, match=r"task.env.settings.scene.num_env: no such setting of Scene; valid: "
                                          r"num_envs, spacing"):
        apply_settings(cfg, {"scene": {"num_env": 4}})
    with pytest.raises(ConfigError, match=r"task.env.settings.rewards.trak: no such entry; valid: track"):
        apply_settings(cfg, {"rewards": {"trak": {"weight": 1.0}}})
