"""Training statistics: episode returns/lengths, env logs, losses -> console (rich), TensorBoard, wandb."""

from __future__ import annotations

import math
import os
import time

import torch

LOGGER_TYPES = ("tensorboard", "wandb", "none")


class EpisodeStats:
    """Accumulates per-env episode returns and lengths on the device without per-step host syncs.

    Each step adds rewards; finished episodes (``dones``) are summed into totals that are read once per
    iteration, so the rollout loop never waits on the host.
    """

    def __init__(self, num_envs: int, device: str | torch.device) -> None:
        self.cur_return = torch.zeros(num_envs, device=device)
        self.cur_length = torch.zeros(num_envs, device=device)
        self.done_return = torch.zeros((), device=device)
        self.done_length = torch.zeros((), device=device)
        self.done_count = torch.zeros((), device=device)
        self.log_sums: dict[str, torch.Tensor] = {}
        self.log_counts: dict[str, torch.Tensor] = {}  # steps whose value was finite (NaN = nothing to report)
        self.last = {"return": math.nan, "length": math.nan}

    def step(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        done = dones.reshape(-1).float()
        self.cur_return += rewards.reshape(-1)
        self.cur_length += 1.0
        self.done_return += (self.cur_return * done).sum()
        self.done_length += (self.cur_length * done).sum()
        self.done_count += done.sum()
        self.cur_return *= 1.0 - done
        self.cur_length *= 1.0 - done
        logs = extras.get("log", extras.get("episode"))
        if logs:
            for key, value in logs.items():
                v = value.float().mean() if isinstance(value, torch.Tensor) else torch.tensor(float(value))
                v = v.to(done.device)
                finite = torch.isfinite(v)
                key = key if key.startswith("/") else "/" + key
                self.log_sums[key] = self.log_sums.get(key, 0.0) + torch.where(finite, v, 0.0)
                self.log_counts[key] = self.log_counts.get(key, 0.0) + finite.float()

    def collect(self) -> dict[str, float]:
        """Means since the last call (episodes finished in that window); resets the window."""
        n = float(self.done_count.item())
        if n > 0:
            self.last = {"return": float(self.done_return.item()) / n, "length": float(self.done_length.item()) / n}
        out = {"Episode/mean_return": self.last["return"], "Episode/mean_length": self.last["length"],
               "Episode/finished": n}
        for key, total in self.log_sums.items():
            count = float(self.log_counts[key])
            out["Env" + key] = float(total) / count if count > 0 else math.nan  # NaN: not logged
        self.done_return.zero_()
        self.done_length.zero_()
        self.done_count.zero_()
        self.log_sums.clear()
        self.log_counts.clear()
        return out


class Writer:
    """Scalar writer: TensorBoard, wandb (honours WANDB_MODE, e.g. offline) or nothing."""

    def __init__(self, log_dir: str | None, logger_type: str = "tensorboard", project: str = "rlcore",
                 run_name: str | None = None, config: dict | None = None) -> None:
        if logger_type not in LOGGER_TYPES:
            raise ValueError(f"Unknown logger '{logger_type}'. Valid: {', '.join(LOGGER_TYPES)}.")
        self.logger_type = logger_type if log_dir is not None else "none"
        self._tb = None
        self._wandb = None
        if self.logger_type == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=log_dir, flush_secs=10)
        elif self.logger_type == "wandb":
            import wandb

            self._wandb = wandb.init(project=project, name=run_name, dir=log_dir, config=config or {},
                                     mode=os.environ.get("WANDB_MODE", "online"), reinit=True)

    def add_scalars(self, scalars: dict[str, float], step: int) -> None:
        finite = {k: v for k, v in scalars.items() if v is not None and math.isfinite(v)}
        if self._tb is not None:
            for k, v in finite.items():
                self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log(finite, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


class ConsoleReport:
    """One compact rich-formatted block per iteration."""

    def __init__(self, total_iterations: int, start_iteration: int = 0) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, soft_wrap=True)
        self.total = total_iterations
        self.start = start_iteration
        self.t0 = time.perf_counter()

    def print(self, it: int, steps: int, collect_s: float, learn_s: float, stats: dict, losses: dict) -> None:
        done = it - self.start + 1
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / done * (self.start + self.total - it - 1)
        fps = steps / max(collect_s + learn_s, 1e-9)
        loss_txt = "  ".join(f"{k} {v:.4g}" for k, v in losses.items())
        # The task's own metrics (extras["log"], e.g. tracking errors, terrain level); reward terms stay in the logs.
        env_txt = "  ".join(f"{k.removeprefix('Env/').removeprefix('metrics/')} {v:.4g}" for k, v in stats.items()
                            if k.startswith("Env/") and not k.startswith("Env/reward/") and math.isfinite(v))
        if env_txt:
            loss_txt += f"\n    {env_txt}"
        self.console.print(
            f"[bold]it {it + 1}/{self.start + self.total}[/bold]  {fps:,.0f} steps/s  "
            f"(collect {collect_s:.2f}s, learn {learn_s:.2f}s)  "
            f"return [cyan]{stats['Episode/mean_return']:.3f}[/cyan]  ep len {stats['Episode/mean_length']:.1f}  "
            f"ETA {_fmt_time(eta)}\n    {loss_txt}"
        )


def _fmt_time(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}"
