"""Task plugins (``rlcore.tasks`` entry points): one that is broken is named in one line and left out; every other
task stays usable (issue 52, item 8: before, an entry point whose module failed to import made ``task=pendulum``
fail with exit status 2)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from rlcore.env import task as task_registry

_BROKEN = "broken_plugin = no_such_module_xyz.tasks:TASKS"


@pytest.fixture
def broken_plugins(monkeypatch):
    """The installed entry points plus two broken ones (a module that does not import, an object that is not a
    TaskSpec), in a registry that has not loaded any entry point yet."""
    group = task_registry.ENTRY_POINT_GROUP
    installed = list(metadata.entry_points(group=group))
    extra = [metadata.EntryPoint(name="broken_plugin", value="no_such_module_xyz.tasks:TASKS", group=group),
             metadata.EntryPoint(name="not_a_spec", value="os.path:join", group=group)]
    monkeypatch.setattr(task_registry.metadata, "entry_points", lambda group: [*extra[:1], *installed, *extra[1:]])
    builtin = {n: s for n, s in task_registry._REGISTRY.items() if n in ("gym", "mjlab")}
    monkeypatch.setattr(task_registry, "_REGISTRY", builtin)
    monkeypatch.setattr(task_registry, "_BROKEN_PLUGINS", {})
    monkeypatch.setattr(task_registry, "_entry_points_loaded", False)
    monkeypatch.delenv("RANK", raising=False)


def test_a_broken_plugin_is_named_and_the_others_stay_usable(broken_plugins, capsys):
    spec = task_registry.get_task("pendulum")  # registered by an entry point listed after the broken one
    assert spec.name == "pendulum"
    assert {"pendulum", "cartpole", "go2"} <= set(task_registry.list_tasks())
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 2, lines  # one line per broken plugin, none for the others
    assert _BROKEN in lines[0] and "ModuleNotFoundError" in lines[0] and "no_such_module_xyz" in lines[0]
    assert "not_a_spec = os.path:join" in lines[1] and "not a rlcore.env.task.TaskSpec" in lines[1]
    # A task that such a plugin might have registered: the unknown-task error says which plugins were skipped.
    with pytest.raises(task_registry.UnknownTaskError, match="skipped, task entry point broken_plugin") as err:
        task_registry.get_task("my_robot")
    assert "pendulum" in str(err.value)
    task_registry.get_task("cartpole")
    assert capsys.readouterr().err == ""  # said once per process


@pytest.mark.slow  # trains in a subprocess (~5 s)
def test_train_runs_beside_an_installed_broken_plugin(tmp_path):
    """As a user meets it: a package whose ``rlcore.tasks`` entry point cannot import is installed (a dist-info on
    the path); ``task=pendulum`` still trains, and stderr names the broken plugin in one line."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
    from cli_helpers import TINY, check_ok, run_module

    dist_info = tmp_path / "site" / "broken_plugin-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[rlcore.tasks]\n{_BROKEN}\n")
    tiny = [a for a in TINY if not a.startswith("runner.max_iterations")]
    from cli_helpers import cli_env

    env = {"PYTHONPATH": f"{cli_env()['PYTHONPATH']}:{tmp_path / 'site'}"}
    proc = check_ok(run_module("rlcore.train", "task=pendulum", *tiny, "runner.max_iterations=1",
                               f"hydra.run.dir={tmp_path / 'run'}", env=env))
    assert (tmp_path / "run" / "model_0.pt").is_file()
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "broken_plugin = no_such_module_xyz.tasks:TASKS" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
