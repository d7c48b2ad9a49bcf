"""The diagnosis does not read partial-episode artefacts as a collapse (issue 40).

Before rlcore's return counted full episodes only, its ``Episode/mean_return`` (like rsl_rl's ``Train/mean_reward``)
averaged the partial first episodes of envs started at random points of their episodes, at the start and again
after every resume. A run resumed into its own directory then showed the return "collapsing" at the resume, and the
report advised lowering the learning rate. Such curves count as a collapse only where the return per step of
episode fell too; rlcore's full-episode curve (marked by ``Episode/mean_reward_per_step``) is read as it is.
"""

from __future__ import annotations

from conftest import write_run

from rlcore.report import build_html, load_run

MAX_LEN = 500  # a cart-pole-like task: +1 per step while balanced, episodes of up to 500 steps


def _legacy_session(first: int, last: int, per_step) -> dict:
    """One training session as an older logger wrote it: partial episodes first, so the mean length (and with it
    the return) grows from a quarter of the episode to the whole of it over the session's first iterations."""
    lengths = [(it, float(min(MAX_LEN, 125 + 25 * (it - first)))) for it in range(first, last)]
    return {"Episode/mean_length": lengths, "Episode/mean_return": [(it, n * per_step(it)) for it, n in lengths],
            "Loss/value": [(it, 0.5) for it in range(first, last)]}


def _config(iterations: int) -> dict:
    return {"task": {"name": "cartpole"}, "runner": {"max_iterations": iterations}}


def test_a_resume_into_the_run_directory_is_not_a_collapse_but_a_worse_policy_is(tmp_path):
    """40 iterations, then a resume into the same directory for 8 more (a second event file): the old logger's
    return falls from 500 to about 300 while the policy earns as much per step as before: no finding. The same
    run whose policy really got worse after iteration 30 (the return per step fell too) is still a collapse."""
    improving = lambda it: 0.9 + 0.1 * min(it, 40) / 40  # noqa: E731 - reward per step, still improving
    run = tmp_path / "artefact"
    write_run(run, _legacy_session(0, 40, improving), _config(48))
    write_run(run, _legacy_session(40, 48, improving))  # the resume's event file
    result = load_run(str(run))
    assert result.scalars["Episode/mean_return"][-1] == (47, 300.0)  # the artefact is in the curve ...
    assert [f.rule for f in result.findings] == []  # ... but no "return collapse, lower the learning rate"
    assert "averages partial episodes too" in build_html([result])  # the summary table says what the curve is

    worse = lambda it: 1.0 if it < 30 else max(0.2, 1.0 - 0.08 * (it - 30))  # noqa: E731
    run = tmp_path / "worse"
    write_run(run, _legacy_session(0, 40, worse), _config(48))
    write_run(run, _legacy_session(40, 48, worse))
    findings = load_run(str(run)).findings
    assert [f.rule for f in findings] == ["return_collapse"], findings

    # rlcore's full-episode return (with its per-step reward curve) is read as it is: a fall is a collapse even
    # where the episodes shorten with it, and the summary table adds no caveat.
    n = 60
    length = [(it, 500.0 if it < 30 else 150.0) for it in range(n)]
    per_step = [(it, 0.5 + 0.5 * min(it, 20) / 20) for it in range(n)]
    curves = {"Episode/mean_length": length, "Episode/mean_reward_per_step": per_step,
              "Episode/mean_return": [(it, p * n_) for (it, p), (_, n_) in zip(per_step, length)],
              "Loss/value": [(it, 0.5) for it in range(n)]}
    result = load_run(str(write_run(tmp_path / "full", curves, _config(n))))
    assert "return_collapse" in [f.rule for f in result.findings]
    assert "averages partial episodes too" not in build_html([result])
