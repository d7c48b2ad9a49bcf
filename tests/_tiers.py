"""Test tiers: the ``slow`` and ``learning`` markers, and the report that keeps the fast tier fast.

Loaded by ``tests/conftest.py`` (``pytest_plugins``); a pytest run elsewhere loads it with ``-p _tiers`` (``tests/``
on ``sys.path``).

- ``learning`` (trains a policy to a threshold) implies ``slow``: every ``learning`` item gets the ``slow`` marker at
  collection, so ``-m "not slow"`` leaves them out too.
- The tier audit is a report, never a failure: an item without either marker whose setup + call use more CPU time
  than the limit (2 s; the environment variable ``RLCORE_UNMARKED_LIMIT_S`` sets another, in seconds) is listed at
  the end of the run, ``<nodeid>  cpu X.X s  wall Y.Y s``, under "unmarked tests over 2 s of CPU time". Its outcome
  and the run's exit status stay what the tests made them.
- CPU time, not wall-clock time: the process's own (every thread) plus that of the child processes it waited for
  (``os.times``). A busy machine stretches a test's wall-clock time (0.7 s idle became 3.4 s beside a training run)
  but hardly its CPU time, so the list names the tests that are slow themselves, not the ones that ran at a bad
  moment. A test that only waits (sleeps, or a child process it never reaps) costs little CPU and is not listed:
  ``python -m pytest -m "not slow" --durations=20`` shows wall-clock times (docs/contributing.md).
- Setup counts: a module- or session-scoped fixture that trains or starts processes costs the first test that uses
  it, and in a ``-m "not slow"`` run that is a test of the fast tier, so its users are ``slow`` too.
"""

from __future__ import annotations

import math
import os

import pytest

LIMIT_ENV = "RLCORE_UNMARKED_LIMIT_S"
DEFAULT_LIMIT_S = 2.0
TIER_MARKERS = ("slow", "learning")

_limit_key = pytest.StashKey[float]()
_note_key = pytest.StashKey[str]()  # why the limit is the default despite RLCORE_UNMARKED_LIMIT_S ("" if it is not)
_over_key = pytest.StashKey[list]()  # (nodeid, cpu s, wall s) of the unmarked items over the limit, in run order
_cpu_start_key = pytest.StashKey[float]()
_wall_key = pytest.StashKey[float]()


def unmarked_limit_s() -> float:
    """The CPU-time limit of the report on an unmarked test's setup + call, in seconds (``RLCORE_UNMARKED_LIMIT_S``,
    else 2).

    Raises:
        ValueError: ``RLCORE_UNMARKED_LIMIT_S`` is set but not a number of seconds > 0 (one line).
    """
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return DEFAULT_LIMIT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"{LIMIT_ENV}={raw!r}: a number of seconds > 0")
    return value


def cpu_seconds() -> float:
    """CPU time so far of this process (all threads) and of the child processes it has waited for, in seconds."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pytest_configure(config: pytest.Config) -> None:
    try:
        config.stash[_limit_key], config.stash[_note_key] = unmarked_limit_s(), ""
    except ValueError as err:  # the report's own setting: a note in the report, not a failed run
        config.stash[_limit_key], config.stash[_note_key] = DEFAULT_LIMIT_S, f"{err}; using {DEFAULT_LIMIT_S:g} s"
    config.stash[_over_key] = []


@pytest.hookimpl(tryfirst=True)  # before -m deselects: "not slow" must see the slow marker of learning items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("learning") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    item.stash[_cpu_start_key] = cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Books an unmarked item's setup + call times; the report's outcome is left as the test made it."""
    report = yield
    if call.when == "setup":
        item.stash[_wall_key] = call.duration
    elif call.when == "call" and report.passed and not any(item.get_closest_marker(m) for m in TIER_MARKERS):
        cpu = cpu_seconds() - item.stash.get(_cpu_start_key, cpu_seconds())
        wall = item.stash.get(_wall_key, 0.0) + call.duration
        if cpu > item.config.stash.get(_limit_key, DEFAULT_LIMIT_S):
            item.config.stash.setdefault(_over_key, []).append((item.nodeid, cpu, wall))
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The tier report: the unmarked tests over the CPU-time limit, each with its CPU and wall-clock seconds."""
    over, note = config.stash.get(_over_key, []), config.stash.get(_note_key, "")
    if not over and not note:
        return
    limit = config.stash.get(_limit_key, DEFAULT_LIMIT_S)
    terminalreporter.section(f"unmarked tests over {limit:g} s of CPU time (mark them @pytest.mark.slow)")
    if note:
        terminalreporter.line(note)
    for nodeid, cpu, wall in over:
        terminalreporter.line(f"{nodeid}  cpu {cpu:.1f} s  wall {wall:.1f} s")
