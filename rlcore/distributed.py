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


def reduce_gradients_in_buckets(params: Iterable[torch.nn.Parameter], world_size: int, bucket_mb: float) -> None:
    """rsl_rl's name for :func:`all_reduce_mean_grads`: average gradients over the ``world_size`` ranks.

    Raises:
        ValueError: ``world_size`` is not the size of the initialised process group (1 without one).
    """
    actual = dist.get_world_size() if is_distributed() else 1
    if int(world_size) != actual:
        raise ValueError(f"reduce_gradients_in_buckets: world_size={world_size}, but {actual} process(es) run.")
    all_reduce_mean_grads(params, bucket_mb)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In-place sum over ranks (no-op in a single process); returns ``t``."""
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    """In-place mean over ranks (no-op in a single process); returns ``t``."""
    if is_distributed():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t.div_(world_size())
    return t


def combine_moments(
    counts: torch.Tensor, means: torch.Tensor, m2s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Merge per-part statistics exactly (Chan et al.'s parallel formula), in float64.

    Part ``k`` holds ``counts[k]`` samples with mean ``means[k]`` and sum of squared deviations from its own
    mean ``m2s[k]`` (``[K, *shape]``). With ``n = sum n_k`` and ``mu = sum n_k mu_k / n``::

        M2 = sum_k M2_k + sum_k n_k (mu_k - mu)^2,        var = M2 / n   (population variance)

    Every term is a sum of non-negative squares around a mean, so nothing cancels (unlike
    ``E[x^2] - mu^2``, which loses all digits of a small spread around a large mean in float32).

    Args:
        counts: ``[K]`` sample counts.
        means, m2s: ``[K, *shape]``.

    Returns:
        ``(mean [*shape], var [*shape], n)`` in float64; mean and var are 0 when ``n == 0``.
    """
    counts, means, m2s = counts.double(), means.double(), m2s.double()
    n = int(counts.sum().item())
    if n == 0:
        return torch.zeros_like(means[0]), torch.zeros_like(means[0]), 0
    w = counts.reshape(-1, *([1] * (means.dim() - 1)))
    mean = (w * means).sum(0) / n
    m2 = m2s.sum(0) + (w * (means - mean).square()).sum(0)
    return mean, m2 / n, n


def pooled_moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mean and population variance of the samples ``x [B, *shape]`` of *all* ranks together, in float64.

    Each rank reduces its own batch to ``(n, mean, M2)`` around its own mean; one ``all_gather`` exchanges
    these and every rank merges them in rank order with :func:`combine_moments`, so all ranks get
    bit-identical statistics equal to those of the concatenated data. A rank may hold ``B = 0`` samples.
    In a single process this is simply the batch's own moments.

    Returns:
        ``(mean [*shape], var [*shape], n)``, mean and var float64 on ``x``'s device.
    """
    x = x.double()
    n_local = x.shape[0]
    mean = x.mean(0) if n_local > 0 else torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
    m2 = (x - mean).square().sum(0)
    if not is_distributed():
        return mean, (m2 / n_local if n_local > 0 else m2), n_local
    packed = torch.cat([torch.tensor([float(n_local)], dtype=x.dtype, device=x.device), mean.reshape(-1),
                        m2.reshape(-1)])
    parts = [torch.empty_like(packed) for _ in range(world_size())]
    dist.all_gather(parts, packed)
    gathered = torch.stack(parts)  # [K, 1 + 2 D]
    d = mean.numel()
    return combine_moments(gathered[:, 0], gathered[:, 1:1 + d].reshape(-1, *mean.shape),
                           gathered[:, 1 + d:].reshape(-1, *mean.shape))
