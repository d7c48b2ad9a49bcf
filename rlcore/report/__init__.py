"""``python -m rlcore.report run=<dir> [run=<dir> ...] [out=FILE]``: one self-contained HTML page per training.

The page shows every scalar the runs logged (read from their TensorBoard event files), several runs overlaid
(runs whose configs differ only in the seed are one group: its mean with a min-max band), the config keys
whose values differ between the runs, and the automatic diagnosis of :mod:`rlcore.report.diagnosis` with the
iteration of each finding marked on its curve. Charts are inline SVG drawn here and a few lines of inline
JavaScript show the values under the mouse: the page loads nothing from the network.

Where it goes: one run directory (or a sweep directory, whose job subdirectories are the runs) ->
``<dir>/report.html``; several directories -> ``<first run>/report_compare.html``; ``out=FILE`` anywhere.

Modules: :mod:`~rlcore.report.runs` (run directories, curves, configs, seed groups), :mod:`~rlcore.report.diagnosis`
(what the curves say; the runner prints it after training), :mod:`~rlcore.report.page` (the HTML) and
:mod:`~rlcore.report.cli` (the command line). Names are imported on first use, so that the runner's import of the
diagnosis does not load the page or the command line.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Finding": "diagnosis",
    "diagnose": "diagnosis",
    "Run": "runs",
    "find_runs": "runs",
    "load_run": "runs",
    "build_html": "page",
    "main": "cli",
    "write_report": "cli",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"rlcore.report.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'rlcore.report' has no attribute '{name}'")
