"""Fixtures of the command-line tests: one tiny training run shared by the whole session."""

from __future__ import annotations

import pytest
from cli_helpers import TINY, check_ok, run_module


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """``python -m rlcore.train task=pendulum`` with tiny settings: a run directory with model_0.pt and model_1.pt
    (iterations are numbered from 0, as in rsl_rl)."""
    run_dir = tmp_path_factory.mktemp("cli") / "pendulum_run"
    proc = check_ok(run_module("rlcore.train", "task=pendulum", *TINY, "seed=5", f"hydra.run.dir={run_dir}"))
    return {"dir": run_dir, "proc": proc}
