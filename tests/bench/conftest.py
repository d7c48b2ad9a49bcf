"""Fixtures of the bench-script tests: ``bench/`` importable, and a tiny Go2 checkpoint for the Go2 probes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench/ is not a package


@pytest.fixture(scope="module")
def checkpoint(tiny_go2_run) -> str:
    """The session's one-iteration ``task=go2`` run (see tests/conftest.py)."""
    return tiny_go2_run
