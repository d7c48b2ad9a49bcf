"""User errors versus bugs: a config mistake is one ``error:`` line (exit 2), anything else a full traceback
with a hint (exit 1), so a library defect in the middle of training never looks like a config mistake."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_helpers import REPO_ROOT, TINY, assert_user_error, cli_env, run_module

from rlcore.config.cli import BUG_EXIT, USER_ERROR_EXIT, user_errors
from rlcore.errors import ConfigError, MissingPathError

#: Runs ``rlcore.train`` with PPO.update replaced by one that fails like a library bug would.
_BUGGY_TRAIN = """
import rlcore.algorithms.ppo as ppo
def update(self):
    raise {exc}("{msg}")
ppo.PPO.update = update
from rlcore.train import main
main()
"""


@pytest.mark.parametrize("exc", ["KeyError", "ValueError", "TypeError"])
@pytest.mark.slow
def test_a_bug_during_training_shows_its_traceback(exc, tmp_path):
    code = _BUGGY_TRAIN.format(exc=exc, msg="planted-bug")
    proc = subprocess.run([sys.executable, "-c", code, "task=pendulum", *TINY, f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=str(REPO_ROOT), env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == BUG_EXIT, proc.stderr[-2000:]
    assert "Traceback (most recent call last)" in proc.stderr
    assert f"{exc}: " in proc.stderr and "planted-bug" in proc.stderr
    assert "in update" in proc.stderr  # the frame of the failing code is shown
    last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("error (unexpected):") and "bug" in last


@pytest.mark.slow
def test_a_missing_observation_group_is_one_line(tmp_path):
    proc = run_module("rlcore.train", "task=pendulum", *TINY, "task.obs_groups.actor=[nope]",
                      f"hydra.run.dir={tmp_path / 'run'}")
    assert_user_error(proc, "nope", "policy")


def _exit_of(err: BaseException, capsys) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as stop, user_errors():
        raise err
    return stop.value.code, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_user_errors_are_config_errors_raised_where_detected(capsys):
    """A user error is raised as one where the user's input is checked (``ConfigError``; ``MissingPathError`` for a
    path the user named); nothing is classified by exception type after the fact: a plain ``FileNotFoundError`` (a
    schema file missing from a broken wheel, say) is a bug with its traceback (issue 52, item 9)."""
    for err in (ConfigError("model.actor.x: unknown key"), MissingPathError("Checkpoint 'a.pt' does not exist.")):
        code, lines = _exit_of(err, capsys)
        assert code == USER_ERROR_EXIT and len(lines) == 1 and lines[0].startswith("error: "), lines
    code, lines = _exit_of(FileNotFoundError("rlcore/schemas/interface.schema.json"), capsys)
    assert code == BUG_EXIT and lines[0].startswith("Traceback") and lines[-1].startswith("error (unexpected):")


def test_plain_value_and_key_errors_are_bugs(capsys):
    for err in (ValueError("shape mismatch"), KeyError("critic"), TypeError("bad call"), RuntimeError("x")):
        code, lines = _exit_of(err, capsys)
        assert code == BUG_EXIT, (err, lines)
        assert lines[0].startswith("Traceback") and lines[-1].startswith("error (unexpected):"), lines
