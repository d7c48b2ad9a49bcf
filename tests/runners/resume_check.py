"""The resume-equality check (issue 40), shared by the one-process test and the torchrun worker.

A run of ``N`` iterations is compared with one that stops after ``N/2`` and resumes from its checkpoint in a new
process state (new env, new runner, generators scrambled): the env steps of the last ``N/2`` iterations (actions in;
observations, rewards, dones out) must be bit-identical, and so must every piece of state reachable from the
runner at the end. :func:`snapshot` walks that state generically (every tensor, array, number and string held by
the runner, its env, simulator, algorithm, models, extensions, storage and logger, plus the global generators), so
a counter added later to any of them and not saved by its component fails the comparison by name.
"""

from __future__ import annotations

import collections
import inspect
import os
import random

import numpy as np
import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.checkpoint.io import get_rng_states
from rlcore.config import registry
from rlcore.config.cli import compose
from rlcore.train import prepare

NOT_RUN_STATE = {
    "t0": "wall clock of the console report",
    "tot_time": "wall-clock seconds spent training (logged, not used)",
    "_report": "the console report of the current learn() call",
    "writer": "the log writer (files on disk)",
    "_stopped": "the log writer last closed",
    "log_dir": "where the run writes",
    "_writes_checkpoints": "whether the run writes checkpoints",
    "git_status_repos": "paths stored with the code state",
    "_renderer": "an OpenGL renderer",
    "_render_data": "the renderer's scratch data",
    "_datas": "MuJoCo scratch data of the rollout threads (overwritten every step)",
    "_state_out": "scratch output of the rollout call (overwritten every step)",
    "_sensor_out": "scratch output of the rollout call (overwritten every step)",
}
"""Attribute names the walk skips, each with the reason it is not state a resume must restore."""

_SCALARS = (bool, int, float, str, type(None))


def snapshot(obj, path: str = "runner", out: dict | None = None, seen: set | None = None) -> dict:
    """``{attribute path: value}`` of every tensor, array, scalar and string reachable from ``obj``."""
    out = {} if out is None else out
    seen = set() if seen is None else seen
    if isinstance(obj, _SCALARS):
        out[path] = obj
        return out
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        out[path] = obj.detach().cpu().clone()
    elif isinstance(obj, np.ndarray):
        out[path] = torch.from_numpy(np.array(obj, copy=True))
    elif isinstance(obj, np.generic):
        out[path] = obj.item()
    elif isinstance(obj, TensorDict):
        snapshot(obj.to_dict(), path, out, seen)
    elif isinstance(obj, torch.Generator):
        out[path] = obj.get_state()
    elif isinstance(obj, torch.optim.Optimizer):
        snapshot(obj.state_dict(), path, out, seen)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            snapshot(value, f"{path}[{key!r}]", out, seen)
    elif isinstance(obj, (list, tuple, collections.deque)):
        for i, value in enumerate(obj):
            snapshot(value, f"{path}[{i}]", out, seen)
    elif isinstance(obj, nn.Module):
        for key, value in obj.state_dict().items():
            out[f"{path}.{key}"] = value.detach().cpu().clone()
        for key, value in vars(obj).items():
            if key in ("_parameters", "_buffers") or key.startswith("_forward") or key.endswith("_hooks") or \
                    key in NOT_RUN_STATE:
                continue
            if key == "_modules":
                for name, child in value.items():
                    snapshot(child, f"{path}.{name}", out, seen)
                continue
            snapshot(value, f"{path}.{key}", out, seen)
    elif type(obj).__module__.split(".")[0] in ("rlcore", "rlcore_tasks", "tests") or hasattr(obj, "__dataclass_fields__"):
        for key, value in vars(obj).items() if hasattr(obj, "__dict__") else ():
            if key not in NOT_RUN_STATE and not (inspect.isroutine(value) or isinstance(value, type)):
                snapshot(value, f"{path}.{key}", out, seen)
    return out


def with_generators(runner) -> dict:
    """The runner's snapshot plus the global generators (torch, numpy, Python)."""
    return {**snapshot(runner), **snapshot(get_rng_states(), "rng")}


def differences(a: dict, b: dict) -> list[str]:
    """The paths whose values differ between two snapshots (or exist in one only)."""
    diffs = [f"{k}: only in the {'uninterrupted' if k in a else 'resumed'} run" for k in sorted(a.keys() ^ b.keys())]
    diffs += [f"{k}: {_short(a[k])} vs {_short(b[k])}" for k in sorted(a.keys() & b.keys()) if not same(a[k], b[k])]
    return diffs


def same(x, y) -> bool:
    """Bit-equal values (NaN equals NaN, in the same places)."""
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or x.shape != y.shape or \
                x.dtype != y.dtype:
            return False
        if x.is_floating_point():
            return torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0))
        return torch.equal(x, y)
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (x != x and y != y)
    return type(x) is type(y) and x == y


def _short(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)} sum {float(v.double().nan_to_num().sum()):.6g}"
    return repr(v)[:80]


class StepRecorder:
    """Wraps ``env.step``: keeps every step's actions, observations, rewards and dones (CPU copies)."""

    def __init__(self, env) -> None:
        self.steps: list[dict] = []
        step = env.step

        def recording_step(actions):
            obs, rewards, dones, extras = step(actions)
            self.steps.append({"actions": actions.detach().cpu().clone(), "rewards": rewards.detach().cpu().clone(),
                               "dones": dones.detach().cpu().clone(),
                               **{f"obs/{k}": v.detach().cpu().clone() for k, v in obs.items()}})
            return obs, rewards, dones, extras

        env.step = recording_step


def go2_plan(algorithm: str, log_dir: str, teacher: str | None = None, extra: tuple[str, ...] = ()):
    """A default ``task=go2`` plan (``algorithm=ppo`` or ``distillation``), made small enough for a test: 12 envs,
    8-step rollouts, a domain-randomisation curriculum of 40 steps (so the resumed half runs past it), a checkpoint
    every iteration."""
    overrides = [f"algorithm={algorithm}", "task=go2", "task.num_envs=12", "runner.num_steps_per_env=8",
                 "runner.save_interval=1", "runner.normalizer_warmup_steps=8", "logger=none", "threads=1",
                 "+task.env.domain_rand.curriculum_steps=40", *extra]
    if teacher is not None:
        overrides.append(f"teacher={teacher}")
    plan = prepare(compose(overrides, return_hydra_config=True))
    return plan


def make_runner(plan, log_dir: str | None, rank: int = 0):
    """The task's env (seed + rank) and the plan's runner, as ``rlcore.train`` builds them."""
    from rlcore.env.task import make_task

    c = plan.cfg
    env = make_task(c["task"]["name"], num_envs=int(c["task"]["num_envs"]), device="cpu", seed=int(c["seed"]) + rank,
                    **dict(c["task"].get("env") or {}))
    runner_cls = registry.get("runner", registry.algorithm_traits(c["algorithm"]["class_name"]).runner).load()
    runner = runner_cls(env, plan.train_cfg, log_dir=log_dir, device="cpu")
    if plan.teacher_path is not None:
        runner.load(plan.teacher_path)
    return runner


def scramble_generators(seed: int) -> None:
    """Draw the global generators somewhere else, as a new process would be."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def run_pair(plan, log_dir: str, iterations: int, rank: int = 0) -> dict:
    """Train ``iterations`` uninterrupted into ``log_dir``, then resume from iteration ``iterations // 2 - 1``'s
    checkpoint and train to the same end. Returns both runs' recorded steps (the resumed half) and snapshots."""
    half = iterations // 2
    full = make_runner(plan, log_dir, rank)
    record_full = StepRecorder(full.env)
    full.learn(iterations, init_at_random_ep_len=True)
    end_full = with_generators(full)
    ckpt = os.path.join(log_dir, f"model_{half - 1}.pt")

    scramble_generators(1234 + rank)
    resumed = make_runner(plan, None, rank)
    resumed.load(ckpt)
    record_resumed = StepRecorder(resumed.env)
    resumed.learn(iterations - half, init_at_random_ep_len=True)
    end_resumed = with_generators(resumed)
    steps = len(record_resumed.steps)
    return {"full_steps": record_full.steps[-steps:], "resumed_steps": record_resumed.steps, "num_steps": steps,
            "full": end_full, "resumed": end_resumed, "checkpoint": ckpt}


def step_differences(full: list[dict], resumed: list[dict]) -> list[str]:
    """The first few (step, key) pairs whose values differ."""
    out = []
    for t, (a, b) in enumerate(zip(full, resumed)):
        out += [f"step {t}: {key}" for key in a if not same(a[key], b[key])]
    return out[:10]
