"""Piecewise-linear schedules over a counter: ``[[at, value], ...]`` config lists read as one curve.

Used by the exploration schedule (``std_max_schedule``, over learning iterations) and by tasks (reward weights over env steps). A schedule
has no value before its first point (the caller keeps its unscheduled setting there), is linear between points and
holds the last value after the last point, so ``[[300, 0.15]]`` means "0.15 from 300 on".
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from rlcore.errors import ConfigError


def check_schedule(points: Sequence[Sequence[float]] | None, name: str, unit: str = "iteration",
                   positive: bool = True) -> list[tuple[int, float]]:
    """``[[at, value], ...]`` as a list of ``(int, float)`` pairs, ``at`` (a count of ``unit``) strictly increasing
    (``positive``: every value > 0); a ConfigError names what is wrong. None or empty: ``[]`` (no schedule)."""
    if not points:
        return []
    try:
        pairs = [(int(at), float(v)) for at, v in points]
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a list of [{unit}, value] pairs, got {points!r}.") from None
    steps = [at for at, _ in pairs]
    if steps != sorted(set(steps)) or (positive and any(v <= 0 for _, v in pairs)):
        raise ConfigError(f"{name}: {unit}s must increase{' and values be positive' if positive else ''}, "
                          f"got {points!r}.")
    return pairs


def piecewise_linear(points: Sequence[tuple[int, float]], at: int) -> float | None:
    """The schedule's value at ``at``: None before the first point, linear between points, the last value after
    the last."""
    if at < points[0][0]:
        return None
    for (i0, v0), (i1, v1) in pairwise(points):
        if at < i1:
            return v0 + (v1 - v0) * (at - i0) / (i1 - i0)
    return points[-1][1]
