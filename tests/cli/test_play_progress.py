"""``play`` shows progress while no episode ends, and the README's Go2 command plays one episode (issue 52, item 16)."""

from __future__ import annotations

import re

import pytest
from cli_helpers import REPO_ROOT

import rlcore.play as play_module
from rlcore.config.cli import parse_key_values
from rlcore.config.schema import PlayCfg

PROGRESS = re.compile(r"^\[rlcore\] play: step (\d+) \(at most (\d+)\), (\d+) of (\d+) episode\(s\) finished, \d+ s$",
                      re.M)


@pytest.mark.slow  # uses the session's trained pendulum run
def test_progress_lines_while_no_episode_ends(trained_run, monkeypatch, capsys):
    """With a progress interval of 0 s every step without a finished episode prints one line, steps counting up;
    the start line says how long an episode may last."""
    monkeypatch.setattr(play_module, "PROGRESS_S", 0.0)
    result = play_module.play({"checkpoint": str(trained_run["dir"]), "episodes": 1, "max_steps": 6})
    out = capsys.readouterr().out
    assert "1 episode(s) of up to 200 steps" in out
    lines = PROGRESS.findall(out)
    assert [int(s) for s, *_ in lines] == [1, 2, 3, 4, 5] and result["steps"] == 6  # none after the last step
    assert all((at_most, done, total) == ("6", "0", "1") for _, at_most, done, total in lines)


@pytest.mark.slow  # uses the session's trained pendulum run
def test_no_progress_lines_when_episodes_report_in_time(trained_run, monkeypatch, capsys):
    """Before the interval has passed nothing is printed (an interval no run reaches: no wall-clock dependence)."""
    monkeypatch.setattr(play_module, "PROGRESS_S", 1e9)
    play_module.play({"checkpoint": str(trained_run["dir"]), "episodes": 1, "max_steps": 6})
    assert not PROGRESS.search(capsys.readouterr().out)


def test_readme_plays_one_shipped_episode():
    """The README's first Go2 command plays one episode (1,000 steps), not the default ten."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    commands = [ln.split("#")[0].split() for ln in text.splitlines()
                if ln.startswith("python -m rlcore.play") and "pretrained=" in ln and "video=true" in ln]
    assert commands, "the README no longer shows play pretrained=... video=true"
    for argv in commands:
        assert parse_key_values(argv[3:], PlayCfg, "play")["episodes"] == 1, argv
