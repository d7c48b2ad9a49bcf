"""``python -m rlcore.report``: the page of a real pendulum run, several runs overlaid, config differences,
findings on the page, where the page goes, and one-line errors."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from conftest import REPO_ROOT, run_module, seed_config, seed_curves, write_run

from rlcore.report import cli
from rlcore.report import page as report_page
from rlcore.report.diagnosis import load_scalars


def chart_data(page: str) -> list[dict]:
    """The hover data of every chart (one entry per chart, in page order)."""
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def chart_index(page: str, tag: str) -> int:
    card = page.index(f'id="{report_page._anchor(tag)}"')
    return int(re.search(r'data-chart="(\d+)"', page[card:]).group(1))


def card_svg(page: str, tag: str) -> str:
    card = page[page.index(f'id="{report_page._anchor(tag)}"'):]
    return card[: card.index("</svg>")]


def assert_user_error(proc, *fragments: str) -> None:
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.slow
def test_report_of_a_real_run_has_every_curve(pendulum_run):
    proc = run_module("rlcore.report", f"run={pendulum_run}")
    assert proc.returncode == 0, proc.stderr
    out = pendulum_run / "report.html"
    assert f"[rlcore] report: {out}" in proc.stdout
    assert "Diagnosis of pendulum:" in proc.stdout
    page = out.read_text()
    scalars = load_scalars(str(pendulum_run))
    expected = {"Episode/mean_return", "Episode/mean_length", "Loss/value", "Loss/surrogate", "Loss/entropy", "Loss/kl",
                "Loss/learning_rate", "Policy/mean_std", "Perf/steps_per_s"}
    assert expected <= set(scalars)
    for tag in scalars:  # every logged scalar has its chart, drawing exactly the logged values
        data = chart_data(page)[chart_index(page, tag)]
        (series,) = data["series"]
        assert series["x"] == [it for it, _ in scalars[tag]] == list(range(5)), tag
        assert series["y"] == [v for _, v in scalars[tag]], tag
    assert "<h2>Diagnosis (0 findings)</h2>" in page
    assert "One run: nothing to compare." in page and "algorithm.learning_rate" in page  # its config, folded
    # Self-contained: no scripts, styles, images or fonts from anywhere else.
    assert not re.search(r"https?://|<link|\bsrc=|@import|url\(", page)


@pytest.mark.slow
def test_several_runs_overlaid_with_mean_and_band(tmp_path):
    sweep = tmp_path / "sweep"
    for seed in (1, 2, 3):
        write_run(sweep / str(seed), seed_curves(seed), seed_config(seed))
    write_run(sweep / "4", seed_curves(4, lr=3e-3), seed_config(4, lr=3e-3))
    proc = run_module("rlcore.report", f"run={sweep}")  # a sweep directory: its job folders are the runs
    assert proc.returncode == 0, proc.stderr
    page = (sweep / "report.html").read_text()
    data = chart_data(page)[chart_index(page, "Episode/mean_return")]
    seeds, other = data["series"]
    assert seeds["name"] == "algorithm.learning_rate=0.001 (3 runs, seeds 1, 2, 3)"
    assert other["name"] == "algorithm.learning_rate=0.003"
    curves = [seed_curves(s)["Episode/mean_return"] for s in (1, 2, 3)]
    for k in (0, 17, 59):  # the group's line is the mean over seeds
        assert abs(seeds["y"][k] - statistics.fmean(c[k][1] for c in curves)) < 1e-4
    assert abs(other["y"][17] - seed_curves(4, lr=3e-3)["Episode/mean_return"][17][1]) < 1e-4
    # A min-max band for the group of seeds, where the seeds differ (the std curves are identical).
    bands = {tag: card_svg(page, tag).count('class="band"') for tag in seed_curves(1)}
    assert bands == {"Episode/mean_return": 1, "Loss/value": 1, "Policy/mean_std": 0}
    # Config differences: the keys that differ, in the runs' order; identical keys are left out.
    table = page[page.index("<h2>Config differences</h2>"): page.index("<h2>Curves</h2>")]
    assert "2 key(s) differ." in table
    assert re.search(r"algorithm\.learning_rate</code></td>(<td><code>0\.001</code></td>){3}<td><code>0\.003", table)
    assert "<code>seed</code>" in table and "task.name" not in table


@pytest.mark.slow
def test_report_output_places(tmp_path):
    a = write_run(tmp_path / "a", seed_curves(1), seed_config(1))
    b = write_run(tmp_path / "b", seed_curves(2), seed_config(2))
    assert run_module("rlcore.report", f"run={a}", f"run={b}").returncode == 0
    assert (a / "report_compare.html").is_file() and not (a / "report.html").exists()
    custom = tmp_path / "out" / "cmp.html"
    proc = run_module("rlcore.report", f"run={a}", f"run={b}", f"out={custom}")
    assert proc.returncode == 0 and custom.is_file(), proc.stderr
    assert "2 run(s): a, b" in custom.read_text()


def test_findings_are_on_the_page_and_marked_on_their_curve(tmp_path):
    curves = seed_curves(1, n=120)
    curves["Episode/mean_return"] = [(it, it / 3 if it < 60 else 20 - (it - 60) / 2) for it in range(120)]
    run = write_run(tmp_path / "collapsing", curves, seed_config(1) | {"runner": {"max_iterations": 200}})
    out, runs = cli.write_report([str(run)])
    page = open(out).read()
    rules = re.findall(r'data-rule="(\w+)"', page)
    assert rules == [f.rule for f in runs[0].findings] == ["return_collapse", "ended_early"]
    card = card_svg(page, "Episode/mean_return")
    assert card.count('class="mark warning"') == 1 and "return_collapse at iteration" in card
    assert "<h2>Diagnosis (2 findings)</h2>" in page


def test_long_curves_are_thinned_but_keep_spikes():
    xs = list(range(5000))
    ys = [100.0 if x == 3210 else 1.0 for x in xs]
    dx, dy = report_page._downsample(xs, ys)
    assert len(dx) <= report_page.MAX_POINTS and max(dy) == 100.0 and dx[0] == 0 and dx[-1] == 4999


@pytest.mark.slow
def test_errors_are_one_line(tmp_path):
    empty = tmp_path / "not_a_run"
    empty.mkdir()
    assert_user_error(run_module("rlcore.report", f"run={empty}"), "no TensorBoard event files", "logger=tensorboard")
    assert_user_error(run_module("rlcore.report", f"run={tmp_path / 'missing'}"), "run directory not found")
    assert_user_error(run_module("rlcore.report", "--bogus"), "unknown option --bogus", "out=FILE")
    assert_user_error(run_module("rlcore.report", "--out", "x.html"), "unknown option --out", "out=FILE")
    assert_user_error(run_module("rlcore.report", str(tmp_path)), f"write run={tmp_path}")
    assert_user_error(run_module("rlcore.report", "runs=x"), "unknown key 'runs'", "valid keys: run")
    assert_user_error(run_module("rlcore.report"), "at least one run directory")


def test_console_script_is_declared():
    text = (REPO_ROOT / "pyproject.toml").read_text()
    scripts = text[text.index("[project.scripts]"):].split("\n[", 1)[0]
    assert re.search(r'^rlcore-report = "rlcore\.report:main"$', scripts, re.M)
