"""What a wheel ships: every YAML file of conf/ (listed in pyproject's data-files), the task packages' data and
their entry points."""

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


@pytest.mark.slow
def test_a_wheel_holds_the_task_packages_data_and_entry_points(tmp_path):
    """A wheel (not the checkout) carries the shipped policies, the Go2 model and the ``rlcore.tasks`` entry points
    through which rlcore finds its example tasks."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    for name in ("rlcore", "rlcore_tasks", "conf"):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("rlcore-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for shipped in ("rlcore_tasks/go2/pretrained/go2_flat.onnx", "rlcore_tasks/go2/pretrained/go2_flat_student.onnx",
                    "rlcore_tasks/go2/task.py", "rlcore/env/task.py", "rlcore/report/__main__.py"):
        assert shipped in names, shipped
    assert any(n.startswith("rlcore_tasks/go2/assets/") and n.endswith(".xml") for n in names)
    assert not any(n.startswith(("tasks/", "rlcore/pretrained/")) for n in names)
    assert "[rlcore.tasks]" in entry_points
    assert "go2 = rlcore_tasks.go2.task:TASKS" in entry_points and "classic = rlcore_tasks.classic.task:TASKS" in entry_points
