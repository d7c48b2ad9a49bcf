"""``python -m rlcore.train --help`` lists the config groups a user chooses from, and only those."""

from __future__ import annotations

import re

import pytest

from rlcore.config.cli import AUTOMATIC_GROUPS, config_dir, group_options, user_groups_help
from tests.cli.cli_helpers import check_ok, run_module

USER_GROUPS = {"algorithm", "extension", "logger", "model", "runner", "task"}


def test_user_groups_are_the_conf_folders_but_the_automatic_ones():
    lines = dict(line.split(": ", 1) for line in user_groups_help().splitlines())
    assert set(lines) == USER_GROUPS
    assert lines["model"] == "cnn, mlp, rnn"
    assert lines["task"].split(", ") == group_options("task")
    assert "go2" in lines["task"].split(", ")
    assert set(AUTOMATIC_GROUPS) <= {d.name for d in __import__("pathlib").Path(config_dir()).iterdir()}


@pytest.mark.slow
def test_train_help_shows_user_groups_not_internal_schema_nodes():
    out = check_ok(run_module("rlcore.train", "--help")).stdout
    groups = out.split("== Config groups ==", 1)[1].split("==", 1)[0]
    names = set(re.findall(r"^(\S+):", groups, re.M))
    assert names == USER_GROUPS, out
    assert "schema" not in groups and "task_algorithm" not in groups
    assert "model: cnn, mlp, rnn" in groups
    assert "docs/config.md" in out and "seed: 1" in out  # the how-to line and the composed config follow
