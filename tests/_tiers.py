"""Test tiers: the ``slow`` and ``learning`` markers, and the check that keeps the fast tier fast.

Loaded by ``tests/conftest.py`` (``pytest_plugins``); a pytest run elsewhere loads it with ``-p _tiers`` (``tests/``
on ``sys.path``).

- ``learning`` (trains a policy to a threshold) implies ``slow``: every ``learning`` item gets the ``slow`` marker at
  collection, so ``-m "not slow"`` leaves them out too.
- An item without either marker whose setup + call take longer than the limit (2 s; 5 s where ``CI=true``, since a
  shared CI machine late in the full run slows a test of ~0.6 s to 2.5 s now and then - measured here; the
  environment variable ``RLCORE_UNMARKED_LIMIT_S`` overrides both, in seconds) fails, even when its test passed,
  with one line:
  ``<nodeid> took X.X s unmarked: mark it @pytest.mark.slow (limit 2 s)``. Setup counts: a module- or
  session-scoped fixture that trains or starts processes costs the first test that uses it, and in a
  ``-m "not slow"`` run that is a test of the fast tier, so its users are ``slow`` too.
"""

from __future__ import annotations

import os

import pytest

LIMIT_ENV = "RLCORE_UNMARKED_LIMIT_S"
DEFAULT_LIMIT_S = 2.0
CI_LIMIT_S = 5.0
TIER_MARKERS = ("slow", "learning")

_limit_key = pytest.StashKey[float]()
_setup_key = pytest.StashKey[float]()


def unmarked_limit_s() -> float:
    """The limit on an unmarked test's setup + call, in seconds (``RLCORE_UNMARKED_LIMIT_S``; else 5 where
    ``CI=true``, 2 elsewhere)."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return CI_LIMIT_S if os.environ.get("CI", "").lower() in ("1", "true") else DEFAULT_LIMIT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise pytest.UsageError(f"{LIMIT_ENV}={raw!r}: a number of seconds > 0")
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_limit_key] = unmarked_limit_s()


@pytest.hookimpl(tryfirst=True)  # before -m deselects: "not slow" must see the slow marker of learning items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("learning") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "setup":
        item.stash[_setup_key] = call.duration
    elif call.when == "call" and report.passed and not any(item.get_closest_marker(m) for m in TIER_MARKERS):
        limit = item.config.stash.get(_limit_key, DEFAULT_LIMIT_S)
        took = item.stash.get(_setup_key, 0.0) + call.duration
        if took > limit:
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} took {took:.1f} s unmarked: mark it @pytest.mark.slow "
                               f"(limit {limit:g} s)")
    return report
