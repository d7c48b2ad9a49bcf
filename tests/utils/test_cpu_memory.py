"""``rlcore.utils.cpu_memory``: freed large CPU blocks stay mapped, so re-allocating them costs no page faults; the
runner applies it by ``runner.keep_cpu_memory``. The setting is process-wide, so each case runs in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
glibc_only = pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                                reason="mallopt tuning is glibc's")

FAULTS = """
import json, resource, sys, torch
from rlcore.utils import cpu_memory
applied = cpu_memory.keep_freed_cpu_memory() if sys.argv[1] == "keep" else 0
again = cpu_memory.keep_freed_cpu_memory() if sys.argv[1] == "keep" else 0
# 64 MiB blocks, above glibc's largest dynamic mmap threshold. Kept, the first few leave holes that the next
# (64-byte aligned, so a little larger) request does not fit (glibc 2.36), until they coalesce: warm up first.
for _ in range(20):
    x = torch.empty(16 << 20).fill_(1.0)
    del x
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    x = torch.empty(16 << 20).fill_(1.0)
    del x
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start  # no new pages: the heap stopped growing
print(json.dumps({"applied": applied, "again": again, "kept": cpu_memory.kept_cpu_memory(), "faults": faults}))
"""

RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[2])
from runner_helpers import base_cfg, make_env
from rlcore.runners import OnPolicyRunner
from rlcore.utils import cpu_memory
cfg = base_cfg()
if sys.argv[1] != "default":
    cfg["keep_cpu_memory"] = sys.argv[1] == "true"
OnPolicyRunner(make_env(seed=0), cfg, None)
print(json.dumps({"kept": cpu_memory.kept_cpu_memory()}))
"""


def _run(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc_only
def test_kept_memory_reuses_mapped_pages():
    plain, kept = _run(FAULTS, "plain"), _run(FAULTS, "keep")
    assert plain["kept"] == 0
    assert kept["applied"] == kept["again"] == kept["kept"] == 1 << 30  # 1 GiB threshold, idempotent
    # Plainly, each 64 MiB block is a fresh mmap: at least one fault per page (16,384 of 4 KiB), or per 2 MiB page
    # where transparent huge pages are always on. Kept, the blocks come back from the heap already mapped.
    assert plain["faults"] >= 5 * 32, plain
    assert kept["faults"] < 50, kept


@glibc_only
@pytest.mark.parametrize(("setting", "expected"), [("default", 1 << 30), ("true", 1 << 30), ("false", 0)])
def test_the_runner_applies_runner_keep_cpu_memory(setting, expected):
    assert _run(RUNNER, setting, str(ROOT / "tests" / "runners"))["kept"] == expected
