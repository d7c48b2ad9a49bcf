"""Resume as a user expects it (issue 40), through ``python -m rlcore.train``.

- ``runner.max_iterations`` is the run's total: an interrupted run resumed with ``resume=<run>`` trains the
  remaining iterations, in its own run directory, and says so when it starts; a run already complete is refused.
- ``init_from=<checkpoint>`` starts a fresh run from a checkpoint's weights (another ``task.num_envs`` allowed).
- Only torch's own shape errors of a checkpoint's weights become a user error; a bug while restoring the run's
  state keeps its traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from cli_helpers import TINY, assert_user_error, check_ok, run_module

pytestmark = pytest.mark.slow  # every test trains through the CLI in a subprocess


def _run_dirs(cwd: Path) -> list[Path]:
    return sorted(p for p in (cwd / "logs" / "pendulum").iterdir() if p.is_dir())


@pytest.fixture
def interrupted(tmp_path) -> Path:
    """A pendulum run that stopped after 4 of its iterations (model_3.pt its last checkpoint)."""
    check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "runner.max_iterations=4", cwd=tmp_path))
    (run,) = _run_dirs(tmp_path)
    return run


def test_resume_trains_to_max_iterations_in_the_same_run_directory(tmp_path, interrupted):
    (interrupted / "model_3.pt").unlink()  # as if interrupted after iteration 3: model_2.pt is the newest
    proc = check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "runner.max_iterations=6",
                               f"resume={interrupted}", cwd=tmp_path))
    assert "training iterations 4..6 of runner.max_iterations=6" in proc.stdout
    assert "it 4/6" in proc.stdout and "it 6/6" in proc.stdout and "it 7/" not in proc.stdout
    assert _run_dirs(tmp_path) == [interrupted]  # no new directory: the run goes on where it was
    assert torch.load(interrupted / "model_5.pt", weights_only=True)["iter"] == 5
    assert not (interrupted / "model_6.pt").exists()


def test_resume_of_a_complete_run_is_refused(tmp_path, interrupted):
    proc = run_module("rlcore.train", "task=pendulum", *TINY, "runner.max_iterations=4", f"resume={interrupted}",
                      cwd=tmp_path)
    assert_user_error(proc, "has completed 4 iterations", "raise runner.max_iterations")


def test_init_from_starts_a_fresh_run_from_the_weights(tmp_path, interrupted):
    tiny = [a for a in TINY if not a.startswith("task.num_envs")]
    proc = check_ok(run_module("rlcore.train", "task=pendulum", *tiny, "task.num_envs=16", "runner.max_iterations=1",
                               "algorithm.learning_rate=1e-4", "algorithm.schedule=fixed",
                               f"init_from={interrupted / 'model_3.pt'}", cwd=tmp_path))
    assert "weights loaded from" in proc.stdout and "it 1/1" in proc.stdout
    new = [d for d in _run_dirs(tmp_path) if d != interrupted]
    assert len(new) == 1
    before = torch.load(interrupted / "model_3.pt", weights_only=True)
    after = torch.load(new[0] / "model_0.pt", weights_only=True)
    assert after["iter"] == 0 and after["env_state"]["num_envs"] == 16
    # the normaliser statistics continue from the checkpoint's (no warm-up on a fresh count), the weights moved by
    # one small update only
    assert after["actor_state_dict"]["obs_normalizer.count"] > before["actor_state_dict"]["obs_normalizer.count"]
    for key, value in before["actor_state_dict"].items():
        if value.is_floating_point() and "normalizer" not in key:
            assert torch.allclose(after["actor_state_dict"][key], value, atol=5e-3), key


def test_init_from_refuses_other_models(tmp_path, interrupted):
    proc = run_module("rlcore.train", "task=pendulum", *TINY, "model.actor.hidden_dims=[32]",
                      f"init_from={interrupted}", cwd=tmp_path)
    assert_user_error(proc, "init_from=", "holds other models")


def test_a_bug_while_restoring_state_keeps_its_traceback(tmp_path, interrupted, monkeypatch):
    """Before: any KeyError/ValueError/RuntimeError of runner.load became 'does not fit this run's model'."""
    from rlcore.config.cli import compose
    from rlcore.train import UserError, prepare, run
    from rlcore_tasks.classic.base import ClassicTask

    def broken(self, state):
        raise KeyError("a bug in restoring env state")

    monkeypatch.setattr(ClassicTask, "load_state_dict", broken)
    monkeypatch.chdir(tmp_path)
    cfg = compose(["task=pendulum", *TINY, "runner.max_iterations=6", f"resume={interrupted}"])
    with pytest.raises(KeyError, match="a bug in restoring env state") as err:
        run(cfg, log_dir=str(tmp_path / "out"), plan=prepare(cfg))
    assert not isinstance(err.value, UserError)
    assert os.path.isdir(interrupted)
