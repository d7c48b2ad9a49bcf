"""torch.distributed helpers: who am I, and collective ops that are no-ops in a single process."""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    """True when a process group is initialised with more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def multi_gpu_cfg_from_env() -> dict | None:
    """The ``multi_gpu`` runner config from torchrun's environment (``None`` when not launched by torchrun)."""
    ws = int(os.environ.get("WORLD_SIZE", "1"))
    if ws <= 1:
        return None
    return {
        "global_rank": int(os.environ.get("RANK", "0")),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "world_size": ws,
    }


def broadcast_tensors(tensors: Iterable[torch.Tensor], src: int = 0) -> None:
    """Overwrite every tensor with rank ``src``'s copy (parameters and buffers at start-up and after resume)."""
    if not is_distributed():
        return
    for t in tensors:
        dist.broadcast(t.data, src=src)


def all_reduce_mean_grads(params: Iterable[torch.nn.Parameter], bucket_mb: float = 25.0) -> None:
    """Average gradients over ranks in flat buckets of at most ``bucket_mb`` MiB (one all-reduce per bucket)."""
    if not is_distributed():
        return
    ws = world_size()
    grads = [p.grad for p in params if p.grad is not None]
    limit = max(1, int(bucket_mb * 1024 * 1024))
    bucket: list[torch.Tensor] = []
    size = 0
    for g in grads + [None]:  # type: ignore[list-item]
        if g is not None and (size + g.numel() * g.element_size() <= limit or not bucket):
            bucket.append(g)
            size += g.numel() * g.element_size()
            continue
        if bucket:
            flat = torch.cat([b.reshape(-1) for b in bucket])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            flat.div_(ws)
            offset = 0
            for b in bucket:
                n = b.numel()
                b.copy_(flat[offset:offset + n].view_as(b))
                offset += n
        bucket, size = ([g], g.numel() * g.element_size()) if g is not None else ([], 0)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In-place sum over ranks (no-op in a single process); returns ``t``."""
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t
