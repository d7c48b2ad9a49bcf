"""A resume as rsl_rl's users expect it, and the run's record it leaves (issue 52, items 4 and 14).

- ``resume=<run>`` takes the settings of the command that wrote the checkpoint; the command line changes only what it
  names, and what cannot change (the model, ``task.num_envs``) is refused with the reason. Before: every override of
  the first command had to be repeated (``task.num_envs: checkpoint 8 vs config 512``).
- A resume into the run's directory keeps its own record beside the first (``resumes/<first iteration>/``), and each
  checkpoint's settings are read from that checkpoint. Before: the resume rewrote ``.hydra/config.yaml`` and
  ``config.yaml``, and ``play``/``export`` of an earlier checkpoint then built the env with the resume's settings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli_helpers import TINY, assert_user_error, check_ok, run_module

from rlcore.checkpoint.run_files import load_run

pytestmark = pytest.mark.slow  # every test trains through the CLI in a subprocess


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A 2-iteration pendulum run of tiny settings (8 envs, 16-unit networks), episode length 200 (the task's)."""
    run = tmp_path / "run"
    check_ok(run_module("rlcore.train", "task=pendulum", *TINY, f"hydra.run.dir={run}", cwd=tmp_path))
    return run


def _train_cfg(path: Path) -> dict:
    return torch.load(path, weights_only=True)["train_cfg"]


def test_resume_takes_the_runs_own_settings(run_dir, tmp_path):
    proc = check_ok(run_module("rlcore.train", f"resume={run_dir}", "runner.max_iterations=4", cwd=tmp_path))
    assert "training iterations 3..4 of runner.max_iterations=4" in proc.stdout
    assert "resume: the run's own settings (task=pendulum task.num_envs=8" in proc.stdout
    assert "changed by this command: runner.max_iterations=4" in proc.stdout
    before, after = _train_cfg(run_dir / "model_1.pt"), _train_cfg(run_dir / "model_3.pt")
    assert after["task"]["num_envs"] == 8 and after["actor"]["hidden_dims"] == [16, 16]
    assert after["max_iterations"] == 4 and before["max_iterations"] == 2
    after["max_iterations"] = before["max_iterations"]
    assert after == before  # nothing else changed: the run continues as it was configured


def test_resume_refuses_only_what_cannot_change(run_dir, tmp_path):
    proc = run_module("rlcore.train", f"resume={run_dir}", "runner.max_iterations=4", "model.actor.hidden_dims=[32]",
                      cwd=tmp_path)
    line = assert_user_error(proc, "actor.hidden_dims: checkpoint [16, 16] vs config [32]")
    assert "num_envs" not in line  # the run's own 8 envs were taken, not the task's default


def test_a_resume_keeps_the_first_record_and_each_checkpoint_its_settings(run_dir, tmp_path):
    """The first command's record is not rewritten; each checkpoint is replayed with the settings it was trained
    with (the resume repeats the first command's overrides, so that this holds on its own)."""
    first = {name: (run_dir / name).read_bytes() for name in (".hydra/config.yaml", ".hydra/overrides.yaml",
                                                              "config.yaml")}
    check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "runner.max_iterations=4",
                        "task.env.max_episode_length=50", f"resume={run_dir}", cwd=tmp_path))
    assert {name: (run_dir / name).read_bytes() for name in first} == first
    record = run_dir / "resumes" / "2"
    assert "max_episode_length: 50" in (record / "config.yaml").read_text()
    assert "task.env.max_episode_length=50" in (record / ".hydra" / "overrides.yaml").read_text()
    assert load_run(str(run_dir / "model_1.pt")).task["env"]["max_episode_length"] == 200
    assert load_run(str(run_dir / "model_3.pt")).task["env"]["max_episode_length"] == 50
    assert load_run(str(run_dir / "model_1.pt")).config_path == str(run_dir / ".hydra" / "config.yaml")
    assert load_run(str(run_dir / "model_3.pt")).config_path == str(record / ".hydra" / "config.yaml")


def test_a_resume_of_a_resume_takes_the_settings_that_wrote_its_checkpoint(run_dir, tmp_path):
    check_ok(run_module("rlcore.train", f"resume={run_dir}", "runner.max_iterations=3",
                        "task.env.max_episode_length=50", cwd=tmp_path))
    check_ok(run_module("rlcore.train", f"resume={run_dir}", "runner.max_iterations=4", cwd=tmp_path))
    assert _train_cfg(run_dir / "model_3.pt")["task"]["env"]["max_episode_length"] == 50  # model_2.pt's setting
    assert sorted(p.name for p in (run_dir / "resumes").iterdir()) == ["2", "3"]
    # Resumed again from model_1.pt (its own command's settings: 200), the new record does not overwrite "2".
    (run_dir / "model_2.pt").unlink()
    (run_dir / "model_3.pt").unlink()
    check_ok(run_module("rlcore.train", f"resume={run_dir / 'model_1.pt'}", "runner.max_iterations=3", cwd=tmp_path))
    assert _train_cfg(run_dir / "model_2.pt")["task"]["env"]["max_episode_length"] == 200
    assert sorted(p.name for p in (run_dir / "resumes").iterdir()) == ["2", "2-2", "3"]
