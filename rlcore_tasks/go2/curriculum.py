"""Curricula of the Go2 task, and how an env adopts another's.

- Domain randomisation (``domain_rand.curriculum_steps``): progress = env steps / curriculum_steps in [0, 1];
  a reset draws its physical variant among the first ``ceil(num_variants * progress)`` of the graded pool, and
  sensor-bias amplitudes grow with progress (:mod:`rlcore_tasks.go2.resets`).
- Terrain levels (rough terrain): at a reset an env moves up after walking over half a tile, down after covering
  under half its commanded distance (:meth:`~rlcore_tasks.go2.terrain.Terrain.update_curriculum`).
- Reward weights (``rewards.weight_schedule``): piecewise-linear in the env's step counter.

:func:`curriculum_state` / :func:`set_curriculum` / :func:`continue_curriculum` carry the step counter, the
terrain levels and the robot pool from one env (or a checkpoint) to another.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from rlcore.env import ConfigError
from rlcore.utils.schedule import check_schedule, piecewise_linear
from rlcore_tasks.go2.randomization import Variant
from rlcore_tasks.go2.rewards import REWARD_TERMS

if TYPE_CHECKING:
    from rlcore_tasks.go2.env import Go2Env


# ------------------------------------------------------------------ domain randomisation
def randomization_progress(env: Go2Env) -> float:
    """How far the domain-randomisation curriculum is, in [0, 1] (1 without a curriculum)."""
    steps = env.cfg_task.domain_rand.curriculum_steps
    return 1.0 if steps <= 0 else min(1.0, env.common_step_counter / steps)


def allowed_variants(env: Go2Env, progress: float) -> int:
    """How many of the sim's variants (the graded pool's first, mildest ones) a reset may draw from now."""
    allowed = env.sim.num_variants
    if env.cfg_task.domain_rand.curriculum_steps > 0:
        allowed = min(allowed, max(1, math.ceil(allowed * progress)))
    return allowed


# ------------------------------------------------------------------ terrain levels
def update_terrain_levels(env: Go2Env, env_ids: torch.Tensor) -> None:
    """Move the ending episodes of ``env_ids`` up or down a terrain level by the distance walked against the
    distance commanded (call after the episode statistics of ``env_ids`` were recorded)."""
    if hasattr(env, "base_pos"):  # not at construction, before the first state
        walked = torch.norm(env.base_pos[env_ids, :2] - env.spawn_xy[env_ids], dim=1)
        commanded = env._last_episode["commanded_distance"][env_ids].nan_to_num(0.0)
        env.terrain.update_curriculum(env_ids, walked, commanded)


# ------------------------------------------------------------------ reward weights
def check_weight_schedule(schedule: dict) -> dict[str, list[tuple[int, float]]]:
    """``rewards.weight_schedule`` as ``{term: [(env_step, weight), ...]}``; an unknown term is named."""
    unknown = sorted(set(schedule) - set(REWARD_TERMS))
    if unknown:
        raise ConfigError(f"go2.rewards.weight_schedule: unknown reward term(s) {', '.join(unknown)}; valid: "
                          f"{', '.join(REWARD_TERMS)}")
    return {name: check_schedule(points, f"go2.rewards.weight_schedule.{name}", unit="env step", positive=False)
            for name, points in schedule.items() if points}


def reward_weight(env: Go2Env, name: str) -> float:
    """Term ``name``'s weight per second now: ``rewards.weights``, or its ``weight_schedule`` at the env's step
    counter."""
    points = env.weight_schedule.get(name)
    scheduled = piecewise_linear(points, env.common_step_counter) if points else None
    return float(env.cfg_task.rewards.weights.get(name, 0.0) if scheduled is None else scheduled)


# ------------------------------------------------------------------ carrying curricula between envs
def variant_state(variant: Variant) -> dict:
    """A :class:`Variant` as plain Python values (``torch.load(weights_only=True)`` reads them back)."""
    def plain(v):
        if isinstance(v, (tuple, list, np.ndarray)):
            return [plain(x) for x in v]
        return v.item() if isinstance(v, np.generic) else v
    return {k: plain(v) for k, v in dataclasses.asdict(variant).items()}


def variant_from_state(d: dict) -> Variant:
    return Variant(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def check_state(env: Go2Env, state: dict, same_num_envs: bool) -> None:
    """Refuse an env state saved by another task (or, with ``same_num_envs``, with another env count)."""
    if state.get("task") != type(env).__name__ or (same_num_envs and int(state.get("num_envs", -1)) != env.num_envs):
        raise ConfigError(f"env state is for task {state.get('task')} with num_envs={state.get('num_envs')}; "
                          f"this is {type(env).__name__} with num_envs={env.num_envs}")


def use_robot_pool(env: Go2Env, physical_variants: list[dict]) -> None:
    """Replace the pool of physical variants with a saved one (``state_dict()["physical_variants"]``)."""
    physical = [variant_from_state(d) for d in physical_variants]
    if physical != env.sim.physical:
        env.sim.set_physical_variants(physical)
        env.update_variant_params()


def curriculum_state(env: Go2Env) -> dict:
    """The step counter, the terrain levels and the robot pool (see :meth:`Go2Env.curriculum_state`)."""
    return {"task": type(env).__name__, "num_envs": env.num_envs,
            "common_step_counter": env.common_step_counter,
            "terrain_levels": env.terrain.levels.clone(),
            "physical_variants": [variant_state(v) for v in env.sim.physical]}


def _draw_levels(env: Go2Env, levels: torch.Tensor) -> None:
    """Every env draws its terrain level from ``levels`` (another env's) with this env's generator."""
    pick = torch.randint(0, levels.numel(), (env.num_envs,), generator=env.generator, device=env.device)
    env.terrain.levels = levels[pick].clamp(0, env.terrain.num_levels - 1).long()


def set_curriculum(env: Go2Env, state: dict) -> None:
    """Adopt another env's :func:`curriculum_state` (see :meth:`Go2Env.set_curriculum`)."""
    check_state(env, state, same_num_envs=False)
    use_robot_pool(env, state["physical_variants"])
    env.common_step_counter = int(state["common_step_counter"])
    levels = torch.as_tensor(state["terrain_levels"]).to(env.device)
    if not env.terrain.is_flat and levels.numel() > 0:
        _draw_levels(env, levels)


def continue_curriculum(env: Go2Env, state: dict) -> bool:
    """Start ``env``'s curricula where a saved run left them and reset every env (see
    :meth:`Go2Env.continue_curriculum`); returns whether anything changed."""
    check_state(env, state, same_num_envs=False)
    counter = int(state["common_step_counter"])
    saved_levels = torch.as_tensor(state["terrain_levels"]).to(env.device)
    moved_levels = not env.terrain.is_flat and saved_levels.numel() > 0 and bool(saved_levels.any())
    if counter == env.common_step_counter and not moved_levels:
        return False
    env.common_step_counter = counter
    if moved_levels:
        _draw_levels(env, saved_levels)
    env.reset()
    return True


__all__ = ["allowed_variants", "check_state", "check_weight_schedule", "continue_curriculum", "curriculum_state",
           "randomization_progress", "reward_weight", "set_curriculum", "update_terrain_levels", "use_robot_pool",
           "variant_from_state", "variant_state"]
