"""The command line of ``python -m rlcore.report`` (and ``rlcore-report``): ``key=value`` arguments, like every
``python -m rlcore.*`` tool."""

from __future__ import annotations

import os
import sys

from rlcore.config.cli import user_errors
from rlcore.errors import ConfigError
from rlcore.report.diagnosis import format_findings
from rlcore.report.page import build_html
from rlcore.report.runs import Run, find_runs, load_run, name_runs

USAGE = """usage: python -m rlcore.report run=<dir> [run=<dir> ...] [out=FILE]

Write a self-contained HTML training report: every logged curve, several runs overlaid (seeds of one
config as mean and min-max band), the config differences, and a diagnosis of the curves.
  run=<dir>    a run directory of rlcore.train (with TensorBoard event files), or a sweep directory
               (its subdirectories holding event files are the runs); repeat it to compare runs
  out=FILE     where to write (default: <run dir>/report.html for one directory,
               <first run>/report_compare.html for several)"""


def default_output(paths: list[str]) -> str:
    """``<dir>/report.html`` for one directory given, ``<first run>/report_compare.html`` for several."""
    if len(paths) == 1:
        return os.path.join(paths[0], "report.html")
    return os.path.join(find_runs(paths[:1])[0], "report_compare.html")


def write_report(paths: list[str], out: str | None = None) -> tuple[str, list[Run]]:
    """Read the runs of ``paths`` (:func:`find_runs`), write the page, return (its path, the runs)."""
    if not paths:
        raise ConfigError("report needs at least one run directory: python -m rlcore.report run=<dir> ...")
    runs = [load_run(p) for p in find_runs(paths)]
    name_runs(runs)
    out = out or default_output(paths)
    if os.path.isdir(out):
        out = os.path.join(out, "report.html")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    page = build_html(runs)
    with open(out, "w", encoding="utf-8") as f:
        f.write(page)
    return out, runs


def parse_args(argv: list[str]) -> tuple[list[str], str | None]:
    """(run directories, ``out`` or None) from ``run=<dir>`` (repeatable) and ``out=FILE``.

    Raises:
        ConfigError: an argument that is not ``run=`` or ``out=`` (one line naming the valid keys), or an
            empty value.
    """
    paths, out = [], None
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in ("run", "out"):
            if not value:
                raise ConfigError(f"{key}= needs a value, e.g. {'run=logs/go2/<run>' if key == 'run' else 'out=report.html'}.")
            if key == "run":
                paths.append(value)
            else:
                out = value
        elif arg.startswith("-"):
            raise ConfigError(f"unknown option {arg}; arguments are key=value: run=<dir> (repeatable), out=FILE.")
        elif not sep:
            raise ConfigError(f"arguments are key=value: write run={arg} (valid keys: run, out).")
        else:
            raise ConfigError(f"unknown key {key!r}; valid keys: run (repeatable), out.")
    return paths, out


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m rlcore.report`` and ``rlcore-report``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return
    with user_errors():
        paths, out = parse_args(argv)
        out, runs = write_report(paths, out)
        for run in runs:
            print(format_findings(run.findings, run=run.name))
        print(f"[rlcore] report: {out}")
