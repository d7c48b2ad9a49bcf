"""conf/ ships with a wheel: every YAML file of the tree is listed in pyproject's data-files."""

from __future__ import annotations

import glob
import os

import pytest
from cli_helpers import REPO_ROOT


def test_every_config_file_is_packaged():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    data_files = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    packaged = set()
    for target, patterns in data_files.items():
        assert target.startswith("share/rlcore/conf")
        for pattern in patterns:
            for path in glob.glob(str(REPO_ROOT / pattern)):
                rel = os.path.relpath(path, REPO_ROOT / "conf")
                assert os.path.join("share/rlcore/conf", os.path.dirname(rel)).rstrip("/") == target.rstrip("/")
                packaged.add(rel)
    tree = {os.path.relpath(p, REPO_ROOT / "conf") for p in glob.glob(str(REPO_ROOT / "conf" / "**" / "*.yaml"),
                                                                      recursive=True)}
    assert tree - packaged == set(), f"config files missing from [tool.setuptools.data-files]: {tree - packaged}"
