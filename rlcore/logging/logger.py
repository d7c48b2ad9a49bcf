"""Training statistics and logging: episode returns/lengths, env logs, losses -> console (rich), TensorBoard, wandb.

:class:`Logger` is the runner's ``logger`` attribute, with rsl_rl 5.x's interface (``writer``, ``log_dir``,
``save_model``, ``git_status_repos``, ...), so runner subclasses written for rsl_rl work unchanged.

The console prints one block per iteration (docs/cli.md#the-console): its first line leads with the task's headline
metric (``runner.headline_metric``: ``return``, the default, or a task metric such as Go2's ``lin_vel_error``), then
the full episodes' return and length and ``reward/step``, then speed and ETA; the next lines hold the losses and the
task's metrics (:func:`console_env_metrics`).

Scalars written every iteration (TensorBoard tags):

- ``Episode/mean_return``, ``Episode/mean_length``: mean return and length of the *full* episodes (started from a
  reset) that ended in the iteration; an iteration without one repeats the last values; none before the first.
  An env's first episode is a partial one (the runner starts envs at random points of their episodes,
  ``init_at_random_ep_len``): it is left out, so the curve does not show partial episodes growing into full ones
  as a falling return.
- ``Episode/finished``: full episodes that ended; ``Episode/finished_partial``: partial (first) ones that ended.
- ``Episode/mean_reward_per_step``: mean reward over every env and step of the rollout, meaningful from the first
  iteration (the console's ``reward/step``). It is the reward of the actions that drove the envs, exploration noise
  included: a PPO run's (std 1.0 at the start) is lower than a distillation run's (the student collects with std 0.1).
- ``Env/<key>``: the task's ``extras["log"]`` entries (mean over the steps where finite), the key without its
  leading "/" (``Env/metrics/lin_vel_error``; the console shows ``lin_vel_error``).
- ``Loss/<name>``, ``Loss/learning_rate``, ``Perf/steps_per_s``, ``Perf/collection_time``, ``Perf/learning_time``,
  ``Policy/mean_std``, ``Rnd/weight``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import re
import subprocess
import time
from collections import deque

import torch
from rich.console import Console

import rlcore
from rlcore.config.resolve import resolve_class
from rlcore.errors import ConfigError
from rlcore.logging.log_writer import LogWriter

LOGGER_TYPES = ("tensorboard", "wandb", "none")
"""The short forms of ``cfg["logger"]``; the long form is ``{"class_name": <LogWriter subclass>, **kwargs}``."""


class EpisodeStats:
    """Accumulates per-env episode returns and lengths on the device without per-step host syncs.

    Each step adds rewards; finished episodes (``dones``) are summed into totals that are read once per
    iteration, so the rollout loop never waits on the host.

    Full episodes only: an env's episode counts towards ``Episode/mean_return`` and ``Episode/mean_length`` only if
    it started from a reset that this object saw (``from_reset[env]``). A runner starts its envs at random points of
    their episodes (``init_at_random_ep_len``) and steps them before the first rollout (the normaliser warm-up), so
    the first episode of every env is a partial one: its return and length would read as a policy that gets worse
    while the episodes grow to their real length. Those partial episodes are counted (``Episode/finished_partial``)
    but not averaged in. ``Episode/mean_reward_per_step`` (the mean reward of every env and step of the window)
    needs no finished episode, so it means the same from the first iteration.

    Args:
        num_envs: environments stepped together.
        device: device of the accumulators.
        keep_episodes: also keep each finished episode's return and length (one host sync per window).
        started_from_reset: whether the envs' current episodes started from a reset (True: a fresh env stepped
            through this object from its first step; the :class:`Logger` passes False, see above).
    """

    def __init__(self, num_envs: int, device: str | torch.device, keep_episodes: bool = False,
                 started_from_reset: bool = True) -> None:
        self.num_envs = int(num_envs)
        self.keep_episodes = keep_episodes  # also keep each finished episode's return and length (one sync per window)
        self._steps: list[torch.Tensor] = []  # [4, N] per step: done, return, length, from reset (keep_episodes)
        self.finished_returns: list[float] = []  # episodes finished in the last collected window, in step/env order
        self.finished_lengths: list[float] = []
        self.finished_full: list[bool] = []  # whether each of them started from a reset (a full episode)
        self.cur_return = torch.zeros(num_envs, device=device)
        self.cur_length = torch.zeros(num_envs, device=device)
        self.from_reset = torch.full((num_envs,), bool(started_from_reset), dtype=torch.bool, device=device)
        self.done_return = torch.zeros((), device=device)  # full episodes of the window
        self.done_length = torch.zeros((), device=device)
        self.done_count = torch.zeros((), device=device)
        self.partial_count = torch.zeros((), device=device)  # episodes of the window that did not start from a reset
        self.reward_sum = torch.zeros((), device=device)  # every env and step of the window
        self.window_steps = 0
        self.log_sums: dict[str, torch.Tensor] = {}  # by the task's key without leading "/"
        self.log_counts: dict[str, torch.Tensor] = {}  # steps whose value was finite (NaN = nothing to report)
        self.last = {"return": math.nan, "length": math.nan}  # the last window's with full episodes (NaN: none yet)

    def step(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        done = dones.reshape(-1).float()
        rewards = rewards.reshape(-1).to(self.cur_return.dtype)
        full = done * self.from_reset
        self.cur_return += rewards
        self.cur_length += 1.0
        self.reward_sum += rewards.sum()
        self.window_steps += 1
        self.done_return += (self.cur_return * full).sum()
        self.done_length += (self.cur_length * full).sum()
        self.done_count += full.sum()
        self.partial_count += (done - full).sum()
        if self.keep_episodes:
            self._steps.append(torch.stack([done, self.cur_return, self.cur_length, self.from_reset.float()]))
        self.cur_return *= 1.0 - done
        self.cur_length *= 1.0 - done
        self.from_reset |= done > 0
        logs = extras.get("log", extras.get("episode"))
        if logs:
            for key, value in logs.items():
                v = value.float().mean() if isinstance(value, torch.Tensor) else torch.tensor(float(value))
                v = v.to(done.device)
                finite = torch.isfinite(v)
                name = metric_name(key)
                self.log_sums[name] = self.log_sums.get(name, 0.0) + torch.where(finite, v, 0.0)
                self.log_counts[name] = self.log_counts.get(name, 0.0) + finite.float()

    def collect(self) -> dict[str, float]:
        """Statistics of the window since the last call; resets the window.

        ``Episode/mean_return`` and ``Episode/mean_length``: means over the full episodes (started from a reset)
        that ended in the window; a window without any repeats the last such means (NaN before the first).
        ``Episode/finished``: how many full episodes ended; ``Episode/finished_partial``: how many episodes that did
        not start from a reset ended (left out of the means). ``Episode/mean_reward_per_step``: mean reward over
        every env and step of the window (NaN for an empty window). ``Env/<key>``: the mean of the task's
        ``extras["log"][key]`` over the steps where it was finite (NaN: never), ``<key>`` without a leading "/".
        """
        totals = (self.done_return, self.done_length, self.done_count, self.partial_count, self.reward_sum)
        ret, length, n, partial, rewards = torch.stack(totals).tolist()  # one host sync
        if n > 0:
            self.last = {"return": ret / n, "length": length / n}
        steps = self.window_steps * self.num_envs
        out = {"Episode/mean_return": self.last["return"], "Episode/mean_length": self.last["length"],
               "Episode/finished": n, "Episode/finished_partial": partial,
               "Episode/mean_reward_per_step": rewards / steps if steps else math.nan}
        for name, total in self.log_sums.items():
            count = float(self.log_counts[name])
            out["Env/" + name] = float(total) / count if count > 0 else math.nan  # NaN: not logged
        if self._steps:
            steps_kept = torch.stack(self._steps).cpu()  # [S, 4, N]
            finished = steps_kept[:, 0] > 0
            self.finished_returns = steps_kept[:, 1][finished].tolist()
            self.finished_lengths = steps_kept[:, 2][finished].tolist()
            self.finished_full = (steps_kept[:, 3][finished] > 0).tolist()
            self._steps.clear()
        else:
            self.finished_returns, self.finished_lengths, self.finished_full = [], [], []
        for total in totals:
            total.zero_()
        self.window_steps = 0
        self.log_sums.clear()
        self.log_counts.clear()
        return out

    def state_dict(self) -> dict:
        """Everything that decides the values collected from here on: the per-env running returns, lengths and
        started-from-reset flags, the open window's sums, the last means. Plain tensors (on the CPU), numbers,
        lists and dicts of them, so ``torch.load(weights_only=True)`` reads it."""
        def cpu(t):
            return torch.as_tensor(t).detach().to("cpu").clone()

        return {
            "num_envs": self.num_envs,
            "cur_return": cpu(self.cur_return),
            "cur_length": cpu(self.cur_length),
            "from_reset": cpu(self.from_reset),
            "window": {"done_return": cpu(self.done_return), "done_length": cpu(self.done_length),
                       "done_count": cpu(self.done_count), "partial_count": cpu(self.partial_count),
                       "reward_sum": cpu(self.reward_sum), "steps": int(self.window_steps),
                       "log_sums": {k: cpu(v) for k, v in self.log_sums.items()},
                       "log_counts": {k: cpu(v) for k, v in self.log_counts.items()},
                       "episode_steps": [cpu(t) for t in self._steps]},
            "last": {"return": float(self.last["return"]), "length": float(self.last["length"])},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s ``state``.

        Raises:
            ValueError: ``state`` was taken with another number of envs.
        """
        if int(state["num_envs"]) != self.num_envs:
            raise ValueError(f"episode statistics of {int(state['num_envs'])} envs cannot continue with "
                             f"{self.num_envs} envs.")
        device = self.cur_return.device

        def to(t, like):
            return torch.as_tensor(t).to(device=device, dtype=like.dtype).clone()

        self.cur_return = to(state["cur_return"], self.cur_return)
        self.cur_length = to(state["cur_length"], self.cur_length)
        self.from_reset = to(state["from_reset"], self.from_reset)
        window = state["window"]
        for name in ("done_return", "done_length", "done_count", "partial_count", "reward_sum"):
            setattr(self, name, to(window[name], getattr(self, name)))
        self.window_steps = int(window["steps"])
        self.log_sums = {k: torch.as_tensor(v).to(device).clone() for k, v in window["log_sums"].items()}
        self.log_counts = {k: torch.as_tensor(v).to(device).clone() for k, v in window["log_counts"].items()}
        self._steps = [torch.as_tensor(t).to(device).clone() for t in window["episode_steps"]] if self.keep_episodes \
            else []
        self.last = {"return": float(state["last"]["return"]), "length": float(state["last"]["length"])}


def metric_name(key: str) -> str:
    """A task's ``extras["log"]`` key as the logs name it: without leading "/" (``"/metrics/x"`` -> ``"metrics/x"``;
    written as ``Env/metrics/x``, shown as ``x``)."""
    return key.lstrip("/")


def find_log_key(keys, name: str) -> str | None:
    """The key of ``keys`` (``extras["log"]`` keys or their ``metric_name``) that metric ``name`` denotes, or None:
    the full name (``metrics/lin_vel_error``) or its last part (``lin_vel_error``), a last part ``<name>_now`` (a
    per-step value, meaningful from the first step) before ``<name>`` (a mean over finished episodes). The same rule
    serves ``runner.keep_best``, ``runner.stop_at`` and ``runner.headline_metric``."""
    stripped = {k: k.strip("/") for k in keys}
    for k, s in stripped.items():
        if s == name.strip("/"):
            return k
    for want in (name + "_now", name):
        for k, s in stripped.items():
            if s.rsplit("/", 1)[-1] == want:
                return k
    return None


#: A task's own episode means (classic tasks' ``episode_return_mean``, the Gymnasium adapter's ``episode_return``):
#: they average the partial first episodes too, so the console leaves them out beside its full-episode return.
_EPISODE_MEANS = re.compile(r"(^|/)episode_(return|length)(_mean)?$")


def console_env_metrics(stats: dict, leave_out: str | None = None) -> dict[str, float]:
    """``{shown name: value}`` of the task metrics (``Env/<key>``) the console lists: finite values, not reward terms
    (``reward/...``), not the task's own episode means (``episode_return_mean``, ...), not ``leave_out`` (the
    headline, shown on the first line). All of them are still written (``Env/<key>``)."""
    out = {}
    for key, value in stats.items():
        name = key.removeprefix("Env/")
        if (not key.startswith("Env/") or name.startswith("reward/") or _EPISODE_MEANS.search(name)
                or name == leave_out or not math.isfinite(value)):
            continue
        out[name.removeprefix("metrics/")] = value
    return out


def headline_text(stats: dict, metric: str) -> tuple[str | None, str | None]:
    """``(text, key)`` of the console's headline ``metric`` (``runner.headline_metric``): ``(None, None)`` for
    ``return`` (the episode text leads), ``("lin_vel_error_now 0.4213", "metrics/lin_vel_error_now")`` for a task
    metric (``n/a`` while it has no value), ``(None, None)`` when the task reports no such metric."""
    if metric == "return":
        return None, None
    key = find_log_key([k.removeprefix("Env/") for k in stats if k.startswith("Env/")], metric)
    if key is None:
        return None, None
    value = float(stats["Env/" + key])
    shown = f"{value:.4g}" if math.isfinite(value) else "n/a"
    return f"[bold]{key.removeprefix('metrics/')}[/bold] [cyan]{shown}[/cyan]", key


class Logger:
    """The runner's logging stack: episode bookkeeping, console report, scalar writer, code state, uploads.

    Args (rsl_rl 5.x's, in its order):
        log_dir: run directory; None writes nothing (no writer, no code state).
        cfg: the runner's train config (``logger``, ``wandb_project``, ``run_name``, ``num_steps_per_env``,
            ``log_interval`` are read).
        env_cfg: the environment's config, handed to ``LogWriter.store_config``.
        num_envs: environments per process.
        is_distributed, gpu_world_size, gpu_global_rank: only rank 0 logs (``disable_logs`` on the others).
        device: device of the per-env episode accumulators.

    Attributes read by runner subclasses: ``writer`` (a TensorBoard ``SummaryWriter``, a
    :class:`~rlcore.utils.LogWriter`, or None; created by :meth:`init_logging_writer` when training starts),
    ``logger_type`` (``"tensorboard"``, ``"wandb"``, ``"none"`` or the LogWriter class name, as rsl_rl <= 5.4
    had it), ``log_dir``, ``git_status_repos``, ``rewbuffer`` / ``lenbuffer`` (returns and lengths of the last
    100 finished episodes, as rsl_rl's: the partial first episodes included), ``cur_reward_sum`` /
    ``cur_episode_length`` (per env, running), ``tot_timesteps``, ``tot_time``, ``ep_extras``, ``disable_logs``.
    A resumed run continues them from :meth:`state_dict` / :meth:`load_state_dict`.
    """

    def __init__(
        self,
        log_dir: str | None,
        cfg: dict,
        env_cfg: dict | object,
        num_envs: int,
        is_distributed: bool,
        gpu_world_size: int,
        gpu_global_rank: int,
        device: str,
    ) -> None:
        self.log_dir = log_dir
        self.cfg = cfg
        self.env_cfg = env_cfg
        self.num_envs = int(num_envs)
        self.gpu_world_size = int(gpu_world_size)
        self.device = device
        self.disable_logs = bool(is_distributed) and int(gpu_global_rank) != 0
        self.git_status_repos: list[str] = [rlcore.__file__]
        self.logger_type = _logger_type(cfg.get("logger", "tensorboard"))
        self.writer = None
        self.tot_timesteps = 0
        self.tot_time = 0.0
        self.ep_extras: list[dict] = []
        self.rewbuffer: deque[float] = deque(maxlen=100)
        self.lenbuffer: deque[float] = deque(maxlen=100)
        # The runner spreads the envs over their episodes and warms its normalisers up before the first rollout:
        # no env's first episode seen here started from a reset.
        self.stats = EpisodeStats(self.num_envs, device, keep_episodes=True, started_from_reset=False)
        self.last_stats: dict[str, float] = {}
        """The episode/env statistics of the last logged iteration (``Episode/...``, ``Env/...``)."""
        self._report: ConsoleReport | None = None
        self._stopped = None  # the writer stop_logging_writer closed last

    @property
    def cur_reward_sum(self) -> torch.Tensor:
        """``[N]`` return so far of every env's running episode."""
        return self.stats.cur_return

    @property
    def cur_episode_length(self) -> torch.Tensor:
        """``[N]`` steps so far of every env's running episode."""
        return self.stats.cur_length

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict:
        """What decides the values logged from here on, for a checkpoint: the episode bookkeeping
        (:meth:`EpisodeStats.state_dict`: per-env running returns, lengths, started-from-reset flags, the open
        window), ``rewbuffer`` / ``lenbuffer``, ``tot_timesteps``, ``tot_time`` and ``last_stats``. Plain tensors,
        numbers, lists and dicts (``torch.load(weights_only=True)`` reads it). The writer, the console's clock and
        ``ep_extras`` (cleared every iteration) are not part of it."""
        return {
            "episode_stats": self.stats.state_dict(),
            "rewbuffer": [float(v) for v in self.rewbuffer],
            "lenbuffer": [float(v) for v in self.lenbuffer],
            "tot_timesteps": int(self.tot_timesteps),
            "tot_time": float(self.tot_time),
            "last_stats": {str(k): float(v) for k, v in self.last_stats.items()},
        }

    def load_state_dict(self, state: dict, episodes: bool = True) -> None:
        """Continue from :meth:`state_dict`'s ``state`` (a resumed run then logs what the uninterrupted one would).

        ``episodes=False``: the env was not restored and starts fresh episodes, so the per-env episode bookkeeping
        (running returns, lengths, started-from-reset flags, the open window) starts afresh too; the run's totals
        and the last episodes' means continue.

        Raises:
            ValueError: ``state`` was taken with another number of envs.
        """
        if episodes:
            self.stats.load_state_dict(state["episode_stats"])
        self.rewbuffer = deque((float(v) for v in state["rewbuffer"]), maxlen=self.rewbuffer.maxlen)
        self.lenbuffer = deque((float(v) for v in state["lenbuffer"]), maxlen=self.lenbuffer.maxlen)
        self.tot_timesteps = int(state["tot_timesteps"])
        self.tot_time = float(state["tot_time"])
        self.last_stats = {str(k): float(v) for k, v in state["last_stats"].items()}

    # ------------------------------------------------------------------ writer
    def init_logging_writer(self) -> None:
        """Create the writer named by ``cfg["logger"]`` and store the code state (rank 0 with a log_dir only).

        Called by the runner at the start of every ``learn``; as in rsl_rl each call opens a new writer (the
        previous one was stopped at the end of the previous ``learn``).

        Raises:
            ValueError: an unknown logger name (the message lists the valid ones).
        """
        if self.log_dir is None or self.disable_logs:
            return
        spec = self.cfg.get("logger", "tensorboard")
        spec = spec.lower() if isinstance(spec, str) else spec
        os.makedirs(self.log_dir, exist_ok=True)
        self.writer = None
        if isinstance(spec, dict) or (hasattr(spec, "items") and not isinstance(spec, str)):
            writer_class, kwargs = resolve_class(spec)
            if writer_class.__name__ == "WandbLogWriter":
                kwargs.setdefault("run_name", self.cfg.get("run_name") or None)
            self.writer = writer_class(log_dir=self.log_dir, **kwargs)
        elif spec == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter  # loads tensorboard (slow): only when chosen

            self.writer = SummaryWriter(log_dir=self.log_dir, flush_secs=10)
        elif spec == "wandb":
            from rlcore.logging.wandb_log_writer import WandbLogWriter  # imports this module: import on use

            self.writer = WandbLogWriter(self.log_dir, self.cfg.get("wandb_project", "rlcore"),
                                         run_name=self.cfg.get("run_name") or None, config=plain_config(self.cfg))
        elif spec not in (None, "none"):
            raise ConfigError(f"Unknown logger '{spec}'. Valid: {', '.join(LOGGER_TYPES)}, or "
                             "{'class_name': <a LogWriter subclass or its import path>, ...}.")
        files = self._store_code_state()
        if isinstance(self.writer, LogWriter):
            self.writer.store_config(self.env_cfg, plain_config(self.cfg))
            for path in files:
                self.writer.save_file(path)

    def stop_logging_writer(self) -> None:
        """Flush and close the writer (once; the object stays in ``writer`` as in rsl_rl)."""
        if self.writer is None or self.writer is self._stopped:
            return
        if isinstance(self.writer, LogWriter):
            self.writer.stop()
        else:
            self.writer.close()
        self._stopped = self.writer

    def save_model(self, path: str, it: int) -> None:
        """Hand the checkpoint just written to ``path`` to the writer (wandb uploads it; TensorBoard ignores it)."""
        if isinstance(self.writer, LogWriter) and self.writer is not self._stopped:
            self.writer.save_model(path, it)

    # ------------------------------------------------------------------ per step / per iteration
    def process_env_step(
        self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict, intrinsic_rewards: torch.Tensor | None = None
    ) -> None:
        """Book one env step: running returns and lengths, and the env's ``extras["log"]`` (or ``"episode"``).

        The logged return is the task's (extrinsic) one: ``intrinsic_rewards`` (RND) are accepted for rsl_rl's
        signature but not added to it (rsl_rl adds them to its mean reward).
        """
        if "episode" in extras:
            self.ep_extras.append(extras["episode"])
        elif "log" in extras:
            self.ep_extras.append(extras["log"])
        self.stats.step(rewards, dones, extras)

    def log(
        self,
        it: int,
        start_it: int,
        total_it: int,
        collect_time: float,
        learn_time: float,
        loss_dict: dict,
        learning_rate: float,
        action_std: torch.Tensor | None,
        rnd_weight: float | None,
        print_minimal: bool = False,
        width: int = 80,
        pad: int = 40,
    ) -> dict[str, float]:
        """Write iteration ``it``'s scalars, print the console block, upload new videos; return the episode stats.

        ``start_it`` is this ``learn`` call's first iteration and ``total_it`` its end (exclusive). The console
        block is printed every ``cfg["log_interval"]`` iterations and on the last one, led by
        ``cfg["headline_metric"]``; ``print_minimal`` leaves the env's metrics out of it (the headline stays) (``width`` and ``pad`` are accepted for rsl_rl's signature; rlcore's block
        is compact).
        """
        ep = self.stats.collect()
        self.rewbuffer.extend(self.stats.finished_returns)
        self.lenbuffer.extend(self.stats.finished_lengths)
        self.ep_extras.clear()
        self.last_stats = ep
        collection_size = int(self.cfg["num_steps_per_env"]) * self.num_envs * self.gpu_world_size
        self.tot_timesteps += collection_size
        self.tot_time += collect_time + learn_time
        if self.disable_logs:
            return ep
        if self._report is None or self._report.start != start_it:
            self._report = ConsoleReport(total_it - start_it, start_it)
            self._report.t0 -= collect_time + learn_time  # the clock of this learn() call started one iteration ago
        interval = int(self.cfg.get("log_interval", 1) or 1)
        if it % interval == 0 or it == total_it - 1:
            self._report.print(it, collection_size, collect_time, learn_time, ep, loss_dict,
                               headline=str(self.cfg.get("headline_metric") or "return"), env_metrics=not print_minimal)
        if self.writer is not None and self.writer is not self._stopped:
            scalars = dict(ep)
            scalars.update({f"Loss/{k}": v for k, v in loss_dict.items() if k != "learning_rate"})
            scalars["Loss/learning_rate"] = learning_rate
            scalars["Perf/steps_per_s"] = collection_size / max(collect_time + learn_time, 1e-9)
            scalars["Perf/collection_time"] = collect_time
            scalars["Perf/learning_time"] = learn_time
            if action_std is not None:
                scalars["Policy/mean_std"] = float(action_std.detach().float().mean())
            if rnd_weight is not None:
                scalars["Rnd/weight"] = float(rnd_weight)
            self._write(scalars, it)
            self._upload_videos(it)
        return ep

    def _write(self, scalars: dict[str, float], it: int) -> None:
        finite = {k: float(v) for k, v in scalars.items() if v is not None and math.isfinite(float(v))}
        if hasattr(self.writer, "add_scalars_at"):  # wandb: one record per iteration
            self.writer.add_scalars_at(finite, it)
            return
        for key, value in finite.items():
            self.writer.add_scalar(key, value, it)

    def _upload_videos(self, it: int) -> None:
        if isinstance(self.writer, LogWriter) and self.log_dir is not None:
            for video in sorted(pathlib.Path(self.log_dir).rglob("*.mp4")):
                self.writer.save_video(video, it)

    # ------------------------------------------------------------------ code state
    def _store_code_state(self) -> list[str]:
        """Write ``<log_dir>/git/<repo>.diff`` (commit, status, diff) for every repository of ``git_status_repos``.

        A path outside any git repository, or a machine without git, is skipped with a printed notice.
        Returns the files written.
        """
        written = []
        if self.log_dir is None or self.disable_logs:
            return written
        for path in self.git_status_repos:
            where = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
            try:
                root = _git(where, "rev-parse", "--show-toplevel").strip()
                out = os.path.join(self.log_dir, "git", f"{os.path.basename(root)}.diff")
                if os.path.isfile(out):  # stored already (an earlier learn() or another file of the same repo)
                    continue
                commit = _git(root, "rev-parse", "HEAD").strip()
                status, diff = _git(root, "status"), _git(root, "diff", "HEAD")
            except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
                print(f"[rlcore] no git repository at {path}: its code state is not stored.")
                continue
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "w", encoding="utf-8") as f:
                f.write(f"--- git commit ---\n{commit}\n\n--- git status ---\n{status}\n\n--- git diff ---\n{diff}")
            written.append(out)
        return written


def _git(cwd: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=30).stdout


def _logger_type(spec) -> str:
    """rsl_rl <= 5.4's ``logger_type``: the lower-case logger name (``"wandb"`` for a WandbLogWriter)."""
    if isinstance(spec, str):
        return spec.lower()
    if spec is None:
        return "none"
    name = spec.get("class_name") if hasattr(spec, "get") else None
    name = name if isinstance(name, str) else getattr(name, "__name__", str(name))
    name = name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
    return {"WandbLogWriter": "wandb", "NeptuneLogWriter": "neptune"}.get(name, name)


def plain_config(obj):
    """A copy made of dicts, lists, str, numbers, bools and None (safe for weights_only loading and loggers)."""
    if isinstance(obj, dict) or (hasattr(obj, "items") and not isinstance(obj, str)):
        return {str(k): plain_config(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_config(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return plain_config(dataclasses.asdict(obj))
    return repr(obj)


class ConsoleReport:
    """One compact rich-formatted block per iteration: the headline, return and speed; losses; the task's metrics."""

    def __init__(self, total_iterations: int, start_iteration: int = 0) -> None:
        self.console = Console(highlight=False, soft_wrap=True)
        self.total = total_iterations
        self.start = start_iteration
        self.t0 = time.perf_counter()
        self._missing_said = False

    def print(self, it: int, steps: int, collect_s: float, learn_s: float, stats: dict, losses: dict,
              headline: str = "return", env_metrics: bool = True) -> None:
        """Print iteration ``it``'s block; ``headline``: the metric the first line leads with (``return`` or a task
        metric, :func:`headline_text`); ``env_metrics=False`` leaves the task-metric line out."""
        done = it - self.start + 1
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / done * (self.start + self.total - it - 1)
        fps = steps / max(collect_s + learn_s, 1e-9)
        lead, lead_key = headline_text(stats, headline)
        if headline != "return" and lead_key is None and not self._missing_said:
            self._missing_said = True
            names = ", ".join(sorted(k.removeprefix("Env/") for k in stats
                                     if k.startswith("Env/") and not k.startswith("Env/reward/"))) or "none"
            self.console.print(f"[rlcore] runner.headline_metric: the task reports no metric {headline!r} (its "
                               f"metrics: {names}); the console leads with the return.")
        loss_txt = "  ".join(f"{k} {v:.4g}" for k, v in losses.items())
        env_txt = "  ".join(f"{k} {v:.4g}" for k, v in console_env_metrics(stats, lead_key).items())
        if env_txt and env_metrics:
            loss_txt += f"\n    {env_txt}"
        first = f"{lead}  {episode_text(stats)}" if lead else episode_text(stats)
        self.console.print(
            f"[bold]it {it + 1}/{self.start + self.total}[/bold]  {first}  {fps:,.0f} steps/s  "
            f"(collect {collect_s:.2f}s, learn {learn_s:.2f}s)  ETA {_fmt_time(eta)}\n    {loss_txt}"
        )


def episode_text(stats: dict) -> str:
    """The console's headline: ``return -121.700 (12 full episodes)  ep len 176.8  reward/step -0.6123``.

    The return and length are those of full episodes (:class:`EpisodeStats`); before the first has ended the
    return reads ``n/a (no full episode yet)``, never a partial episode's. ``(no new full episode)``: none ended in
    this iteration, the figures are the last ones. Counts and the per-step reward are shown where ``stats`` has them.
    """
    ret = float(stats.get("Episode/mean_return", math.nan))
    count = stats.get("Episode/finished")
    if math.isfinite(ret):
        text = f"return [cyan]{ret:.3f}[/cyan]"
        if count is not None:
            count = int(count)
            text += (f" ({count} full episode{'s' if count != 1 else ''})" if count > 0
                     else " (no new full episode)")
        text += f"  ep len {float(stats.get('Episode/mean_length', math.nan)):.1f}"
    else:
        text = "return n/a (no full episode yet)"
    per_step = stats.get("Episode/mean_reward_per_step")
    if per_step is not None and math.isfinite(per_step):
        text += f"  reward/step [cyan]{per_step:.4g}[/cyan]"
    return text


def _fmt_time(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}"
