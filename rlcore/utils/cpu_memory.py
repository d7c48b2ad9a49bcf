"""Keep freed CPU memory inside the process while training, so that large tensors do not page-fault on every allocation.

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

``mallopt`` is process-wide, so the setting is a reference-counted *hold*: :func:`hold_freed_cpu_memory` returns a
:class:`CpuMemoryHold` (also a context manager); the first hold raises the thresholds, and when the last one is
released the heap's free memory goes back to the kernel (``malloc_trim(0)``) and the thresholds return to
:data:`RELEASED_MMAP_THRESHOLD` / :data:`RELEASED_TRIM_THRESHOLD`::

    with hold_freed_cpu_memory():      # or: hold = hold_freed_cpu_memory(); ...; hold.release()
        train()

glibc offers no way back to its *dynamic* threshold once ``mallopt`` set one, so "released" means the fixed
thresholds where glibc's dynamic one ends up after a process has freed a block of 32 MiB or more: blocks above 32 MiB
are mapped and unmapped per allocation, and at most 64 MiB of free memory stays at the heap's top. Measured (glibc
2.36, torch imported, ``tests/utils/test_cpu_memory.py``): a 300 MB numpy array allocated and freed after a hold was
released leaves nothing resident (+0 MB, as in a process that never held; +300 MB while held), nor does a loop of
100-400 MB arrays; a loop of 8 and 4 MB tensors takes 4,096-6,145 page faults (never held: 6,144-7,168; glibc's
fixed 128 KiB default would take 61,481, the slowdown this module exists to avoid).

:class:`rlcore.runners.OnPolicyRunner` holds it while it trains when ``runner.keep_cpu_memory`` is true (the
default). On other C libraries (macOS, musl) nothing is changed and a hold only counts.
"""

from __future__ import annotations

import ctypes
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
DEFAULT_LIMIT = 1 << 30
"""Blocks up to this size come from the heap, and up to this much free memory stays at the heap's top (1 GiB)."""
GLIBC_MAX_MMAP_THRESHOLD = 32 << 20  # older glibc refuses thresholds above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit)
RELEASED_MMAP_THRESHOLD = 32 << 20
"""mmap threshold once the last hold is released: glibc's dynamic threshold at its ceiling (32 MiB on 64-bit)."""
RELEASED_TRIM_THRESHOLD = 64 << 20
"""Trim threshold once the last hold is released: twice the mmap threshold, as glibc's dynamic rule sets it."""

_lock = threading.RLock()
_holds = 0  # holds not yet released (the permanent one of keep_freed_cpu_memory included)
_applied = 0  # the mmap threshold the first hold set (0: none in force, or not glibc)
_permanent: CpuMemoryHold | None = None  # keep_freed_cpu_memory's hold, never released


def _glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc (the only one whose mallopt this tunes), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only
        libc.mallopt  # noqa: B018
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def _apply(limit_bytes: int) -> int:
    """Raise the thresholds; the mmap threshold now in force (0: not glibc, or refused)."""
    libc = _glibc()
    if libc is None:
        return 0
    limit = int(min(limit_bytes, 2**31 - 1))
    for threshold in (limit, min(limit, GLIBC_MAX_MMAP_THRESHOLD)):
        if libc.mallopt(M_MMAP_THRESHOLD, threshold) == 1:
            libc.mallopt(M_TRIM_THRESHOLD, max(threshold, limit))
            return threshold
    return 0


def _restore() -> None:
    """Give the heap's free memory back and set the released thresholds (see the module docstring)."""
    libc = _glibc()
    if libc is None:
        return
    libc.mallopt(M_MMAP_THRESHOLD, RELEASED_MMAP_THRESHOLD)
    libc.mallopt(M_TRIM_THRESHOLD, RELEASED_TRIM_THRESHOLD)
    libc.malloc_trim(0)


class CpuMemoryHold:
    """One hold on kept CPU memory (from :func:`hold_freed_cpu_memory`); :meth:`release` ends it (idempotent).

    Also a context manager: ``with hold_freed_cpu_memory(): ...`` releases on exit.

    Attributes:
        threshold: the mmap threshold in force while this hold is active, in bytes (0: not glibc).
    """

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._active = True

    @property
    def active(self) -> bool:
        """Whether this hold has not been released yet."""
        return self._active

    def release(self) -> None:
        """End this hold; the last one to end restores the allocator (see the module docstring). Idempotent."""
        global _holds, _applied
        with _lock:
            if not self._active:
                return
            self._active = False
            _holds -= 1
            if _holds == 0:
                if _applied:
                    _restore()
                _applied = 0

    def __enter__(self) -> CpuMemoryHold:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"CpuMemoryHold(threshold={self.threshold}, active={self._active})"


def hold_freed_cpu_memory(limit_bytes: int = DEFAULT_LIMIT) -> CpuMemoryHold:
    """Serve CPU blocks up to ``limit_bytes`` from the heap and keep freed memory there until the hold is released.

    Reference-counted: the first active hold sets the thresholds (``limit_bytes``, or 32 MiB where an older glibc
    refuses more); a later one while it is active keeps them as they are (its ``limit_bytes`` is not applied); the
    last :meth:`CpuMemoryHold.release` restores the allocator. Thread-safe.
    """
    global _holds, _applied
    with _lock:
        if _holds == 0:
            _applied = _apply(limit_bytes)
        _holds += 1
        return CpuMemoryHold(_applied)


def keep_freed_cpu_memory(limit_bytes: int = DEFAULT_LIMIT) -> int:
    """The former API: a hold for the rest of the process (never released). Prefer :func:`hold_freed_cpu_memory`.

    Returns the mmap threshold in force in bytes (0: not glibc). Idempotent: later calls add no hold.
    """
    global _permanent
    with _lock:
        if _permanent is None:
            _permanent = hold_freed_cpu_memory(limit_bytes)
        return _permanent.threshold


def kept_cpu_memory() -> int:
    """The mmap threshold that the active holds keep in force, in bytes (0: no active hold, or not glibc)."""
    return _applied if _holds > 0 else 0


def active_holds() -> int:
    """How many holds are active (:func:`keep_freed_cpu_memory`'s permanent one included)."""
    return _holds
