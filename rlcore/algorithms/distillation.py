"""Teacher-student distillation (DAgger-style behaviour cloning).

The student acts (stochastically, so it visits the states its own mistakes lead to); a frozen teacher,
which may see privileged observations, labels the same observations with its actions. The update
regresses the student's mean action on the teacher's, replaying the rollout in time order so that a
recurrent student is trained through its memory with truncated back-propagation windows of
``gradient_length`` steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.algorithms.factory import construct_distillation
from rlcore.distributed import all_reduce_mean_grads, broadcast_tensors
from rlcore.env import VecEnv
from rlcore.errors import ConfigError
from rlcore.models import MLPModel
from rlcore.modules import HiddenState
from rlcore.storage import RolloutStorage
from rlcore.utils.compile import compile_mlp_heads
from rlcore.utils.optimizer import resolve_optimizer
from rlcore.utils.schedule import check_schedule, piecewise_linear

_LOSSES = {"mse": nn.functional.mse_loss, "huber": nn.functional.huber_loss}


def is_ppo_checkpoint(ckpt: dict) -> bool:
    """Whether ``ckpt`` was written by PPO (an actor to become a teacher), not by a distillation run."""
    return "actor_state_dict" in ckpt and "student_state_dict" not in ckpt


class Distillation:
    """Behaviour cloning of a frozen teacher into a (possibly recurrent) student.

    Args (rsl_rl's, in its order, then rlcore's):
        student: student model (obs set "student"); with a ``distribution_cfg`` it acts stochastically,
            without one it acts with its deterministic output. A student with a state estimator (``estimator_cfg``)
            trains it here too: ``loss_coef * MSE(estimate, target groups)`` joins each step's loss (logged as
            ``estimator``), so a deployed student can close a loop on its estimate
            (:mod:`rlcore_tasks.go2.command_integral`).
        teacher: teacher model (obs set "teacher"), loaded from a PPO checkpoint's actor and frozen. It only
            ever gives its deterministic output, so its distribution's ``init_std`` does not matter (0 is fine).
        storage: rollout storage of type "distillation".
        num_learning_epochs: replays of the rollout per update.
        gradient_length: steps accumulated per optimiser step (truncated BPTT window). The step's loss is the
            sum of the window's per-step losses, as in rsl_rl (so with SGD, and against ``max_grad_norm``, the
            gradient grows with the window). A last, shorter window at the end of an epoch is applied too.
        learning_rate, max_grad_norm: optimisation settings.
        learning_rate_schedule: the learning rate over learning iterations, ``[[iteration, lr], ...]`` (linear
            between points, ``learning_rate`` before the first; :meth:`set_iteration`). A decay towards the end
            lowers the imitation error left by the optimiser's noise on a fixed-size rollout.
        loss_type: "mse" or "huber".
        optimizer: "adam", "adamw", "sgd" or "rmsprop".
        use_mixed_precision / use_bf16: bf16 autocast for the student's forward passes.
        num_env_groups: the environments are split into this many equal groups, each replayed through the
            rollout on its own (from its own start states), so an update takes ``num_env_groups`` times as many
            optimiser steps on batches of ``num_envs / num_env_groups`` (1: all environments in every step, as
            rsl_rl). The student sees the same data; it gets more, smaller, steps.
        start_weight, start_steps: the loss of an environment in its first ``start_steps`` steps after a reset
            counts ``start_weight`` times (the step's loss is then the weighted mean over the environments). A
            recurrent student starts an episode from empty memory, and an episode's first second is a small share of
            the rollout; weighting it trains the start transient a deployed robot goes through (1.0: unweighted,
            rsl_rl's loss).
        forget_prob: per environment and step, the probability that the student's memory is cleared without an env
            reset (as if the episode started there; the update replays the same clears, and ``start_weight`` counts
            the steps since them). A recurrent student otherwise meets empty memory only at episode starts, a few
            percent of its data; clearing it at random trains acting from empty memory in every state the rollout
            visits (0: never, rsl_rl's behaviour; 0.005 clears it every 4 s on average at Go2's 50 Hz).
    """

    teacher_loaded: bool = False
    """Whether the teacher's weights were loaded (``learn`` refuses to start without them)."""

    def __init__(
        self,
        student: MLPModel,
        teacher: MLPModel,
        storage: RolloutStorage,
        num_learning_epochs: int = 1,
        gradient_length: int = 15,
        learning_rate: float = 1e-3,
        max_grad_norm: float | None = None,
        loss_type: str = "mse",
        optimizer: str = "adam",
        use_mixed_precision: bool = False,
        device: str = "cpu",
        multi_gpu_cfg: dict | None = None,
        grad_reduce_bucket_mb: float = 25.0,
        use_bf16: bool = False,
        rnd_cfg: dict | None = None,
        symmetry_cfg: dict | None = None,
        learning_rate_schedule: Sequence[Sequence[float]] | None = None,
        num_env_groups: int = 1,
        start_weight: float = 1.0,
        start_steps: int = 50,
        forget_prob: float = 0.0,
    ) -> None:
        for key, word, value in (("rnd_cfg", "RND", rnd_cfg), ("symmetry_cfg", "symmetry", symmetry_cfg)):
            if value is not None:
                raise ConfigError(f"Distillation does not support the {word} extension ({key} is set); remove it or "
                                  "use algorithm=ppo.")
        if loss_type not in _LOSSES:
            raise ConfigError(f"Unknown distillation loss_type '{loss_type}'. Valid: {', '.join(_LOSSES)}.")
        if int(gradient_length) < 1:
            raise ConfigError(f"gradient_length must be >= 1, got {gradient_length}.")
        if int(num_env_groups) < 1 or storage.num_envs % int(num_env_groups):
            raise ConfigError(f"num_env_groups ({num_env_groups}) must be >= 1 and divide the number of "
                              f"environments ({storage.num_envs}).")
        if not float(start_weight) > 0.0 or int(start_steps) < 1:
            raise ConfigError(f"start_weight ({start_weight}) must be > 0 and start_steps ({start_steps}) >= 1.")
        if not 0.0 <= float(forget_prob) < 1.0:
            raise ConfigError(f"forget_prob ({forget_prob}) must be in [0, 1).")
        self.device = device
        self.student, self.teacher, self.storage = student, teacher, storage
        self.teacher.eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.teacher_loaded = False
        self.num_learning_epochs, self.gradient_length = num_learning_epochs, int(gradient_length)
        self.num_env_groups = int(num_env_groups)
        self.start_weight, self.start_steps = float(start_weight), int(start_steps)
        self.forget_prob = float(forget_prob)
        # Steps since each env's last reset [N] (0 at construction; a resume restores them: rank_state_dict), and
        # their values at the start of the stored rollout, from which the update replays the ages.
        self.episode_steps = torch.zeros(storage.num_envs, dtype=torch.long, device=device)
        self.rollout_start_steps = self.episode_steps.clone()
        self.learning_rate, self.max_grad_norm = learning_rate, max_grad_norm
        self.loss_fn = _LOSSES[loss_type]
        self.use_mixed_precision = bool(use_mixed_precision or use_bf16)  # bf16 autocast for the student
        self.use_bf16 = self.use_mixed_precision
        self.is_multi_gpu = multi_gpu_cfg is not None and int(multi_gpu_cfg.get("world_size", 1)) > 1
        self.gpu_global_rank = int((multi_gpu_cfg or {}).get("global_rank", 0))
        self.gpu_world_size = int((multi_gpu_cfg or {}).get("world_size", 1))
        self.num_updates = 0
        self.grad_reduce_bucket_mb = grad_reduce_bucket_mb
        self.optimizer = resolve_optimizer(optimizer)(list(student.parameters()), lr=learning_rate)
        self.initial_learning_rate = float(learning_rate)
        self.learning_rate_schedule = check_schedule(learning_rate_schedule, "learning_rate_schedule")
        self.transition = RolloutStorage.Transition()
        # Recurrent states at the start of the current rollout, to replay it in the update.
        self.rollout_start_states: tuple[HiddenState, HiddenState] = (None, None)
        self._rollout_started = False

    def set_iteration(self, iteration: int) -> None:
        """The learning rate of ``learning_rate_schedule`` at learning iteration ``iteration`` (the runner calls this
        before each rollout; a function of the iteration alone, so a resume continues it exactly)."""
        if not self.learning_rate_schedule:
            return
        scheduled = piecewise_linear(self.learning_rate_schedule, iteration)
        self.learning_rate = self.initial_learning_rate if scheduled is None else scheduled
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    @property
    def last_hidden_states(self) -> tuple[HiddenState, HiddenState]:
        """rsl_rl's name: the (student, teacher) hidden states the stored rollout starts from."""
        return self.rollout_start_states

    # ====================================================================== collection
    def act(self, obs: TensorDict) -> torch.Tensor:
        """Student samples actions ``[N, A]``; the teacher labels the same observations."""
        if not self._rollout_started:
            self.rollout_start_states = (_clone(self.student.get_hidden_state()), _clone(self.teacher.get_hidden_state()))
            self.rollout_start_steps = self.episode_steps.clone()
            self._rollout_started = True
        t = self.transition
        t.actions = self.student(obs, stochastic_output=True).detach()
        with torch.no_grad():
            t.privileged_actions = self.teacher(obs)
        t.observations = obs
        return t.actions

    def process_env_step(self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict) -> None:
        """Store the step; clear the memories of the envs that ended (the student's also where ``forget_prob``
        draws a clear: the stored ``dones`` mark where the student's memory restarts, which the update replays)."""
        t = self.transition
        memory_dones = dones
        if self.forget_prob > 0.0:
            forget = torch.rand(dones.shape, device=dones.device) < self.forget_prob
            memory_dones = (dones.bool() | forget).to(dones.dtype)
        t.rewards, t.dones = rewards, memory_dones
        self.storage.add_transition(t)
        t.clear()
        self.observe_dones(memory_dones)
        self.student.reset(memory_dones)
        self.teacher.reset(dones)

    def observe_dones(self, dones: torch.Tensor) -> None:
        """Advance the steps-since-reset counters by one env step (``dones [N]``: where an episode, or the student's
        memory, restarts). Every env step counts, the runner's normaliser warm-up steps included, so that the
        counters are each env's age in its episode."""
        self.episode_steps = (self.episode_steps + 1) * (dones.reshape(-1) == 0)

    def compute_returns(self, obs: TensorDict) -> None:
        """Nothing to compute: behaviour cloning needs no returns (kept for the common algorithm API)."""

    # ====================================================================== update
    def update(self) -> dict[str, float]:
        """Replay the rollout ``num_learning_epochs`` times; step the optimiser every ``gradient_length`` steps."""
        self.num_updates += 1
        end_states = (_clone(self.student.get_hidden_state()), _clone(self.teacher.get_hidden_state()))
        autocast = (torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16)
                    if self.use_bf16 else contextlib.nullcontext())
        estimator = getattr(self.student, "estimator", None)
        total, total_estimator, count = 0.0, 0.0, 0
        groups = torch.arange(self.storage.num_envs, device=self.device).chunk(self.num_env_groups)
        for _ in range(self.num_learning_epochs):
            for envs in groups:
                whole = len(groups) == 1  # all envs: no indexing (rsl_rl's update, bit for bit)
                self.student.reset(hidden_state=_select(self.rollout_start_states[0], None if whole else envs))
                ages = self.rollout_start_steps if whole else self.rollout_start_steps[envs]  # [n] steps since reset
                window_loss, window_len = 0.0, 0
                for batch in self.storage.generator():
                    obs, target = batch.observations, batch.privileged_actions
                    dones = batch.dones.reshape(-1).bool()
                    if not whole:
                        obs, target, dones = obs[envs], target[envs], dones[envs]
                    with autocast:
                        actions = self.student(obs)
                        loss = self._loss(actions.float(), target, ages)
                    window_loss = window_loss + loss
                    total += loss.item()
                    if estimator is not None:  # supervised state estimate (true value from the rollout's obs)
                        mse = self.student.estimator_loss(obs, self.student.last_estimate.float())
                        window_loss = window_loss + estimator.loss_coef * mse
                        total_estimator += mse.item()
                    window_len += 1
                    count += 1
                    if window_len == self.gradient_length:
                        self._step(window_loss)
                        window_loss, window_len = 0.0, 0
                    ages = (ages + 1) * ~dones
                    self.student.reset(dones)
                    self.student.detach_hidden_state(dones)
                if window_len > 0:  # the last, partial window counts too
                    self._step(window_loss)
        # Continue collecting from where the rollout left off; the next rollout starts there.
        self.student.reset(hidden_state=end_states[0])
        self.teacher.reset(hidden_state=end_states[1])
        self._rollout_started = False
        sync = self.is_multi_gpu
        self.student.update_normalization(self.storage.observations, sync=sync)
        self.storage.clear()
        losses = {"behavior": total / max(count, 1), "learning_rate": self.learning_rate}
        if estimator is not None:
            losses["estimator"] = total_estimator / max(count, 1)
        return losses

    def _loss(self, actions: torch.Tensor, target: torch.Tensor, ages: torch.Tensor) -> torch.Tensor:
        """The step's imitation loss over ``[n, A]`` actions: the plain mean, or with ``start_weight`` the mean of the
        per-env losses weighted by ``start_weight`` where ``ages`` (steps since reset, ``[n]``) < ``start_steps``."""
        if self.start_weight == 1.0:
            return self.loss_fn(actions, target)
        per_env = self.loss_fn(actions, target, reduction="none").mean(dim=-1)  # [n]
        weights = torch.where(ages < self.start_steps, self.start_weight, 1.0).to(per_env.dtype)
        return (weights * per_env).sum() / weights.sum()

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = list(self.student.parameters())
        if self.is_multi_gpu:
            all_reduce_mean_grads(params, self.grad_reduce_bucket_mb)
        if self.max_grad_norm:
            nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        self.optimizer.step()
        self.student.detach_hidden_state()

    # ====================================================================== modes, policy, persistence
    def train_mode(self) -> None:
        self.student.train()
        self.teacher.eval()  # frozen: its normaliser never updates

    def eval_mode(self) -> None:
        self.student.eval()
        self.teacher.eval()

    def get_policy(self) -> MLPModel:
        return self.student

    def update_normalization(self, obs: TensorDict) -> None:
        """Merge observations into the student's normaliser (the teacher's statistics are frozen)."""
        self.student.update_normalization(obs, sync=self.is_multi_gpu)

    def save(self) -> dict:
        return {
            "student_state_dict": self.student.state_dict(),
            "teacher_state_dict": self.teacher.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict(),
            "learning_rate": self.learning_rate,
            "num_updates": self.num_updates,
        }

    def rank_state_dict(self) -> dict:
        """This rank's per-env state (:mod:`rlcore.runners.run_state`): the steps since each env's reset."""
        return {"episode_steps": self.episode_steps.clone()}

    def load_rank_state_dict(self, state: dict) -> None:
        """Restore :meth:`rank_state_dict`'s output (same number of envs; an older checkpoint's update count, which
        it kept here, is read too)."""
        steps = torch.as_tensor(state["episode_steps"]).to(self.device)
        if steps.shape != self.episode_steps.shape:
            raise ConfigError(f"the saved steps-since-reset counters are for {steps.numel()} envs; this run has "
                              f"{self.episode_steps.numel()}")
        self.episode_steps = steps.clone()
        self.rollout_start_steps = self.episode_steps.clone()
        self.num_updates = int(state.get("num_updates", self.num_updates))

    def load(self, loaded_dict: dict, load_cfg: dict | None = None, strict: bool = True) -> bool:
        """Load a distillation checkpoint (student, teacher, optimiser: a full resume), or a PPO checkpoint,
        whose actor becomes the teacher. Returns whether the iteration counter should be restored."""
        state = loaded_dict
        is_ppo = is_ppo_checkpoint(state)
        # ``load_cfg`` overrides these defaults part by part (e.g. {"optimizer": False} still loads the models).
        defaults = {"teacher": True} if is_ppo else {"student": True, "teacher": True, "optimizer": True}
        load_cfg = {**defaults, **(load_cfg or {})}
        if load_cfg.get("teacher"):
            teacher_state = state["actor_state_dict"] if is_ppo else state["teacher_state_dict"]
            load_model_state(self.teacher, teacher_state, "teacher", strict)
            self.teacher_loaded = True
        if load_cfg.get("student"):
            load_model_state(self.student, state["student_state_dict"], "student", strict)
        if load_cfg.get("optimizer") and "optimizer_state_dict" in state:
            self.optimizer.load_state_dict(state["optimizer_state_dict"])
        resumed = bool(load_cfg.get("student") and load_cfg.get("optimizer"))
        if resumed and "num_updates" in state:
            self.num_updates = int(state["num_updates"])
        return resumed

    def broadcast_parameters(self) -> None:
        broadcast_tensors(t for m in (self.student, self.teacher) for t in m.state_dict().values())

    def reduce_parameters(self) -> None:
        all_reduce_mean_grads(list(self.student.parameters()), self.grad_reduce_bucket_mb)

    def compile(self, mode: str | None = None) -> None:
        """``torch.compile`` the student's and teacher's MLP heads in place (``None``: nothing to do); see
        :func:`rlcore.utils.compile.compile_mlp_heads`."""
        compile_mlp_heads((self.student, self.teacher), mode)

    @staticmethod
    def construct_algorithm(obs: TensorDict, env: VecEnv, cfg: dict, device: str) -> Distillation:
        """Build student, teacher, storage and the algorithm from the train config (``cfg["obs_groups"]`` is
        replaced by its resolved form)."""
        built = dict(cfg)
        teacher = built.get("teacher")
        dist_cfg = teacher.get("distribution_cfg") if isinstance(teacher, dict) else None
        if isinstance(dist_cfg, dict) and "init_std" in dist_cfg and not float(dist_cfg["init_std"]) > 0.0:
            # rsl_rl configs often give the teacher init_std 0: it never samples, and its std comes with the
            # PPO checkpoint, so any positive value builds the same teacher.
            built["teacher"] = {**teacher, "distribution_cfg": {**dist_cfg, "init_std": 1.0}}
        alg = construct_distillation(obs, env, built, device)
        cfg["obs_groups"] = built["obs_groups"]
        return alg


def load_model_state(model: nn.Module, state: dict, name: str, strict: bool = True) -> None:
    """``load_state_dict`` with one clear line on mismatch: which keys are missing, unexpected or mis-shaped.

    A PPO actor's distribution parameters (its std) are ignored when the target model has no distribution.
    """
    own = model.state_dict()
    state = {k: v for k, v in state.items() if k in own or not k.startswith("distribution.")}
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
              for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if shapes or (strict and (missing or unexpected)):
        parts = []
        if shapes:
            parts.append("shape mismatch " + "; ".join(shapes[:4]) + (" ..." if len(shapes) > 4 else ""))
        if missing:
            parts.append(f"missing in checkpoint {missing[:6]}")
        if unexpected:
            parts.append(f"not in model {unexpected[:6]}")
        raise ConfigError(f"Checkpoint does not match the {name} model ({type(model).__name__}): " + "; ".join(parts)
                         + ". Check the model type, sizes and obs_groups against the run that wrote it.")
    model.load_state_dict(state, strict=strict)


def _select(state: HiddenState, envs: torch.Tensor | None) -> HiddenState:
    """A detached copy of a hidden state ``[layers, N, H]`` (or LSTM pair), of the envs ``envs`` only (None: all)."""
    if state is None or envs is None:
        return _clone(state)
    if isinstance(state, tuple):
        return tuple(s[:, envs].detach().clone() for s in state)  # type: ignore[return-value]
    return state[:, envs].detach().clone()


def _clone(state: HiddenState) -> HiddenState:
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.detach().clone() for s in state)  # type: ignore[return-value]
    return state.detach().clone()
