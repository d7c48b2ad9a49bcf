"""The tier check of ``tests/_tiers.py``: an unmarked test over the limit fails with one line, a ``slow`` or ``learning``
one passes, a slow fixture counts, and ``learning`` items are ``slow`` for ``-m``."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INI = """
[pytest]
markers =
    slow: takes more than 2 s
    learning: trains a policy to a threshold
"""


def run_inner(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    """``source`` run by an in-process pytest with only the tier plugin (no installed plugins: quick to start)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_inner=source)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest("-p", "_tiers", "-p", "no:cacheprovider", "-q", *args)


@pytest.fixture
def short_limit(monkeypatch) -> float:
    """The limit cut to 0.1 s (``RLCORE_UNMARKED_LIMIT_S``), so the inner tests need not sleep 2 s."""
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "0.1")
    return 0.1


def test_unmarked_over_the_limit_fails(pytester, short_limit):
    result = run_inner(pytester, """
        import time
        import pytest

        @pytest.fixture(scope="module")
        def expensive():
            time.sleep(0.15)

        def test_unmarked():
            time.sleep(0.15)

        @pytest.mark.slow
        def test_slow():
            time.sleep(0.15)

        @pytest.mark.learning
        def test_learning():
            time.sleep(0.15)

        def test_fast():
            pass

        def test_slow_setup(expensive):
            pass

        def test_failing():
            time.sleep(0.15)
            assert False
    """)
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "test_inner.py::test_unmarked took 0.* s unmarked: mark it @pytest.mark.slow (limit 0.1 s)",
        "test_inner.py::test_slow_setup took 0.* s unmarked: mark it @pytest.mark.slow (limit 0.1 s)",
    ])
    assert "test_failing took" not in result.stdout.str()  # a failure keeps its own report


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


def test_bad_limit_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "two")
    result = run_inner(pytester, "def test_fast():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*RLCORE_UNMARKED_LIMIT_S='two': a number of seconds > 0*"])


@pytest.mark.slow
def test_default_limit_is_2_s(pytester, monkeypatch):
    monkeypatch.delenv("RLCORE_UNMARKED_LIMIT_S", raising=False)
    monkeypatch.delenv("CI", raising=False)  # CI=true allows 5 s (test_ci_limit_is_5_s)
    result = run_inner(pytester, """
        import time
        import pytest

        def test_unmarked():
            time.sleep(2.1)

        @pytest.mark.slow
        def test_marked():
            time.sleep(2.1)
    """)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["test_inner.py::test_unmarked took 2.* s unmarked: mark it @pytest.mark.slow "
                                 "(limit 2 s)"])


def test_ci_limit_is_5_s(monkeypatch):
    """On CI (``CI=true``) the limit is 5 s unless ``RLCORE_UNMARKED_LIMIT_S`` says otherwise; 2 s elsewhere."""
    from _tiers import unmarked_limit_s

    monkeypatch.delenv("RLCORE_UNMARKED_LIMIT_S", raising=False)
    monkeypatch.setenv("CI", "true")
    assert unmarked_limit_s() == 5.0
    monkeypatch.setenv("RLCORE_UNMARKED_LIMIT_S", "1.5")
    assert unmarked_limit_s() == 1.5
    monkeypatch.delenv("RLCORE_UNMARKED_LIMIT_S")
    monkeypatch.delenv("CI")
    assert unmarked_limit_s() == 2.0
