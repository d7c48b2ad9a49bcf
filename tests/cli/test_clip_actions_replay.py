"""``runner.clip_actions`` reaches every replay of a run (issue 52, item 6).

A pendulum run trained with ``runner.clip_actions=0.05`` (its policy's mean actions reach beyond that): the ONNX
file that training writes and the one ``rlcore.export`` writes state ``action_clip: 0.05``, export's parity check
drives the task with clipped actions, and ``play`` (torch policy and ``onnx=``) never sends the env an action
beyond the clip. The Go2 side (the robustness env, the reference deployer) is in
tests/tasks/test_go2_replay_interface.py.
"""

from __future__ import annotations

import json

import pytest
import torch
from cli_helpers import TINY, check_ok, run_module

import rlcore.play as play_module
from rlcore import export as export_cli
from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy
from rlcore.deployment import read_onnx_interface
from rlcore.export import record_stream

pytestmark = pytest.mark.slow  # trains a run through the CLI

CLIP = 0.05


@pytest.fixture(scope="module")
def clipped_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("clip") / "pendulum_clipped"
    check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "seed=5", f"runner.clip_actions={CLIP}",
                        f"hydra.run.dir={run_dir}"))
    return run_dir


class RecordingEnv:
    """Delegates to ``env``; keeps the largest |action| ``step`` received."""

    def __init__(self, env) -> None:
        self.__dict__.update(env=env, largest=0.0, steps=0)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, actions):
        self.__dict__["largest"] = max(self.largest, float(actions.abs().max()))
        self.__dict__["steps"] += 1
        return self.env.step(actions)


def test_exported_files_state_the_runners_clip(clipped_run):
    assert read_onnx_interface(clipped_run / "policy.onnx")["action_clip"] == CLIP  # written by training
    export_cli.main([f"checkpoint={clipped_run}", "format=onnx", "num_envs=2", "verify_steps=16"])
    description = json.loads((clipped_run / "exported" / "policy.json").read_text())
    assert description["action_clip"] == CLIP and description["verification"]["passed"]
    assert read_onnx_interface(clipped_run / "exported" / "policy.onnx")["action_clip"] == CLIP


def test_exports_check_drives_the_task_as_training_did(clipped_run):
    """The recorded stream of export's parity check: the env receives the clipped actions (and the clip binds)."""
    info = load_run(str(clipped_run))
    env = RecordingEnv(make_run_env(info, 2, "cpu", 0))
    policy = make_run_policy(info, env, "cpu")
    with torch.inference_mode():
        record_stream(policy, env, "cpu", 16, info.train_cfg["clip_actions"])
    assert env.steps == 16 and env.largest == pytest.approx(CLIP)


@pytest.mark.parametrize("onnx", [False, True])
def test_play_never_sends_actions_beyond_the_clip(clipped_run, monkeypatch, capsys, onnx):
    envs = []

    def recording(*args, **kwargs):
        envs.append(RecordingEnv(make_run_env(*args, **kwargs)))
        return envs[-1]

    monkeypatch.setattr(play_module, "make_run_env", recording)
    extra = {"onnx": str(clipped_run / "policy.onnx")} if onnx else {}
    play_module.play({"checkpoint": str(clipped_run), "episodes": 1, "num_envs": 2, "max_steps": 20, **extra})
    assert envs[0].steps == 20 and envs[0].largest == pytest.approx(CLIP)  # reached, never exceeded
    assert f"actions clipped to +-{CLIP:g} (runner.clip_actions)" in capsys.readouterr().out
