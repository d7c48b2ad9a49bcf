"""Helpers of the command-line tests: run ``python -m rlcore.<verb>`` as a subprocess with tiny settings."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

#: Tiny training settings: 8 envs, 8-step rollouts, 16-unit networks, no logger; 2 iterations, a checkpoint each.
TINY = ["task.num_envs=8", "runner.num_steps_per_env=8", "runner.max_iterations=2", "runner.save_interval=1",
        "logger=none", "model.actor.hidden_dims=[16,16]", "model.critic.hidden_dims=[16,16]",
        "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]


def cli_env() -> dict:
    """The environment of a child process: one thread, the repo importable, no inherited torchrun variables."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RLCORE_DEBUG",
                "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    return env


def run_module(module: str, *args: str, cwd: str | os.PathLike | None = None,
               timeout: float = TIMEOUT_S, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m <module> args...`` in ``cwd`` (default: the repo root), with ``env`` added to the environment;
    returns the finished process."""
    cmd = [sys.executable, "-m", module, *args]
    return subprocess.run(cmd, cwd=str(cwd or REPO_ROOT), env={**cli_env(), **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def check_ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, (f"command failed ({proc.returncode}): {' '.join(proc.args)}\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    return proc


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """A user error: exit status 2, one ``error:`` line on stderr containing ``fragments``, no stack trace."""
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def episode_returns(stdout: str) -> list[float]:
    """The per-episode returns that ``rlcore.play`` printed."""
    return [float(m.group(1)) for m in re.finditer(r"^episode\s+\d+\s+env\s+\d+\s+return\s+(\S+)", stdout, re.M)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
