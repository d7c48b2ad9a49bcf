"""``bench/learner.py --tiny``: the last line's format, its ratios against the table, and the profile's table.

Each run starts fresh interpreters (one per case and library), so the tests use one thread and the tiny sizes.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the bench script in subprocesses

pytest.importorskip("rsl_rl")

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^learner: mlp_ratio=(\S+) mlp_1024_ratio=(\S+) rnn_ratio=(\S+) mlp_floor_ratio=(\S+) "
                  r"rnn_floor_ratio=(\S+)$")
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def run_bench(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "learner.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def table_row(stdout: str, case: str, label: str) -> list[str]:
    """The cells of the table row ``case label ...`` (rsl_rl's label carries its version)."""
    for line in stdout.splitlines():
        rest = line[len(case):].strip()
        if not (line.startswith(case + " ") and rest.startswith(label + " ")):
            continue
        cells = rest[len(label):].split()
        cells = cells[1:] if re.fullmatch(r"\d+\.\d+\.\S+", cells[0]) else cells  # drop rsl_rl's version
        if re.fullmatch(r"-|[\d.]+", cells[0]):  # a longer label ("rlcore / floor") is another row
            return cells
    raise AssertionError(f"no row '{case} {label}' in:\n{stdout}")


def test_tiny_run_prints_ratios_of_the_table_and_nan_for_a_case_not_run():
    """With ``--allocator-variants``: rlcore with ``runner.keep_cpu_memory=false`` and the floor with it on, and their
    ratio rows computed from their own table rows."""
    out = run_bench("--tiny", "--threads", "1", "--cases", "mlp,rnn", "--allocator-variants").stdout
    match = LAST.match(out.strip().splitlines()[-1])
    assert match, out.strip().splitlines()[-1]
    mlp, mlp_1024, rnn, floor, rnn_floor = (float(x) for x in match.groups())
    assert math.isnan(mlp_1024)  # not run
    for value in (mlp, rnn, floor, rnn_floor):
        assert math.isfinite(value) and value > 0
    # Columns: collection, returns, update, total, cpu, samples/s (the floor has '-' for the first two).
    for case, value in (("mlp", mlp), ("rnn", rnn)):
        ours, theirs = table_row(out, case, "rlcore"), table_row(out, case, "rsl_rl")
        assert value == pytest.approx(float(ours[3]) / float(theirs[3]), rel=0.02, abs=2e-3)
        assert float(ours[3]) >= float(ours[2]) > 0  # the update is part of the iteration
    for case, value in (("mlp", floor), ("rnn", rnn_floor)):
        floor_row = table_row(out, case, "floor")
        assert floor_row[:2] == ["-", "-"]
        assert value == pytest.approx(float(table_row(out, case, "rlcore")[2]) / float(floor_row[2]), rel=0.02,
                                      abs=2e-3)
        kept = table_row(out, case, "floor memory kept")  # the allocator variants
        assert kept[:2] == ["-", "-"]
        assert float(table_row(out, case, "rlcore / floor kept")[0]) == pytest.approx(
            float(table_row(out, case, "rlcore")[2]) / float(kept[2]), rel=0.02, abs=2e-3)
        plain, theirs = table_row(out, case, "rlcore heap returned"), table_row(out, case, "rsl_rl")
        assert float(table_row(out, case, "rlcore heap ret./rsl")[3]) == pytest.approx(
            float(plain[3]) / float(theirs[3]), rel=0.02, abs=2e-3)


@pytest.mark.parametrize("library", ["rlcore", "floor"])
def test_profile_prints_the_top_entries_by_self_cpu_time(library):
    out = run_bench("--tiny", "--threads", "1", "--profile", "mlp", "--profile-library", library).stdout
    assert f"profile of one {library} update, case mlp" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if "Self CPU %" in line)
    rows = []
    for line in lines[header + 2:]:
        if line.startswith("---"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        number, unit = re.fullmatch(r"([\d.]+)(s|ms|us|ns)", cells[2]).groups()
        rows.append((cells[0], float(number) * UNITS[unit]))
    assert 10 <= len(rows) <= 25
    times = [t for _, t in rows]
    assert times == sorted(times, reverse=True)  # sorted by self CPU time
    assert any(name in ("aten::addmm", "aten::mm") for name, _ in rows)  # the MLP layers are in there
