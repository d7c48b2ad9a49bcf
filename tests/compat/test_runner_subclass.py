"""A runner subclass written the way Isaac Lab's and mjlab's subclass rsl_rl's ``OnPolicyRunner`` works on rlcore's.

The subclass overrides ``save`` to put env state into ``infos``, export the policy to ONNX next to each checkpoint
through ``as_onnx()`` / ``get_dummy_inputs()`` / ``torch.onnx.export`` and upload it through ``self.logger``; it
overrides ``load`` with its own ``torch.load`` (as mjlab's does) and registers a repository with
``add_git_repo_to_log``. It trains on the pendulum (no rsl_rl needed).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from typing import ClassVar

import pytest
import torch

from rlcore.env.task import make_task
from rlcore.runners import OnPolicyRunner
from rlcore.utils import LogWriter

pytestmark = pytest.mark.slow  # trains, exports and starts git

NUM_ENVS, STEPS = 16, 8


class RecordingWriter(LogWriter):
    """A user-defined logging backend (``cfg["logger"] = {"class_name": RecordingWriter, ...}``) that records
    every call the runner's logger makes."""

    instances: ClassVar[list[RecordingWriter]] = []

    def __init__(self, log_dir: str, project: str) -> None:
        self.log_dir, self.project = log_dir, project
        self.scalars: list[tuple[str, float, int]] = []
        self.configs, self.models, self.files, self.stops = [], [], [], 0
        RecordingWriter.instances.append(self)

    def add_scalar(self, tag, scalar_value, global_step):
        self.scalars.append((tag, scalar_value, global_step))

    def store_config(self, env_cfg, train_cfg):
        self.configs.append((env_cfg, train_cfg))

    def save_model(self, model_path, it):
        self.models.append((os.path.basename(model_path), it))

    def save_file(self, path):
        self.files.append(path)

    def stop(self):
        self.stops += 1


class FrameworkRunner(OnPolicyRunner):
    """Isaac Lab / mjlab style: env state in the checkpoint infos, ONNX next to every checkpoint, uploads."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.exported_at: list[int] = []

    def save(self, path: str, infos: dict | None = None) -> None:
        infos = {**(infos or {}), "env_state": {"common_step_counter": 7}}
        super().save(path, infos)
        policy = self.alg.get_policy().as_onnx(verbose=False)
        policy.to("cpu")
        policy.eval()
        onnx_path = os.path.join(os.path.dirname(path), "policy.onnx")
        torch.onnx.export(policy, policy.get_dummy_inputs(), onnx_path, export_params=True, opset_version=18,
                          verbose=False, input_names=policy.input_names, output_names=policy.output_names)
        assert self.logger.logger_type not in ["wandb"]  # mjlab uploads to wandb itself in that case
        self.logger.save_model(onnx_path, self.current_learning_iteration)
        self.exported_at.append(self.current_learning_iteration)

    def load(self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None):
        loaded = torch.load(path, map_location=map_location, weights_only=False)
        if self.alg.load(loaded, load_cfg, strict):
            self.current_learning_iteration = loaded["iter"]
        return loaded["infos"]


def train_cfg() -> dict:
    return {
        "seed": 2, "num_steps_per_env": STEPS, "save_interval": 2,
        "logger": {"class_name": RecordingWriter, "project": "demo"},
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16, 16], "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 2, "num_mini_batches": 2},
    }


def git_repo(path) -> str:
    """A one-commit repository with an uncommitted edit; returns the commit hash."""
    path.mkdir()

    def git(*args):
        return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (path / "train.py").write_text("print('v1')\n")
    git("add", "train.py")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "v1")
    (path / "train.py").write_text("print('v2')\n")
    return git("rev-parse", "HEAD")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_framework_runner_subclass_trains_exports_and_uploads(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    commit = git_repo(tmp_path / "user_repo")
    run = tmp_path / "run"
    env = make_task("pendulum", num_envs=NUM_ENVS, seed=0)
    runner = FrameworkRunner(env, train_cfg(), log_dir=str(run), device="cpu")
    runner.add_git_repo_to_log(str(tmp_path / "user_repo" / "train.py"))
    initial_policy = copy.deepcopy(runner.alg.get_policy())
    runner.learn(3, init_at_random_ep_len=True)

    # rsl_rl's numbering: iterations 0, 1, 2; checkpoints every save_interval from 0, and the last.
    assert runner.current_learning_iteration == 2
    assert sorted(n for n in os.listdir(run) if n.endswith(".pt")) == ["model_0.pt", "model_2.pt"]
    assert runner.exported_at == [0, 2]

    # The logger built the user's writer from cfg["logger"] and drove it.
    writer = RecordingWriter.instances[-1]
    assert (writer.log_dir, writer.project) == (str(run), "demo")
    assert len(writer.configs) == 1 and writer.configs[0][1]["num_steps_per_env"] == STEPS
    assert [step for tag, _, step in writer.scalars if tag == "Loss/value"] == [0, 1, 2]
    assert writer.models == [("model_0.pt", 0), ("policy.onnx", 0), ("model_2.pt", 2), ("policy.onnx", 2)]
    assert writer.stops == 1  # learn() stopped it at the end

    # add_git_repo_to_log: the user's repository state (commit, its uncommitted edit) is in the run and uploaded.
    diff = run / "git" / "user_repo.diff"
    assert str(diff) in writer.files
    text = diff.read_text()
    assert commit in text and "-print('v1')" in text and "+print('v2')" in text

    # The exported ONNX file computes what the torch policy computes (and not what the untrained one did).
    obs = env.get_observations()
    policy = runner.get_inference_policy()
    with torch.no_grad():
        expected, untrained = policy(obs), initial_policy(obs)
    session = ort.InferenceSession(str(run / "policy.onnx"), providers=["CPUExecutionProvider"])
    # rsl_rl's export call gives no dynamic axes: the graph takes one observation at a time.
    got = torch.cat([torch.from_numpy(session.run(["actions"], {"obs": row[None].numpy()})[0])
                     for row in obs["policy"]])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, untrained, atol=1e-3)

    # mjlab's own load: infos come back, the numbering continues and no second normaliser warm-up happens.
    resumed = FrameworkRunner(make_task("pendulum", num_envs=NUM_ENVS, seed=1), train_cfg(), log_dir=str(run),
                              device="cpu")
    assert resumed.load(str(run / "model_2.pt")) == {"env_state": {"common_step_counter": 7}}
    assert resumed.current_learning_iteration == 2
    count = int(resumed.alg.actor.obs_normalizer.count)
    resumed.learn(1)
    assert resumed.current_learning_iteration == 3 and (run / "model_3.pt").is_file()
    assert int(resumed.alg.actor.obs_normalizer.count) == count + STEPS * NUM_ENVS
