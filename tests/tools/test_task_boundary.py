"""The boundary is one-way: rlcore never imports a task package; tasks reach rlcore's tools through the registry."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlcore
from tests.tools.task_imports import REPO, imports_into, task_packages

# Imports every module of rlcore (the tools' modules included) with the task packages hidden: importing one of them
# raises, and a module imported anyway would show in sys.modules.
HIDDEN = textwrap.dedent("""
    import importlib, importlib.abc, json, sys
    HIDDEN = set(sys.argv[1].split(","))

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ImportError(f"hidden task package {name}")
            return None

    sys.meta_path.insert(0, Hide())
    failed = {}
    for module in sys.argv[2].split(","):
        try:
            importlib.import_module(module)
        except Exception as err:
            failed[module] = f"{type(err).__name__}: {err}"
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN)
    print(json.dumps({"failed": failed, "loaded": loaded}))
""")


def rlcore_modules() -> list[str]:
    """Every module of the rlcore package (``__main__`` modules, which run their tool, left out)."""
    names = ["rlcore"]
    for info in pkgutil.walk_packages(rlcore.__path__, "rlcore."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return names


def test_the_scan_finds_imports_into_task_packages(tmp_path):
    """The scanner behind tests/tools/task_imports.py sees every form of import (so its 0 means something)."""
    pkg = tmp_path / "rlcore"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\nimport rlcore_tasks.go2\n\ndef f():\n    from tasks.registry import make_task\n"
                              "    import importlib\n    importlib.import_module('rlcore_tasks.go2.env')\n")
    found = imports_into(pkg, {"rlcore_tasks", "tasks"})
    assert [(line, module) for _, line, module in found] == [(2, "rlcore_tasks.go2"), (5, "tasks.registry"),
                                                             (7, "rlcore_tasks.go2.env")]


@pytest.mark.slow
def test_rlcore_source_imports_no_task_package():
    packages = task_packages()
    assert "rlcore_tasks" in packages  # read from pyproject's rlcore.tasks entry points
    assert imports_into(REPO / "rlcore", packages) == []
    out = subprocess.run([sys.executable, str(REPO / "tests" / "tools" / "task_imports.py")], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "imports from rlcore into task packages: 0"


@pytest.mark.slow
def test_every_rlcore_module_imports_with_the_task_packages_hidden():
    modules = rlcore_modules()
    for tool in ("rlcore.train", "rlcore.play", "rlcore.export", "rlcore.robustness", "rlcore.report.cli",
                 "rlcore.viewer", "rlcore.config.doc"):
        assert tool in modules
    proc = subprocess.run([sys.executable, "-c", HIDDEN, ",".join(sorted(task_packages())), ",".join(modules)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"failed": {}, "loaded": []}, result


@pytest.mark.slow
def test_hiding_works_a_task_module_fails_to_import_when_hidden():
    """The same harness on a task module: it fails and says so (the check above can fail)."""
    proc = subprocess.run([sys.executable, "-c", HIDDEN, "rlcore_tasks", "rlcore_tasks.go2.task"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "hidden task package rlcore_tasks" in result["failed"]["rlcore_tasks.go2.task"]


def test_tasks_come_from_the_entry_points_and_a_user_can_register_one():
    from rlcore.env.task import ENTRY_POINT_GROUP, TaskSpec, get_task, list_tasks, make_task, register_task
    from rlcore_tasks.classic.pendulum import PendulumSwingUp

    assert {"go2", "go2_rough", "pendulum", "cartpole", "gym"} <= set(list_tasks())
    assert ENTRY_POINT_GROUP == "rlcore.tasks"
    go2 = get_task("go2")
    assert go2.pretrained["go2_flat"].path.endswith("rlcore_tasks/go2/pretrained/go2_flat.onnx")
    assert Path(go2.pretrained["go2_flat"].path).is_file()
    assert go2.robustness is not None and go2.viewer_env is not None and go2.env_from_interface is not None
    assert get_task("pendulum").robustness is None
    spec = register_task(TaskSpec(name="my_pendulum", make_env=PendulumSwingUp))
    try:
        assert get_task("my_pendulum") is spec
        assert make_task("my_pendulum", num_envs=3).num_envs == 3
    finally:
        from rlcore.env import task as registry

        registry._REGISTRY.pop("my_pendulum")


def test_task_module_registers_a_task_that_is_not_installed(tmp_path, monkeypatch):
    """``task.module=<module>``: the module is imported first and its register_task call makes the task known."""
    from rlcore.env.task import UnknownTaskError, make_task

    (tmp_path / "my_robot_task.py").write_text(textwrap.dedent("""
        from rlcore.env.task import TaskSpec, register_task
        from rlcore_tasks.classic.cartpole import CartPole
        register_task(TaskSpec(name="my_robot", make_env=CartPole))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(UnknownTaskError, match="unknown task 'my_robot'; registered tasks: cartpole, go2"):
            make_task("my_robot", num_envs=2)
        assert make_task("my_robot", "my_robot_task", num_envs=2).num_envs == 2
    finally:
        from rlcore.env import task as registry

        registry._REGISTRY.pop("my_robot", None)
        sys.modules.pop("my_robot_task", None)
