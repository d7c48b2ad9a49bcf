"""A user's mistake is one line where it is detected, and a bug is a bug (issue 52, item 9).

Before (fc0b074): ``rlcore.export output=<an existing directory>`` or ``output=<a path under a file>`` printed a
traceback and "probably a bug in rlcore"; in a 2-rank job a user mistake caught on rank 0 was one line there but a
``RuntimeError`` traceback on rank 1; ``robustness.load_interface`` turned a bug in ``upgrade_interface`` into a
one-line "cannot read it" user error.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch.distributed as dist
from cli_helpers import TIMEOUT_S, TINY, cli_env, free_port

from rlcore import export as export_cli
from rlcore import robustness
from rlcore.config.cli import UserError
from rlcore.robustness import load_interface
from rlcore_tasks.go2.pretrained import __file__ as _pretrained_init


def _one_error_line(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_export_to_an_existing_directory_is_one_line(tmp_path, capsys):
    line = _one_error_line(export_cli.main, ["checkpoint=whatever", f"output={tmp_path}"], capsys)
    assert f"output={tmp_path} is a directory" in line and "policy.onnx" in line


def test_export_to_a_path_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("a file")
    line = _one_error_line(export_cli.main, ["checkpoint=whatever", f"output={tmp_path}/notes.txt/sub/p.onnx"], capsys)
    assert f"'{tmp_path / 'notes.txt'}' is a file, not a directory" in line


def test_a_bug_in_reading_an_interface_is_not_a_user_error(monkeypatch):
    shipped = str(__import__("pathlib").Path(_pretrained_init).with_name("go2_flat.onnx"))
    load_interface(shipped)  # the shipped file reads

    def broken(meta):
        raise KeyError("a bug in upgrade_interface")

    monkeypatch.setattr("rlcore.deployment.upgrade_interface", broken)
    with pytest.raises(KeyError, match="a bug in upgrade_interface") as err:
        load_interface(shipped)
    assert not isinstance(err.value, UserError)
    with pytest.raises(UserError, match="cannot read it as an ONNX model"):  # the file's own fault stays one line
        load_interface(__file__)
    assert robustness.load_interface is load_interface


@pytest.mark.slow  # torchrun: two processes train
@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()), reason="no Gloo backend")
def test_a_user_mistake_on_rank_0_is_a_user_error_on_every_rank(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", "-m", "rlcore.train", "task=pendulum", *TINY,
           "runner.keep_best=no_such_metric", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error")]
    assert 1 <= len(errors) <= 2, proc.stderr[-3000:]  # one line per rank that reported before torchrun stopped it
    assert "reports no metric 'no_such_metric'" in errors[0] or "reports no metric 'no_such_metric'" in errors[1]
    assert all(ln.startswith("error: ") for ln in errors), errors
    assert "probably a bug" not in proc.stderr and "RuntimeError" not in proc.stderr
    assert "exitcode  : 1" not in proc.stderr, proc.stderr[-3000:]  # torchrun's summary: no rank exits as a bug
