"""What the bench scripts share: their preamble, and the helpers more than one of them uses.

Every script imports this module first (``import _common`` before anything that may load torch; ``bench/`` is
``sys.path[0]`` when a script runs as ``python bench/<x>.py``, and the bench tests put it there):

- ``OMP_WAIT_POLICY=PASSIVE`` unless set (idle OpenMP threads must not busy-wait between small kernels), inherited
  by the subprocesses a script starts;
- the repository root first on ``sys.path``, so a checkout runs without being installed.

Helpers (imports inside the functions: a script that needs no torch, such as ``learner.py``'s parent process, never
loads it):

- learner sizes, cases, the zero-cost env and its runners (``learner.py``, ``learner_step_ab.py``);
- ``floor_loss``, the bare-PyTorch PPO loss (``learner.py``, ``learner_step_ab.py``, ``go2_update.py``);
- ``go2_training``, ``evaluate``, ``with_policy`` and the walking rule's defaults (``time_to_walk.py``,
  ``time_to_walk_vs_rsl_rl.py``, ``teacher_student.py``, ``go2_update.py``, ``video_overhead.py``, ``cnn_update.py``);
- ``ROBOTS`` and ``probe_env``, a checkpoint's Go2 task with commands held (``noise_gap.py``,
  ``command_integral.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: no busy-waiting threads

import argparse
import contextlib
import copy
import io
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))


def default_threads() -> int:
    """The cores this process may run on (the default of the ``--threads`` options that spawn workers)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# ============================================================================ learner cases (zero-cost env)
ACTOR_OBS, PRIVILEGED_OBS, NUM_ACTIONS, STEPS = 48, 187, 12, 24
EPOCHS, MINI_BATCHES = 5, 4
EPISODE_LENGTH = 1000  # time-out period of the zero-cost env (learner.py's --episode-length)
CASES: dict[str, dict] = {
    "mlp": {"num_envs": 4096, "model": "mlp", "hidden_dims": [512, 256, 128], "iterations": 3},
    "mlp_1024": {"num_envs": 1024, "model": "mlp", "hidden_dims": [512, 256, 128], "iterations": 5},
    "rnn": {"num_envs": 4096, "model": "rnn", "hidden_dims": [256, 128], "rnn_hidden_dim": 256, "iterations": 3},
}
"""Benchmark cases of ``learner.py``; ``iterations`` is the default number of measured iterations (after
``--warmup``)."""
TINY_ENV_DIVISOR = 256  # --tiny: 16 envs for the 4096-env cases, 8 for mlp_1024


def case_settings(name: str, args: argparse.Namespace) -> dict:
    """The case's settings after ``--tiny`` and ``--iterations``."""
    case = dict(CASES[name])
    if args.tiny:
        case["num_envs"] = max(case["num_envs"] // TINY_ENV_DIVISOR, 8)
        case["iterations"] = 2
    if args.iterations is not None:
        case["iterations"] = args.iterations
    return case


def zero_cost_env(num_envs: int, episode_length: int, device: str):
    """A VecEnv without physics (see ``learner.py``'s docstring); built lazily so the parent never imports torch."""
    import torch
    from tensordict import TensorDict

    from rlcore.env import VecEnv

    class ZeroCostEnv(VecEnv):
        """Cycles through ``pool`` pre-generated observation/reward sets; episodes end by time-out only."""

        def __init__(self, pool: int = 4, seed: int = 0) -> None:
            self.num_envs, self.num_actions, self.max_episode_length = num_envs, NUM_ACTIONS, episode_length
            self.device = torch.device(device)
            self.cfg = {"num_envs": num_envs, "max_episode_length": episode_length}
            g = torch.Generator(device="cpu").manual_seed(seed)
            dims = {"policy": ACTOR_OBS, "privileged": PRIVILEGED_OBS}
            self._obs = [TensorDict({k: torch.randn(num_envs, d, generator=g) for k, d in dims.items()},
                                    batch_size=[num_envs]).to(self.device) for _ in range(pool)]
            self._rew = [torch.randn(num_envs, generator=g).to(self.device) for _ in range(pool)]
            self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
            self._i = 0

        def get_observations(self) -> TensorDict:
            return self._obs[self._i]

        def step(self, actions: torch.Tensor):
            self._i = (self._i + 1) % len(self._obs)
            self.episode_length_buf += 1
            time_outs = self.episode_length_buf >= self.max_episode_length
            self.episode_length_buf.masked_fill_(time_outs, 0)
            return self._obs[self._i], self._rew[self._i], time_outs, {"time_outs": time_outs}

    return ZeroCostEnv()


def train_cfg(case: dict) -> dict:
    """The rsl_rl 5.x train config of a case (rlcore reads the same format)."""
    model = {"hidden_dims": case["hidden_dims"], "activation": "elu", "obs_normalization": True}
    if case["model"] == "rnn":
        model.update(class_name="RNNModel", rnn_type="lstm", rnn_hidden_dim=case["rnn_hidden_dim"], rnn_num_layers=1)
    else:
        model["class_name"] = "MLPModel"
    return {
        "seed": 1,
        "num_steps_per_env": STEPS,
        "save_interval": 10**9,
        "logger": "tensorboard",  # nothing is written: log_dir is None
        "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
        "actor": {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": dict(model),
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": EPOCHS, "num_mini_batches": MINI_BATCHES,
            "learning_rate": 1e-3, "schedule": "adaptive", "desired_kl": 0.01, "clip_param": 0.2, "gamma": 0.99,
            "lam": 0.95, "value_loss_coef": 1.0, "entropy_coef": 0.01, "max_grad_norm": 1.0,
            "use_clipped_value_loss": True, "rnd_cfg": None, "symmetry_cfg": None,
        },
    }


def make_runner(library: str, case: dict, args: argparse.Namespace):
    """``library``'s OnPolicyRunner on a zero-cost env of ``case`` (``args``: ``episode_length``, ``device``, and
    optionally ``compile``)."""
    if library.startswith("rlcore"):
        from rlcore.runners import OnPolicyRunner
    else:
        from rsl_rl.runners import OnPolicyRunner
    env = zero_cost_env(case["num_envs"], args.episode_length, args.device)
    cfg = train_cfg(case)
    if library.startswith("rlcore") and getattr(args, "compile", False):
        cfg["algorithm"]["torch_compile"] = True
    if library == "rlcore_plain":
        cfg["keep_cpu_memory"] = False
    elif library == "rlcore":
        # The bench steps learn(1) at a time; a training run's learn(N) holds kept CPU memory across its N iterations
        # (released at its end). This process-long hold is the same: the runner's own holds nest inside it.
        from rlcore.utils.cpu_memory import keep_freed_cpu_memory

        keep_freed_cpu_memory()
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints its models
        return OnPolicyRunner(env, cfg, None, args.device)


def floor_loss(mean, std, actions, old_log_prob, advantages, values, old_values, returns, clip: float = 0.2,
               value_coef: float = 1.0, entropy_coef: float = 0.01):
    """The floor's PPO loss on one mini-batch ``[b]`` (``mean``/``actions`` ``[b, A]``, ``std`` ``[A]``): Gaussian
    log-prob and entropy in closed form, clipped surrogate and clipped value loss (the floors of ``learner.py``,
    ``learner_step_ab.py`` and ``go2_update.py``)."""
    import torch

    half_log_2pi, log_std = 0.5 * math.log(2 * math.pi), std.log()
    log_prob = (-0.5 * ((actions - mean) / std).square() - log_std - half_log_2pi).sum(-1)
    entropy = (0.5 + half_log_2pi + log_std).sum()
    ratio = torch.exp(log_prob - old_log_prob)
    surrogate = torch.max(-advantages * ratio, -advantages * ratio.clamp(1.0 - clip, 1.0 + clip)).mean()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    value_loss = torch.max((values - returns).square(), (clipped - returns).square()).mean()
    return surrogate + value_coef * value_loss - entropy_coef * entropy


# ============================================================================ Go2 training and the walking rule
WALK_RULE = {"budget_min": 15.0, "threshold": 0.25, "eval_every": 10, "eval_envs": 256}
"""Defaults of ``time_to_walk.py``'s stopping rule (training minutes at most, eval tracking error target [m/s],
iterations between evaluations, envs of the evaluation), shared by the scripts that apply it."""


def go2_training(seed: int, overrides: list[str], threads: int | None = None) -> tuple:
    """``(cfg, train_cfg, env_kwargs, env)`` of a ``task=go2`` run (the default config plus ``overrides``, no
    logger, no console log): the composed Hydra config, the runner's train config, the task's env settings and
    the training env, with the global generators seeded as ``rlcore.train`` seeds them."""
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rlcore.checkpoint.io import seed_everything
    from rlcore.env.task import make_task
    from rlcore.train import build_train_cfg

    if threads:
        torch.set_num_threads(threads)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["task=go2", "logger=none", f"seed={seed}", "runner.log_interval=1000000",
                                           *overrides])
    seed_everything(seed)
    train_cfg = build_train_cfg(cfg)
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    env = make_task(cfg.task.name, num_envs=int(cfg.task.num_envs), device="cpu", seed=seed, **env_kwargs)
    return cfg, train_cfg, env_kwargs, env


def evaluate(actor, env, source_env=None, warmup_steps: int = 50, steps: int = 200) -> float:
    """Mean planar tracking error of the deterministic ``actor`` over ``steps`` after ``warmup_steps``.

    The runner's evaluation (``rlcore.runners.evaluation``, what ``runner.keep_best=lin_vel_error`` and
    ``runner.stop_at`` use): Go2's per-step ``lin_vel_error_now`` from fresh resets, on the robots of the training
    env ``source_env``'s curriculum at that point (None: ``env``'s own), the same draw at every call at the same
    curriculum point, the global generators left as they were.
    """
    from rlcore.runners.evaluation import Evaluation

    cached = _EVALUATIONS.get(id(env))
    key = (warmup_steps, steps, source_env)
    if cached is None or cached[0] is not env or \
            (cached[1].warmup_steps, cached[1].num_steps, cached[1].source_env) != key:
        cached = _EVALUATIONS[id(env)] = (env, Evaluation(env, ["lin_vel_error"], steps, warmup_steps,
                                                          source_env=source_env))
    return cached[1](actor)["lin_vel_error"]


_EVALUATIONS: dict[int, tuple] = {}  # id(env) -> (env, its Evaluation): one fixed scenario per env


def with_policy(runner, fn, *args):
    """``fn(actor, *args)`` with the runner's live policy in eval mode; its mode and recurrent state restored after."""
    actor = runner.alg.get_policy()
    was_training = actor.training
    hidden = actor.get_hidden_state() if getattr(actor, "is_recurrent", False) else None
    actor.eval()
    try:
        return fn(actor, *args)
    finally:
        actor.train(was_training)
        if hidden is not None:
            actor.reset(hidden_state=hidden)


# ============================================================================ a checkpoint's Go2 task, commands held
ROBOTS = ("nominal", "training")


def probe_env(info, num_envs: int, seed: int, robots: str = "nominal"):
    """The checkpoint's Go2 task with commands held (no heading control, no resampling) and no pushes. ``robots``:
    ``"nominal"``, the task's robot without randomisation or observation noise; ``"training"``, the checkpoint's
    own randomisation and observation noise and its very robot pool (saved with its env state), every env on a robot
    drawn from the whole pool, as at the end of the curriculum. Envs are not reset by the probe itself: a fall or a
    time-out restarts that env on another robot of the pool."""
    from rlcore.env.task import make_task
    from rlcore_tasks.go2.config import held_commands, no_randomization

    if info.task.get("name") != "go2":
        raise SystemExit(f"error: {info.checkpoint} was trained on task {info.task.get('name')!r}; this bench runs go2")
    if robots not in ROBOTS:
        raise ValueError(f"robots={robots!r}: valid: {', '.join(ROBOTS)}")
    kw = copy.deepcopy(dict(info.task.get("env") or {}))
    if robots == "nominal":
        kw["domain_rand"] = {**kw.get("domain_rand", {}), **no_randomization()}
        kw["obs"] = {**kw.get("obs", {}), "add_noise": False}
    else:
        kw["domain_rand"] = {**kw.get("domain_rand", {}), "push_robots": False}
    kw["commands"] = {**kw.get("commands", {}), **held_commands()}
    env = make_task("go2", num_envs=num_envs, device="cpu", seed=seed, **kw)
    if robots == "training":
        state = info.ckpt.get("env_state") or {}
        if "physical_variants" in state:  # the run's own pool (a checkpoint without env state: one drawn alike)
            env.use_robot_pool(state["physical_variants"])
        env.common_step_counter = max(env.common_step_counter, int(env.cfg_task.domain_rand.curriculum_steps))
        env.reset()  # every env on a robot of the whole pool
    return env
