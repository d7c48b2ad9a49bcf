"""Running normalisers for observations and rewards."""

from __future__ import annotations

import torch
import torch.nn as nn

from rlcore.distributed import is_distributed, pooled_moments


class EmpiricalNormalization(nn.Module):
    """Normalise inputs by a running mean and variance over everything seen so far.

    Statistics are over the batch dimension (all environments pooled), merged exactly with the
    parallel (Chan et al.) update, so the result equals the mean/variance of the concatenated stream.
    ``forward`` is pure (export-safe); ``update`` changes the statistics and is called by the
    algorithm between optimisation phases, never inside them.

    Args:
        shape: feature shape (without the batch axis).
        eps: added to the std in the denominator.
        until: stop updating once this many samples were seen (None: never stop).
    """

    def __init__(self, shape: int | tuple[int, ...] | list[int], eps: float = 1e-2, until: int | None = None) -> None:
        super().__init__()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.until = until
        self.register_buffer("_mean", torch.zeros(shape).unsqueeze(0))
        self.register_buffer("_var", torch.ones(shape).unsqueeze(0))
        self.register_buffer("_std", torch.ones(shape).unsqueeze(0))
        self.register_buffer("count", torch.tensor(0, dtype=torch.long))

    @property
    def mean(self) -> torch.Tensor:
        return self._mean.squeeze(0).clone()

    @property
    def var(self) -> torch.Tensor:
        return self._var.squeeze(0).clone()

    @property
    def std(self) -> torch.Tensor:
        return self._std.squeeze(0).clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., *shape] -> [..., *shape]``: ``(x - mean) / (std + eps)``."""
        return (x - self._mean) / (self._std + self.eps)

    @torch.jit.export
    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Undo ``forward``: ``y * (std + eps) + mean``."""
        return y * (self._std + self.eps) + self._mean

    @torch.jit.unused
    @torch.no_grad()
    def update(self, x: torch.Tensor, sync: bool = False) -> None:
        """Merge the statistics of a batch ``[B, *shape]`` (any leading dims are flattened into B).

        With ``sync=True`` in a distributed run, the batch statistics are pooled over all ranks first
        (:func:`~rlcore.distributed.pooled_moments`: each rank's count, mean and squared deviations
        around its own mean, merged in float64 around the global mean), so every rank's normaliser stays
        identical and equals what the concatenated data of all ranks would give.
        """
        if not self.training:
            return
        if self.until is not None and int(self.count) >= self.until:
            return
        x = x.reshape(-1, *self._mean.shape[1:])
        if sync and is_distributed():
            batch_mean, batch_var, n = pooled_moments(x)  # float64, identical on every rank
            if n == 0:  # every rank's batch was empty
                return
            self.merge(batch_mean.unsqueeze(0).to(self._mean.dtype), batch_var.unsqueeze(0).to(self._var.dtype), n)
            return
        if x.shape[0] == 0:
            return
        x = x.to(self._mean.dtype)
        self.merge(x.mean(dim=0, keepdim=True), x.var(dim=0, unbiased=False, keepdim=True), x.shape[0])

    @torch.jit.unused
    @torch.no_grad()
    def merge(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, n: int | torch.Tensor) -> None:
        """Merge externally computed statistics of ``n`` samples (used to combine ranks)."""
        n = int(n)
        total = int(self.count) + n
        w = n / total
        delta = batch_mean - self._mean
        self._mean.add_(w * delta)
        self._var.copy_(self._var * (1.0 - w) + batch_var * w + delta.square() * w * (1.0 - w))
        self._std.copy_(self._var.sqrt())
        self.count.fill_(total)


class EmpiricalDiscountedVariationNormalization(nn.Module):
    """Reward scaling by the standard deviation of the discounted return.

    Keeps a running discounted return ``R_t = gamma * R_{t-1} * (1 - done) + r_t`` per environment and
    divides rewards by the running std of ``R`` (not centred: the reward's sign is kept), the
    reward-scaling scheme of Engstrom et al. (2020).

    Args:
        shape: reward shape without batch axis (``[]`` or ``[1]``).
        eps: added to the std.
        gamma: discount of the return whose variation is tracked.
        until: stop updating after this many samples.
    """

    def __init__(self, shape: int | tuple[int, ...] | list[int] = (), eps: float = 1e-2, gamma: float = 0.99,
                 until: int | None = None) -> None:
        super().__init__()
        self.emp_norm = EmpiricalNormalization(shape, eps=eps, until=until)
        self.gamma = gamma
        self.register_buffer("disc_return", torch.zeros(0))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The running return is sized by the number of envs on first use (and may have been created
        # under inference mode): take the checkpoint's tensor as it is.
        key = prefix + "disc_return"
        if key in state_dict:
            self.disc_return = state_dict[key].detach().clone().to(self.emp_norm._mean.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, rew: torch.Tensor, dones: torch.Tensor | None = None, sync: bool = False) -> torch.Tensor:
        """Scale rewards ``[N]`` (updating the running return while training).

        With ``sync=True`` in a distributed run the return statistics are pooled over all ranks at every call
        (one small collective per env step), so every rank divides by the same std: that of all ranks'
        returns together. The running return itself stays per env, hence per rank.
        """
        if self.training:
            with torch.no_grad():
                if self.disc_return.shape != rew.shape:
                    self.disc_return = torch.zeros_like(rew)
                self.disc_return.mul_(self.gamma).add_(rew)
                self.emp_norm.update(self.disc_return, sync=sync)
                if dones is not None:
                    self.disc_return.mul_(~dones.bool().reshape(rew.shape))
        return rew / (self.emp_norm._std + self.emp_norm.eps)
