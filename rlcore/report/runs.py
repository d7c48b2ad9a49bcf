"""The runs a report reads: run directories (and sweeps of them) found on disk, their curves and configs,
groups of seeds of one config, and a group's mean curve with its min-max band."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from dataclasses import dataclass, field

import yaml

from rlcore.errors import MissingPathError
from rlcore.report.diagnosis import Finding, diagnose, load_scalars

#: Config keys that do not make two runs different experiments (a group of seeds shares everything else).
GROUP_IGNORED = ("seed", "runner.seed", "runner.run_name", "device", "threads", "resume")


@dataclass
class Run:
    """One run directory: its curves, config and findings."""

    path: str
    scalars: dict[str, list[tuple[int, float]]]
    config: dict
    findings: list[Finding] = field(default_factory=list)
    name: str = ""


# ============================================================================ finding and loading runs
def _has_events(path: str) -> bool:
    return os.path.isdir(path) and any("tfevents" in f for f in os.listdir(path))


def _natural(path: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path)]


def find_runs(paths: list[str]) -> list[str]:
    """The run directories named by ``paths``: a directory with event files, or the subdirectories (two levels
    deep) of one without, such as a Hydra sweep directory.

    Raises:
        MissingPathError: a path does not exist (a user error).
        ConfigError: a directory holds no event files, nor do its subdirectories.
    """
    runs = []
    for path in paths:
        if not os.path.isdir(path):
            raise MissingPathError(f"run directory not found: {path}")
        if _has_events(path):
            runs.append(path)
            continue
        found, top = [], os.path.normpath(path).count(os.sep)
        for root, dirs, _ in os.walk(path):
            if os.path.normpath(root).count(os.sep) - top >= 2:
                dirs.clear()  # two levels deep at most
            if _has_events(root):
                found.append(root)
        if not found:
            load_scalars(path)  # raises the one-line "no TensorBoard event files" error
        runs += sorted(found, key=_natural)
    return runs


def read_config(run_dir: str) -> dict:
    """The run's resolved ``config.yaml`` (or Hydra's ``.hydra/config.yaml``); {} when it has none."""
    for name in ("config.yaml", os.path.join(".hydra", "config.yaml")):
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
            return data if isinstance(data, dict) else {}
    return {}


def load_run(run_dir: str) -> Run:
    """Curves, config and diagnosis of one run directory (``runner.max_iterations`` is the planned length)."""
    scalars = load_scalars(run_dir)
    config = read_config(run_dir)
    planned = (config.get("runner") or {}).get("max_iterations") if isinstance(config.get("runner"), dict) else None
    run = Run(run_dir, scalars, config)
    run.findings = diagnose(scalars, config, expected_iterations=planned if isinstance(planned, int) else None)
    return run


def name_runs(runs: list[Run]) -> None:
    paths = [os.path.abspath(r.path) for r in runs]
    common = os.path.commonpath(paths) if len(paths) > 1 else os.path.dirname(paths[0])
    for run, path in zip(runs, paths):
        run.name = os.path.relpath(path, common) if path != common else os.path.basename(path)


# ============================================================================ configs and groups
def flatten(cfg: object, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}`` (lists and scalars as compact JSON)."""
    if isinstance(cfg, dict):
        out: dict[str, str] = {}
        for key, value in cfg.items():
            out.update(flatten(value, f"{prefix}{key}."))
        if not cfg and prefix:
            out[prefix[:-1]] = "{}"
        return out
    return {prefix[:-1]: json.dumps(cfg, default=str)}


def config_differences(runs: list[Run]) -> list[tuple[str, list[str]]]:
    """``[(key, [value in each run])]`` for the keys whose values differ ("-" where a run lacks the key)."""
    flat = [flatten(r.config) for r in runs]
    keys = sorted(set().union(*flat))
    rows = [(k, [f.get(k, "-") for f in flat]) for k in keys]
    return [(k, vals) for k, vals in rows if len(set(vals)) > 1]


def group_runs(runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """Runs whose configs agree except ``GROUP_IGNORED`` keys form one group (seeds); ``[(label, runs)]``.

    Labels name the config values that tell groups apart, or the run for a group of one without a config.
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        flat = {k: v for k, v in flatten(run.config).items() if k not in GROUP_IGNORED}
        key = json.dumps(flat, sort_keys=True) if run.config else f"run:{run.path}"
        groups.setdefault(key, []).append(run)
    members = list(groups.values())
    flats = [{k: v for k, v in flatten(g[0].config).items() if k not in GROUP_IGNORED} for g in members]
    keys = sorted(set().union(*flats)) if flats else []
    telling = [k for k in keys if len({f.get(k, "-") for f in flats}) > 1]
    out = []
    for group, flat in zip(members, flats):
        parts = [f"{k}={flat.get(k, 'unset')}" for k in telling[:3]] + (["..."] if len(telling) > 3 else [])
        label = ", ".join(parts) if parts and group[0].config else group[0].name
        if len(group) > 1:
            seeds = [str(r.config.get("seed", "?")) for r in group]
            runs_txt = f"{len(group)} runs, seeds {', '.join(seeds)}"
            label = f"{label} ({runs_txt})" if parts else runs_txt
        elif not parts or not group[0].config:
            label = group[0].name
        out.append((label, group))
    return out


# ============================================================================ curves
def aggregate(curves: list[list[tuple[int, float]]]) -> tuple[list[int], list[float], list[float], list[float]]:
    """Mean, min and max over ``curves`` at every iteration any of them logged (finite values only)."""
    maps = [dict(c) for c in curves]
    steps = sorted(set().union(*maps))
    mean, lo, hi = [], [], []
    keep = []
    for s in steps:
        vals = [m[s] for m in maps if s in m and math.isfinite(m[s])]
        if vals:
            keep.append(s)
            mean.append(statistics.fmean(vals))
            lo.append(min(vals))
            hi.append(max(vals))
    return keep, mean, lo, hi
