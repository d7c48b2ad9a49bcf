"""Keep freed CPU memory inside the process, so that large tensors do not page-fault on every allocation.

glibc's ``malloc`` serves every block above its mmap threshold (which it raises dynamically, to at most 32 MiB) with a
fresh ``mmap`` and returns it to the kernel on ``free``. A PPO update at legged_gym sizes allocates and frees dozens of
such blocks per mini-batch step (a ``[24576, 512]`` float activation, its ELU, their gradients: 50 MB each), and every
one of them arrives as untouched pages: the kernel faults in and zeroes 12,800 pages per block before the first write
(``torch.empty(24576, 512).fill_(1)`` takes ~23 ms on the 2-core reference machine, the fill alone ~2 ms). Raising
the mmap and trim thresholds makes ``malloc`` serve these blocks from its heap and keep them there when freed, so the
next step reuses pages that are already mapped. The values computed are unchanged; the cost is memory: the process
keeps its peak heap instead of shrinking after it, and (glibc 2.36, measured) a 64-byte aligned request does not fit
the hole of an equal block freed earlier, so a loop of same-sized blocks leaves a few such holes before they coalesce
and the heap stops growing (measured: a bare PPO update at legged_gym sizes peaks at 1.09 GB resident instead of
0.98 GB; glibc's own dynamic threshold does the same below 32 MiB).

This is a process-wide ``mallopt`` setting, applied once (by :class:`rlcore.runners.OnPolicyRunner` when
``runner.keep_cpu_memory`` is true, the default). On other C libraries (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
DEFAULT_LIMIT = 1 << 30
"""Blocks up to this size come from the heap, and up to this much free memory stays at the heap's top (1 GiB)."""
GLIBC_MAX_MMAP_THRESHOLD = 32 << 20  # older glibc refuses thresholds above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit)

_applied: int | None = None


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (the only one whose mallopt this tunes), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_cpu_memory(limit_bytes: int = DEFAULT_LIMIT) -> int:
    """Serve CPU blocks up to ``limit_bytes`` from the heap and keep freed memory there (see the module docstring).

    Returns the mmap threshold now in force in bytes (``limit_bytes``, or 32 MiB where an older glibc refuses more),
    or 0 where nothing was changed (not glibc). Idempotent: later calls return the first call's result.
    """
    global _applied
    if _applied is not None:
        return _applied
    libc = _glibc()
    applied = 0
    if libc is not None:
        limit = int(min(limit_bytes, 2**31 - 1))
        for threshold in (limit, min(limit, GLIBC_MAX_MMAP_THRESHOLD)):
            if libc.mallopt(M_MMAP_THRESHOLD, threshold) == 1:
                applied = threshold
                break
        if applied:
            libc.mallopt(M_TRIM_THRESHOLD, max(applied, limit))
    _applied = applied
    return applied


def kept_cpu_memory() -> int:
    """The mmap threshold :func:`keep_freed_cpu_memory` set in this process (0: not set, or not glibc)."""
    return _applied or 0
