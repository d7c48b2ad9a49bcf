"""OnPolicyRunner: collect rollouts, update, log, checkpoint — for PPO and Distillation alike."""

from __future__ import annotations

import copy
import os
import pathlib
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from tensordict import TensorDict

from rlcore.algorithms.factory import construct_algorithm
from rlcore.checkpoint.io import (
    copy_tree,
    get_rng_states,
    load_checkpoint,
    model_differences,
    obs_group_differences,
    save_atomic,
    seed_everything,
    set_rng_states,
)
from rlcore.config.schema import runner_defaults
from rlcore.deployment import export_jit, export_onnx, policy_metadata
from rlcore.distributed import multi_gpu_cfg_from_env
from rlcore.env import VecEnv
from rlcore.errors import ConfigError
from rlcore.logging.log_writer import LogWriter
from rlcore.logging.logger import Logger, plain_config
from rlcore.logging.video import ClipRecorder, check_can_render, render_frame
from rlcore.report.diagnosis import print_findings
from rlcore.runners.evaluation import Evaluation, check_settings, is_better, metric_direction, parse_stop_at
from rlcore.runners.run_state import gather_rank_states, rank_state_of
from rlcore.utils.cpu_memory import CpuMemoryHold, hold_freed_cpu_memory

RUNNER_DEFAULTS = runner_defaults()
"""Runner-level keys of the train config and their defaults (model and algorithm keys live in sub-dicts): RunnerCfg's
fields, the logger keys and ``seed`` (None: the runner does not seed), all from ``rlcore.config.schema``."""


class OnPolicyRunner:
    """Drives an on-policy algorithm on a VecEnv.

    Args:
        env: the vectorised environment.
        train_cfg: the rsl_rl 5.x-style nested train config (runner keys, ``obs_groups``, ``algorithm``,
            ``actor``/``critic`` or ``student``/``teacher``).
        log_dir: where checkpoints and logs go (None: nothing is written).
        device: device of the learner (the env may live elsewhere; tensors are moved).
        eval_env: a separate env of the same task for the periodic deterministic evaluation that ``keep_best``
            and ``stop_at`` need (rank 0 only; ``rlcore.train`` builds one with ``eval_num_envs`` envs).
    """

    default_algorithm = "PPO"

    def __init__(self, env: VecEnv, train_cfg: dict, log_dir: str | None = None, device: str = "cpu",
                 eval_env: VecEnv | None = None) -> None:
        self.cfg = {**RUNNER_DEFAULTS, **copy.deepcopy(dict(train_cfg))}
        check_settings(self.cfg)
        self._memory_hold: CpuMemoryHold | None = None  # taken by learn() while it trains (runner.keep_cpu_memory)
        self.cfg.setdefault("algorithm", {"class_name": self.default_algorithm})
        self.env = env
        self.multi_gpu_cfg = self.cfg.get("multi_gpu") or multi_gpu_cfg_from_env()
        self.cfg["multi_gpu"] = self.multi_gpu_cfg
        self.device = self._setup_distributed(device)
        self.is_main = self.rank == 0
        if self.cfg["seed"] is not None:
            seed_everything(int(self.cfg["seed"]) + self.rank)
        self.num_steps_per_env = int(self.cfg["num_steps_per_env"])

        obs = env.get_observations().to(self.device)
        self.alg = construct_algorithm(obs, env, self.cfg, self.device)
        self.alg.broadcast_parameters()
        self.log_dir = log_dir if self.is_main else None
        self._writes_checkpoints = log_dir is not None  # on every rank: all take part in gathering rank states
        self._normalizers_seeded = False  # by init_from() or by the warm-up: no (further) warm-up
        self._other_rank_states: list[dict] | None = None  # gathered for the checkpoint being written
        self._current_learning_iteration = 0
        self.fresh_start = True  # no iteration completed or restored yet (learn() starts at 0 and warms up)
        # Whether the env's episodes are under way (restored from a checkpoint, or stepped by learn()): only
        # then does learn(init_at_random_ep_len=True) keep the episode lengths as they are.
        self._env_running = False
        # The observation the next iteration starts from (after each rollout; restored by a resume). Envs whose
        # get_observations() draws fresh sensor noise (Go2, Isaac Lab) would otherwise start a resumed run from
        # another observation, and a generator one draw further on, than the uninterrupted run.
        self._last_obs: TensorDict | None = None
        self._resume_obs: TensorDict | None = None
        # The state at the last iteration boundary of this learn() call (_snapshot): what Ctrl-C rewinds to and saves.
        self._boundary: dict | None = None
        self._first_boundary: dict | None = None  # the one before the call's first iteration
        # rsl_rl's logger object: writer, log_dir, save_model, git_status_repos, ... (rank 0 logs, others keep quiet).
        self.logger = Logger(log_dir=log_dir, cfg=self.cfg, env_cfg=getattr(env, "cfg", None), num_envs=env.num_envs,
                             is_distributed=self.is_distributed, gpu_world_size=self.world_size,
                             gpu_global_rank=self.rank, device=self.device)
        # Videos: env 0 of the training env rendered as it trains (rendering reads its state only).
        self.video_interval = int(self.cfg["video_interval"])
        if self.video_interval > 0 and self.is_main:
            check_can_render(env, "runner.video_interval")
        self._clip: ClipRecorder | None = None
        # Evaluation (rank 0), best checkpoint and stopping rule.
        self.stop_rule = parse_stop_at(self.cfg["stop_at"]) if self.cfg["stop_at"] is not None else None
        self.best: dict | None = None  # {"metric", "value", "iter"} of model_best.pt
        self.last_evaluation: dict | None = None  # {"iter", <metric>: value, ...} of the last evaluation
        self.eval_env = eval_env if self.is_main else None
        self.evaluation = self._make_evaluation()

    # ------------------------------------------------------------------ set-up
    def _setup_distributed(self, device: str) -> str:
        cfg = self.multi_gpu_cfg
        self.rank, self.world_size = 0, 1
        if cfg is None or int(cfg["world_size"]) <= 1:
            return device
        self.rank, self.world_size = int(cfg["global_rank"]), int(cfg["world_size"])
        if str(device).startswith("cuda"):
            device = f"cuda:{int(cfg['local_rank'])}"
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if str(device).startswith("cuda") else "gloo",
                                    rank=self.rank, world_size=self.world_size)
        return device

    # rsl_rl's names for the distributed set-up and runner settings (read by framework runner subclasses).
    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def gpu_world_size(self) -> int:
        return self.world_size

    @property
    def gpu_global_rank(self) -> int:
        return self.rank

    @property
    def gpu_local_rank(self) -> int:
        return int((self.multi_gpu_cfg or {}).get("local_rank", 0))

    @property
    def save_interval(self) -> int:
        return int(self.cfg["save_interval"])

    @property
    def current_learning_iteration(self) -> int:
        """Number of the last completed (or restored) iteration, counted from 0 as in rsl_rl; 0 when fresh."""
        return self._current_learning_iteration

    @current_learning_iteration.setter
    def current_learning_iteration(self, value: int) -> None:
        # Set by learn() after an iteration, by load() on a resume, or by a subclass's own load() (mjlab's runner
        # sets it from the checkpoint itself): that iteration is done, learn() continues with the next one.
        self._current_learning_iteration = int(value)
        self.fresh_start = False

    @property
    def models(self) -> dict[str, torch.nn.Module]:
        return {n: getattr(self.alg, n) for n in ("actor", "critic", "student", "teacher") if hasattr(self.alg, n)}

    # ------------------------------------------------------------------ training
    def learn(self, num_learning_iterations: int | None = None, init_at_random_ep_len: bool = False,
              callback: Callable[[int, dict], bool | None] | None = None) -> None:
        """Run ``num_learning_iterations`` iterations (default: ``max_iterations``).

        Iterations are numbered from 0 as in rsl_rl: ``current_learning_iteration`` is the number of the last
        completed one (2 after ``learn(3)`` on a fresh runner), checkpoints are ``model_<that number>.pt``
        (every ``save_interval``-th, starting with ``model_0.pt``, and the last one), and a resumed run continues
        with the next number. ``callback(iteration, episode_stats)`` runs on the main process after every
        iteration with the iteration's logged episode/env statistics; returning True stops training.

        With ``keep_cpu_memory`` (default) freed CPU blocks stay mapped while this call trains
        (:func:`rlcore.utils.cpu_memory.hold_freed_cpu_memory`); the process's allocator settings are restored when
        it returns or raises.
        """
        if self.cfg["keep_cpu_memory"] and self._memory_hold is None:
            self._memory_hold = hold_freed_cpu_memory()
        try:
            self._learn(num_learning_iterations, init_at_random_ep_len, callback)
        finally:
            self._release_memory_hold()

    def _release_memory_hold(self) -> None:
        if self._memory_hold is not None:
            self._memory_hold.release()
            self._memory_hold = None

    def _learn(self, num_learning_iterations: int | None, init_at_random_ep_len: bool,
               callback: Callable[[int, dict], bool | None] | None) -> None:
        num_it = int(num_learning_iterations if num_learning_iterations is not None else self.cfg["max_iterations"])
        obs = self._start_learning(init_at_random_ep_len)
        start = self.current_learning_iteration + (0 if self.fresh_start else 1)
        try:
            self._check_video_and_evaluation(start)  # rank 0's work
        except BaseException as err:
            if self.is_distributed:
                _broadcast_flag(None, self.device, err)
            raise
        if self.is_distributed:
            _broadcast_flag(False, self.device)
        saved = None  # the iteration whose checkpoint was written last in this call
        budget = self.cfg.get("max_minutes")
        deadline = None if budget is None else time.monotonic() + 60.0 * float(budget)
        self._boundary = self._first_boundary = self._snapshot(obs)  # before the first iteration: nothing to save
        try:
            for it in range(start, start + num_it):
                obs, stats = self._iteration(it, obs, start, start + num_it)
                # Before the save: the checkpoint holds the best value so far.
                stop = self._evaluate(it, stats, last=it == start + num_it - 1)
                self._boundary = self._snapshot(obs)  # iteration `it` is complete
                if self._writes_checkpoints and it % self.save_interval == 0:
                    self._checkpoint(f"model_{it}.pt")
                    saved = it
                if self.is_main and callback is not None and callback(it, stats):
                    stop = True
                if self.is_main and deadline is not None and time.monotonic() >= deadline and not stop:
                    print(f"[rlcore] runner.max_minutes={budget:g} reached after iteration {it}: training stops",
                          flush=True)
                    stop = True
                if self.is_distributed and (callback is not None or deadline is not None):  # rank 0's stop
                    stop = _broadcast_flag(stop, self.device)
                if stop:
                    break
        except KeyboardInterrupt:
            # Ctrl-C lands anywhere: in a rollout (the env, generators and storage have moved on), in the update
            # (weights and optimiser half-way), in the evaluation or in a save. Go back to the last iteration
            # boundary and save that one, so the checkpoint is the iteration it names and a resume continues as the
            # uninterrupted run would. The other ranks cannot be asked for their state now: rank 0's alone (the
            # others continue rank 0's curricula on resume, see rlcore.runners.run_state).
            completed = self._rewind()
            path = self._save_unsaved(start, saved, gather=False) if completed else None
            if path is not None:
                print(f"\n[rlcore] interrupted: saved {path} (iteration {self.current_learning_iteration + 1}, the "
                      "last one completed)")
            raise
        finally:
            self._finish_clip(self.current_learning_iteration, force=True)  # a clip cut short is kept as it is
            self._boundary = self._first_boundary = None
        self._resume_obs = obs  # a later learn() call continues from here, as one longer call would
        self._save_unsaved(start, saved)  # the last one
        self.logger.stop_logging_writer()
        if self.log_dir is not None:  # what the curves say (rlcore.report's diagnosis); nothing without event files
            print_findings(self.log_dir, self.cfg)

    def _start_learning(self, init_at_random_ep_len: bool) -> TensorDict:
        """Before the first iteration of a ``learn`` call: spread the episode lengths of fresh envs (when asked),
        take the observation to start from (a resumed one if any), warm the normalisers up on a fresh start, and
        open the log writer."""
        self._check_ready()
        if init_at_random_ep_len and not self._env_running:  # fresh envs (also after a resume without env state)
            self.env.episode_length_buf = torch.randint_like(
                self.env.episode_length_buf, high=int(torch.as_tensor(self.env.max_episode_length).max()))
        self._env_running = True
        self.alg.train_mode()
        obs = self._resume_obs if self._resume_obs is not None else self.env.get_observations().to(self.device)
        self._resume_obs = None
        if self.fresh_start and not self._normalizers_seeded:
            obs = self._warm_up_normalizers(obs)
            self._normalizers_seeded = True
        self.logger.init_logging_writer()
        return obs

    def _iteration(self, it: int, obs: TensorDict, start: int, end: int) -> tuple[TensorDict, dict]:
        """Iteration ``it`` of ``start..end - 1``: a rollout from ``obs``, an update, the log line. Returns the
        observation the next rollout starts from and the iteration's statistics (episodes, timings)."""
        t0 = time.perf_counter()
        set_iteration = getattr(self.alg, "set_iteration", None)  # iteration-dependent settings (PPO, Distillation)
        if set_iteration is not None:
            set_iteration(it)
        self._start_clip(it)
        self._last_obs = None  # an interrupted rollout leaves the env mid-way: no observation to resume from
        obs = self._collect(obs)
        self._last_obs = obs
        self._finish_clip(it)
        t1 = time.perf_counter()
        losses = self.alg.update()
        t2 = time.perf_counter()
        self.current_learning_iteration = it  # the setter also ends fresh_start
        ep = self.logger.log(
            it=it, start_it=start, total_it=end, collect_time=t1 - t0, learn_time=t2 - t1,
            loss_dict=losses, learning_rate=losses.get("learning_rate", getattr(self.alg, "learning_rate", 0.0)),
            action_std=self._action_std(), rnd_weight=self._rnd_weight())
        return obs, {**ep, "collect_s": t1 - t0, "learn_s": t2 - t1}

    def _save_unsaved(self, start: int, saved: int | None, gather: bool = True) -> str | None:
        """Checkpoint the last completed iteration of this ``learn`` call unless it was just saved; returns the
        path (None: nothing to write - no iteration completed in this call, or not rank 0). ``gather=False``: rank 0
        writes its own rank state only."""
        if self._writes_checkpoints and not self.fresh_start and start <= self.current_learning_iteration != saved:
            return self._checkpoint(f"model_{self.current_learning_iteration}.pt", gather=gather)
        return None

    def _checkpoint(self, name: str, gather: bool = True) -> str | None:
        """Write ``<log_dir>/<name>`` with every rank's state (a collective on several ranks unless ``gather`` is
        false: every rank calls it at the same iteration). Returns the path on rank 0, None on the others."""
        others = None
        if gather and self.is_distributed:
            others = gather_rank_states(None if self.is_main else self.rank_state_dict(), self.rank, self.world_size)
        if not self.is_main or self.log_dir is None:
            return None
        path = os.path.join(self.log_dir, name)
        self._other_rank_states = others  # picked up by save(), which subclasses may override (mjlab, Isaac Lab)
        try:
            self.save(path)
        finally:
            self._other_rank_states = None
        return path

    def _collect(self, obs: TensorDict) -> TensorDict:
        """One rollout of ``num_steps_per_env`` steps, then the return computation."""
        bad = None
        with torch.inference_mode():
            for _ in range(self.num_steps_per_env):
                actions = self._clip_actions(self.alg.act(obs))
                obs, rewards, dones, extras = self.env.step(actions.to(self.env.device))
                obs, rewards, dones = obs.to(self.device), rewards.to(self.device), dones.to(self.device)
                if self.cfg["check_for_nan"]:
                    step_bad = _non_finite_flags(obs, rewards)
                    bad = step_bad if bad is None else bad | step_bad
                self.alg.process_env_step(obs, rewards, dones, extras)
                self.logger.process_env_step(rewards, dones, extras)
                if self._clip is not None:
                    self._clip.capture()
            _raise_if_non_finite(bad, obs)  # one host sync per rollout, not per step
            self.alg.compute_returns(obs)
        return obs

    def _warm_up_normalizers(self, obs: TensorDict) -> TensorDict:
        """Seed observation normalisers with a short rollout of the initial policy (no learning).

        Without it the first update would see raw observations through unit statistics; statistics stay
        frozen during optimisation, so the first PPO ratio still starts at exactly 1.
        """
        if not any(getattr(m, "obs_normalization", False) for m in self.models.values()):
            return obs
        steps = self.cfg["normalizer_warmup_steps"]
        steps = self.num_steps_per_env if steps is None else int(steps)
        if steps <= 0:
            return obs
        policy = self.alg.get_policy()
        seen = [obs]
        bad = None
        with torch.inference_mode():
            for _ in range(steps):
                actions = self._clip_actions(policy(obs, stochastic_output=True))
                obs, rewards, dones, _ = self.env.step(actions.to(self.env.device))
                obs, dones = obs.to(self.device), dones.to(self.device)
                if self.cfg["check_for_nan"]:  # a NaN merged into the statistics would poison every later step
                    step_bad = _non_finite_flags(obs, rewards.to(self.device))
                    bad = step_bad if bad is None else bad | step_bad
                for model in self.models.values():
                    model.reset(dones)
                observe = getattr(self.alg, "observe_dones", None)  # per-env counters that follow the episodes
                if observe is not None:
                    observe(dones)
                seen.append(obs)
            _raise_if_non_finite(bad, obs)
            self.alg.update_normalization(torch.stack(seen))
        for model in self.models.values():
            model.reset()
        return obs

    def _clip_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions ``[N, A]`` the env receives: clamped to ``[-clip_actions, clip_actions]`` when the config sets
        ``clip_actions`` (the algorithm still stores the unclipped ones), else unchanged. Every ``env.step`` of the
        runner (warm-up and rollouts) goes through here."""
        clip = self.cfg["clip_actions"]
        if clip is None:
            return actions
        return actions.clamp(-float(clip), float(clip))

    def _check_ready(self) -> None:
        """Hook for subclasses (distillation needs its teacher loaded)."""

    def _action_std(self) -> torch.Tensor | None:
        """The policy's action std of its last distribution update (None for a deterministic policy)."""
        policy = self.alg.get_policy()
        if getattr(policy, "distribution", None) is None:
            return None
        try:
            return policy.output_std
        except (AttributeError, RuntimeError, TypeError):  # no distribution update yet
            return None

    def _rnd_weight(self) -> float | None:
        rnd = getattr(self.alg, "rnd", None)
        return None if rnd is None else float(rnd.weight)

    # ------------------------------------------------------------------ videos
    def _start_clip(self, it: int) -> None:
        """Start recording env 0 at every ``video_interval``-th iteration (unless a clip is still running)."""
        if self._clip is None and self.video_interval > 0 and self.log_dir is not None and it % self.video_interval == 0:
            path = os.path.join(self.log_dir, "videos", f"iter_{it}.mp4")
            self._clip = ClipRecorder(self.env, path, int(self.cfg["video_length"]), int(self.cfg["video_width"]),
                                      int(self.cfg["video_height"]), setting="runner.video_interval")

    def _finish_clip(self, it: int, force: bool = False) -> None:
        """Close a complete clip (any clip with ``force``) and hand it to the logger at iteration ``it``.

        wandb (any LogWriter) gets the file (``save_video``: ``wandb.Video``); TensorBoard's ``add_video``
        needs moviepy, so TensorBoard gets the file's path as text (tag ``Videos``).
        """
        if self._clip is None or not (force or self._clip.done):
            return
        clip, self._clip = self._clip, None
        path = clip.close()
        writer = self.logger.writer
        if path is None or writer is None or writer is self.logger._stopped:
            return
        if isinstance(writer, LogWriter):
            writer.save_video(pathlib.Path(path), it)
        elif hasattr(writer, "add_text"):
            writer.add_text("Videos", f"{os.path.relpath(path, self.log_dir)} ({clip.frames_written} frames)", it)

    # ------------------------------------------------------------------ evaluation, best checkpoint, stopping
    def _make_evaluation(self) -> Evaluation | None:
        """The evaluation ``keep_best`` / ``stop_at`` need (rank 0), or None when both are off."""
        best, rule = self.cfg["keep_best"], self.stop_rule
        self.best_direction = None
        if best is None and rule is None:
            return None
        if not self.is_main:
            return None
        setting = " / ".join(n for n, v in (("runner.keep_best", best), ("runner.stop_at", rule)) if v is not None)
        if self.eval_env is None:
            raise ConfigError(f"{setting} needs an evaluation env: OnPolicyRunner(env, cfg, log_dir, device, "
                              "eval_env=<a separate env of the same task>) (python -m rlcore.train builds one).")
        metrics = [m for m in (best, rule.metric if rule else None) if m is not None]
        steps = self.cfg["eval_steps"]
        if best is not None:
            self.best_direction = metric_direction(self.eval_env, best)
        return Evaluation(self.eval_env, metrics, None if steps is None else int(steps),
                          int(self.cfg["eval_warmup_steps"]), setting=setting, source_env=self.env)

    def _eval_act(self, policy: torch.nn.Module, obs: TensorDict) -> torch.Tensor:
        """The evaluation's actions: the policy's mean action, clipped as in training."""
        return self._clip_actions(policy(obs, stochastic_output=False))

    def _check_video_and_evaluation(self, start: int) -> None:
        """Fail at the start of ``learn``, not iterations later: one frame rendered, one evaluation step taken.

        A resumed run also adopts the value of a better ``model_best.pt`` already in ``log_dir``, so that it never
        overwrites it with a worse one.
        """
        if not self.is_main:
            return
        if self.video_interval > 0 and self.log_dir is not None:
            render_frame(self.env, self.cfg["video_width"], self.cfg["video_height"], "runner.video_interval")
        if self.evaluation is not None:
            self.evaluation.check(self.alg.get_policy(), self._eval_act)
        metric = self.cfg["keep_best"]
        path = os.path.join(self.log_dir, "model_best.pt") if self.log_dir is not None else None
        if metric is None or path is None or start == 0 or not os.path.isfile(path):
            return
        try:
            saved = load_checkpoint(path, map_location="cpu").get("best")
        except Exception:  # an unreadable file: the next best replaces it
            return
        if isinstance(saved, dict) and saved.get("metric") == metric and \
                is_better(float(saved["value"]), None if self.best is None else self.best["value"], self.best_direction):
            self.best = dict(saved)

    def _evaluate(self, it: int, stats: dict, last: bool = False) -> bool:
        """Every ``eval_interval`` iterations and at the last one of a ``learn`` call: evaluate (rank 0), keep
        ``model_best.pt``, and say whether training stops (``stop_at`` met; the same answer on every rank). Adds
        ``Eval/<metric>`` and ``eval_s`` to ``stats``.

        On several ranks, an exception in rank 0's evaluation is announced to the others before it is raised, so
        they stop at once (with an error naming rank 0) instead of waiting at the next collective until it times out.
        """
        if (self.cfg["keep_best"] is None and self.stop_rule is None) or \
                ((it + 1) % int(self.cfg["eval_interval"]) and not last):
            return False
        stop = False
        if self.is_main:
            try:
                stop = self._evaluate_main(it, stats)
            except BaseException as err:
                if self.is_distributed:
                    _broadcast_flag(None, self.device, err)
                raise
        if self.is_distributed:
            stop = _broadcast_flag(stop, self.device)
        return stop

    def _evaluate_main(self, it: int, stats: dict) -> bool:
        """Rank 0's part of :meth:`_evaluate`: run the evaluation, log it, keep the best checkpoint; whether to stop."""
        t0 = time.perf_counter()
        results = self.evaluation(self.alg.get_policy(), self._eval_act)
        stats["eval_s"] = time.perf_counter() - t0
        stats.update({f"Eval/{k}": v for k, v in results.items()})
        self.last_evaluation = {"iter": it, **results}
        writer = self.logger.writer
        if writer is not None and writer is not self.logger._stopped:
            for key, value in results.items():
                if value == value:  # not NaN
                    writer.add_scalar(f"Eval/{key}", value, it)
        line = ", ".join(f"{k} {v:.4g}" for k, v in results.items())
        metric = self.cfg["keep_best"]
        if metric is not None:
            if is_better(results[metric], None if self.best is None else self.best["value"], self.best_direction):
                self.best = {"metric": metric, "value": float(results[metric]), "iter": it}
                if self.log_dir is not None:
                    self.save(os.path.join(self.log_dir, "model_best.pt"))
                    line += " -> model_best.pt"
            elif self.best is not None:
                line += f" (best {self.best['value']:.4g} after iteration {self.best['iter'] + 1})"
        stop = self.stop_rule is not None and self.stop_rule.met(results[self.stop_rule.metric])
        print(f"[rlcore] evaluation after iteration {it + 1}: {line}" +
              (f"; stop_at '{self.stop_rule}' met: training stops" if stop else ""), flush=True)
        return stop

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str, infos: dict | None = None) -> str:
        """Atomically write a checkpoint: the shared state (weights, optimiser, iteration, best evaluation) and this
        process's rank state (generators, env, recurrent memory, counters; see :mod:`rlcore.runners.run_state`).

        Called on rank 0 alone (as rsl_rl's runners and their subclasses do), it holds rank 0's state only; the
        checkpoints ``learn`` writes also hold every other rank's."""
        return self._write_checkpoint(path, infos, self._other_rank_states)

    def _write_checkpoint(self, path: str, infos: dict | None, other_ranks: list[dict] | None) -> str:
        state = self.alg.save()
        state["iter"] = self.current_learning_iteration
        state["infos"] = infos
        state["train_cfg"] = plain_config(self.cfg)
        state["obs_groups"] = plain_config(self.cfg.get("obs_groups"))  # checked when this actor becomes a teacher
        if self.best is not None:  # keep_best: the best evaluation so far (model_best.pt: its own)
            state["best"] = dict(self.best)
        state.update(self.rank_state_dict())
        state["world_size"] = self.world_size
        if other_ranks:
            state["other_ranks"] = other_ranks
        save_atomic(state, path)
        self.logger.save_model(path, self.current_learning_iteration)  # e.g. wandb uploads it
        return path

    def rank_state_dict(self) -> dict:
        """This process's resumable state (:mod:`rlcore.runners.run_state`): its generators, env and the observation
        its next rollout starts from, the models' recurrent memory, the algorithm's per-env counters and the
        logger's episode bookkeeping (plain tensors and values: ``weights_only`` loading reads them)."""
        state = {"rng_states": get_rng_states(),
                 "hidden_states": {n: m.get_hidden_state() for n, m in self.models.items()
                                   if getattr(m, "is_recurrent", False)}}
        if callable(getattr(self.env, "state_dict", None)):
            state["env_state"] = self.env.state_dict()
            if self._last_obs is not None:  # with the env state it belongs to
                state["last_observations"] = self._last_obs.detach().cpu().to_dict()
        if callable(getattr(self.alg, "rank_state_dict", None)):
            state["algorithm_state"] = self.alg.rank_state_dict()
        if callable(getattr(self.logger, "state_dict", None)):
            state["logger_state"] = self.logger.state_dict()
        return state

    def load_rank_state_dict(self, state: dict) -> bool:
        """Restore :meth:`rank_state_dict`'s output (keys it lacks, e.g. in an older checkpoint, stay as they are);
        returns whether the env's own state was restored.

        State that describes the env's episodes follows the env: the models' recurrent memory, the algorithm's
        per-env counters and the logger's running returns and lengths are restored only together with the env's own
        state. An env without ``load_state_dict`` (the plain VecEnv contract) starts fresh episodes, and so do they;
        the run's totals (steps, time, the last episodes' means) continue either way.
        """
        if "rng_states" in state:
            set_rng_states(state["rng_states"])
        env_restored = "env_state" in state and callable(getattr(self.env, "load_state_dict", None))
        if env_restored:
            self.env.load_state_dict(state["env_state"])
            self._env_running = True
            if "last_observations" in state:
                self._resume_obs = TensorDict(dict(state["last_observations"]),
                                              batch_size=[self.env.num_envs]).to(self.device)
            for name, h in (state.get("hidden_states") or {}).items():
                if name in self.models and h is not None:
                    self.models[name].reset(hidden_state=h)
            if "algorithm_state" in state and callable(getattr(self.alg, "load_rank_state_dict", None)):
                self.alg.load_rank_state_dict(state["algorithm_state"])
        if "logger_state" in state and callable(getattr(self.logger, "load_state_dict", None)):
            self.logger.load_state_dict(state["logger_state"], episodes=env_restored)
        return env_restored

    def _snapshot(self, obs: TensorDict) -> dict:
        """A copy of the run's state at an iteration boundary (what a checkpoint written now would hold, plus the
        observation the next rollout starts from), for :meth:`_rewind`. About 0.2 % of an iteration on the default Go2
        (1,024 envs; ``bench/snapshot_cost.py``)."""
        return {"iter": self._current_learning_iteration, "fresh_start": self.fresh_start,
                "algorithm": copy_tree(self.alg.save()), "rank": copy_tree(self.rank_state_dict()),
                "obs": obs.clone(), "last_obs": None if self._last_obs is None else self._last_obs.clone(),
                "best": copy.deepcopy(self.best), "last_evaluation": copy.deepcopy(self.last_evaluation)}

    def _rewind(self) -> bool:
        """Go back to the last iteration boundary (:meth:`_snapshot`): weights, optimiser, normalisers, extensions,
        generators, env (where it has ``load_state_dict``), recurrent memory, counters, logger, iteration and best
        evaluation; the half-filled rollout storage is emptied. Returns whether that boundary ends an iteration of
        the current ``learn`` call (False: interrupted before its first iteration completed)."""
        b = self._boundary
        if b is None:
            return False
        self.alg.load(b["algorithm"], None, True)
        storage = getattr(self.alg, "storage", None)
        if storage is not None:
            storage.clear()
        env_restored = self.load_rank_state_dict(b["rank"])
        self._resume_obs = b["obs"] if env_restored else None  # else the env is where the interrupt left it
        self._last_obs = b["last_obs"]
        self._current_learning_iteration, self.fresh_start = b["iter"], b["fresh_start"]
        self.best, self.last_evaluation = b["best"], b["last_evaluation"]
        return b is not self._first_boundary


    def load(self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None,
             load_optimizer: bool = True) -> dict:
        """Load a checkpoint. A full resume also restores the iteration count and every rank's own state (generators,
        env, recurrent memory, counters: :mod:`rlcore.runners.run_state`)."""
        ckpt = load_checkpoint(path, map_location=map_location or self.device)
        self._check_compatible(ckpt, path)
        if load_cfg is None and not load_optimizer:
            load_cfg = {"optimizer": False}
        resumed = self.alg.load(ckpt, load_cfg, strict)
        if resumed:
            self.current_learning_iteration = int(ckpt.get("iter", 0))  # the setter also ends fresh_start
            self._normalizers_seeded = True
            best = ckpt.get("best")
            if isinstance(best, dict) and best.get("metric") == self.cfg["keep_best"]:
                self.best = dict(best)
            own = rank_state_of(ckpt, self.rank)
            if own is not None:
                self.load_rank_state_dict(own)
            else:
                self._continue_rank0(ckpt)
        else:
            self._loaded_weights_only(ckpt)
        self.alg.broadcast_parameters()
        return ckpt.get("infos")

    def _continue_rank0(self, ckpt: dict) -> None:
        """A rank without its own state in ``ckpt`` keeps its freshly seeded generators and env, and continues the
        curricula where rank 0 left them (envs with ``continue_curriculum``)."""
        state = ckpt.get("env_state")
        continue_curriculum = getattr(self.env, "continue_curriculum", None)
        if isinstance(state, dict) and callable(continue_curriculum):
            continue_curriculum(state)
        print(f"[rlcore] rank {self.rank}: the checkpoint holds no state of this rank (written by "
              f"{ckpt.get('world_size', 1)} rank(s)); it continues rank 0's curricula with its own env and generators.")

    def init_from(self, path: str) -> dict:
        """Start a fresh run from a checkpoint's weights: the models (their observation normalisers included) are
        loaded; everything else is fresh (iteration 0, optimiser and learning rate, env, generators, counters), and
        the normaliser warm-up is skipped. The model config must fit the checkpoint; the env may differ (another
        ``num_envs``, other task settings). Returns the checkpoint's ``infos``."""
        ckpt = load_checkpoint(path, map_location=self.device)
        self._check_compatible(ckpt, path)
        self.alg.load(ckpt, {"optimizer": False}, True)
        policy_key = "student_state_dict" if hasattr(self.alg, "student") else "actor_state_dict"
        self._normalizers_seeded = policy_key in ckpt
        self._loaded_weights_only(ckpt)
        self.alg.broadcast_parameters()
        return ckpt.get("infos")

    def _loaded_weights_only(self, ckpt: dict) -> None:
        """Hook for subclasses: ``ckpt`` gave weights without a resume (a distillation teacher)."""

    def _check_compatible(self, ckpt: dict, path: str) -> None:
        """Refuse, in one line, a checkpoint written for another model type, size or observation layout.

        Compares the models both configs have (a PPO checkpoint loaded as a distillation teacher shares none with
        the student's config: the teacher's observation groups are checked by the distillation runner).
        """
        saved = ckpt.get("train_cfg")
        if not isinstance(saved, dict):
            return
        parts = tuple(p for p in ("actor", "critic", "student")
                      if isinstance(saved.get(p), dict) and isinstance(self.cfg.get(p), dict))
        diffs = model_differences(saved, self.cfg, parts) + obs_group_differences(saved, self.cfg, parts)
        if diffs:
            raise ConfigError(f"Checkpoint '{path}' was written for a different model: " + "; ".join(diffs) + ".")

    # ------------------------------------------------------------------ deployment
    def get_inference_policy(self, device: str | None = None) -> torch.nn.Module:
        """The policy model in eval mode (moved to ``device`` if given): ``policy(obs)`` gives deterministic actions.

        As in rsl_rl this is the trained model itself, not a copy (a recurrent one keeps its hidden state;
        ``policy.reset(dones)`` clears it).
        """
        self.alg.eval_mode()
        policy = self.alg.get_policy()
        if device is not None:
            policy.to(device)
        return policy

    def export_policy_to_jit(self, path: str, filename: str = "policy.pt") -> str:
        return export_jit(self.alg.get_policy().as_jit(), os.path.join(path, filename))

    def export_policy_to_onnx(self, path: str, filename: str = "policy.onnx", verbose: bool = False) -> str:
        """Write the policy as ONNX with the task's deployment interface in its ``metadata_props``; the graph is the
        env's ``export_module(policy)`` where it has one (the task protocol, :mod:`rlcore.env.task`: e.g. the Go2's
        integral loop on the command), else the policy's own. Its ``action_clip`` is what ``_clip_actions`` and the
        env applied in training."""
        policy = self.alg.get_policy()
        task_module = getattr(self.env, "export_module", None)
        module = (task_module(policy) if callable(task_module) else None) or policy.as_onnx(verbose)
        task = (self.cfg.get("task") or {}).get("name") if isinstance(self.cfg.get("task"), dict) else None
        metadata = policy_metadata(module, policy, self.env, task, action_clip=self.cfg.get("clip_actions"))
        return export_onnx(module, os.path.join(path, filename), metadata=metadata)

    def add_git_repo_to_log(self, repo_file_path: str) -> None:
        """Also store the git state (commit, status, diff) of the repository holding ``repo_file_path`` when training
        starts, in ``<log_dir>/git/<repository>.diff`` (rlcore's own repository is always stored)."""
        self.logger.git_status_repos.append(repo_file_path)

    def train_mode(self) -> None:
        """Models in training mode (dropout etc.); the teacher of a distillation stays in eval mode."""
        self.alg.train_mode()

    def eval_mode(self) -> None:
        self.alg.eval_mode()

    def close(self) -> None:
        """Close the logging writer and give back kept CPU memory (``learn`` does both too when it ends)."""
        self._release_memory_hold()
        self.logger.stop_logging_writer()


#: What rank 0 sends in place of its flag when it failed (:func:`_broadcast_flag`), by the kind of failure.
_FAILED = {"bug": -1.0, "user": -2.0, "interrupt": -3.0}


def _broadcast_flag(flag: bool | None, device: str, failure: BaseException | None = None) -> bool:
    """Rank 0's ``flag`` on every rank (a collective). ``None`` (from rank 0) means that rank 0 failed with
    ``failure``: the other ranks stop instead of waiting for it at a later collective, with an error of the same
    kind, so that a user's mistake caught on rank 0 is a one-line user error on every rank (not a bug's traceback
    there), Ctrl-C an interrupt, and only a bug a bug."""
    kind = "user" if isinstance(failure, ConfigError) else "interrupt" if isinstance(failure, KeyboardInterrupt) \
        else "bug"
    value = torch.tensor([_FAILED[kind] if flag is None else float(flag)], device=device)
    dist.broadcast(value, src=0)
    code = value.item()
    if code >= 0:
        return bool(code)
    if dist.get_rank() == 0:
        return False
    rank = dist.get_rank()
    if code == _FAILED["user"]:
        raise ConfigError(f"rank {rank} stops: rank 0 stopped on the error above (a user error, printed by rank 0).")
    if code == _FAILED["interrupt"]:
        raise KeyboardInterrupt
    raise RuntimeError(f"rank 0 failed during training (its own error is printed above); rank {rank} stops too.")


def _non_finite_flags(obs: TensorDict, rewards: torch.Tensor) -> torch.Tensor:
    """Bool ``[G + 1]``: whether each obs group (and the rewards) holds a NaN/Inf."""
    flags = [~torch.isfinite(v).all() for v in obs.values()] + [~torch.isfinite(rewards).all()]
    return torch.stack(flags)


def _raise_if_non_finite(bad: torch.Tensor | None, obs: TensorDict) -> None:
    """Raise, naming the culprits, if any flag of ``_non_finite_flags`` (OR-ed over steps) is set."""
    if bad is not None and bool(bad.any()):
        names = list(obs.keys()) + ["rewards"]
        culprits = [n for n, b in zip(names, bad.tolist()) if b]
        raise FloatingPointError(f"Non-finite values (NaN/Inf) from the environment in: {', '.join(culprits)}.")

