"""Fixtures of the environment-adapter tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded():
    """Adapter tests sample policies and actions: seed torch for each (one thread is set in tests/conftest.py)."""
    torch.manual_seed(0)
