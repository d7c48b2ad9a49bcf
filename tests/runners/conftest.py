"""Fixtures of the runner tests (helpers are in runner_helpers.py)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """Runner tests are timing-sensitive on shared CPUs: keep torch to one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
