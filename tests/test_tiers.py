"""The tier report of ``tests/_tiers.py``: an unmarked test over the CPU-time limit is listed at the end of the run and
still passes (a busy machine must never fail a run), a ``slow`` or ``learning`` one is not listed, a slow fixture
counts, and ``learning`` items are ``slow`` for ``-m``."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

INI = """
[pytest]
markers =
    slow: takes more than 2 s
    learning: trains a policy to a threshold
"""

#: An inner test module's helper: burns ``seconds`` of this process's CPU time.
BURN = """
import time

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
"""

HEADER = "*= unmarked tests over 0.1 s of CPU time (mark them @pytest.mark.slow) =*"


def run_inner(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    """``source`` run by an in-process pytest with only the tier plugin (no installed plugins: quick to start)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_inner=BURN + textwrap.dedent(source))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest("-p", "_tiers", "-p", "no:cacheprovider", "-q", *args)


@pytest.fixture
def short_limit(monkeypatch) -> float:
    """The limit cut to 0.1 s (``RLCORE_UNMARKED_LIMIT_S``), so the inner tests need not burn 2 s."""
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "0.1")
    return 0.1


@pytest.mark.slow  # its inner tests burn 1.5 s of CPU (the report listed it at 2.5 s)
def test_an_unmarked_test_over_the_limit_passes_and_is_reported(pytester, short_limit):
    """The audit never fails a run: a test that waits 0.3 s of wall-clock time (a busy machine's doing) passes and is
    not listed; one that burns 0.3 s of CPU passes too and is listed, with its CPU and wall-clock times."""
    result = run_inner(pytester, """
        import pytest

        @pytest.fixture(scope="module")
        def expensive():
            burn(0.3)

        def test_waits():
            time.sleep(0.3)

        def test_unmarked():
            burn(0.3)

        @pytest.mark.slow
        def test_slow():
            burn(0.3)

        @pytest.mark.learning
        def test_learning():
            burn(0.3)

        def test_fast():
            pass

        def test_slow_setup(expensive):
            pass

        def test_failing():
            burn(0.3)
            assert False
    """)
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines([HEADER, "test_inner.py::test_unmarked  cpu 0.* s  wall 0.* s",
                                 "test_inner.py::test_slow_setup  cpu 0.* s  wall 0.* s"])
    section = result.stdout.str().split("unmarked tests over", 1)[1].split("short test summary", 1)[0]
    for name in ("test_waits", "test_slow ", "test_learning", "test_fast", "test_failing"):
        assert f"::{name}" not in section, name  # waiting costs no CPU; marked ones are slow; a failure is its own


def test_a_run_over_the_limit_exits_0(pytester, short_limit):
    result = run_inner(pytester, "def test_unmarked():\n    burn(0.3)\n")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([HEADER, "test_inner.py::test_unmarked  cpu 0.* s  wall 0.* s"])


def test_nothing_over_the_limit_prints_no_report(pytester, short_limit):
    result = run_inner(pytester, "def test_fast():\n    pass\n")
    result.assert_outcomes(passed=1)
    assert "unmarked tests over" not in result.stdout.str()


def test_learning_is_slow_for_deselection(pytester, short_limit):
    result = run_inner(pytester, """
        import pytest

        @pytest.mark.learning
        def test_learning():
            pass

        def test_fast():
            pass
    """, "-m", "not slow")
    result.assert_outcomes(passed=1, deselected=1)


def test_a_bad_limit_is_a_note_not_a_failure(pytester, monkeypatch):
    """The report's own setting cannot fail the run either: a bad value is named in the report, 2 s is used."""
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "two")
    result = run_inner(pytester, "def test_fast():\n    pass\n")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*= unmarked tests over 2 s of CPU time *",
                                 "RLCORE_UNMARKED_LIMIT_S='two': a number of seconds > 0; using 2 s"])


def test_the_limit_is_2_s_unless_set(monkeypatch):
    """2 s of CPU time, on CI too (CPU time does not grow on a busy machine as wall-clock time does)."""
    from _tiers import unmarked_limit_s

    monkeypatch.delenv("RLCORE_UNMARKED_LIMIT_S", raising=False)
    monkeypatch.setenv("CI", "true")
    assert unmarked_limit_s() == 2.0
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "1.5")
    assert unmarked_limit_s() == 1.5
    for bad in ("0", "-1", "inf", "two"):
        monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", bad)
        with pytest.raises(ValueError, match="a number of seconds > 0"):
            unmarked_limit_s()
