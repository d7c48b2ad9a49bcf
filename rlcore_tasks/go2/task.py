"""The Go2 tasks as rlcore's tools see them (:class:`rlcore.env.task.TaskSpec`): ``go2`` (flat) and ``go2_rough``.

Registered through the ``rlcore.tasks`` entry point in ``pyproject.toml`` (``go2 = "rlcore_tasks.go2.task:TASKS"``).
This module stays light: the env, the robustness grid and MuJoCo load when a tool uses them.
"""

from __future__ import annotations

from typing import Any

from rlcore.env import VecEnv
from rlcore.env.task import RobustnessSuite, TaskSpec
from rlcore_tasks.go2.pretrained import PRETRAINED

#: Probe commands of the robustness check: (name, (vx [m/s], vy [m/s], yaw rate [rad/s])) held from the start, or
#: (name, command, from_rest_s): a step from rest, zero command for from_rest_s seconds, then the command (its
#: rise time is measured; :mod:`rlcore.robustness`).
PROBE_COMMANDS: tuple[tuple[str, tuple[float, float, float]] | tuple[str, tuple[float, float, float], float], ...] = (
    ("vx_0.5", (0.5, 0.0, 0.0)), ("vx_1.0", (1.0, 0.0, 0.0)), ("vx_-0.5", (-0.5, 0.0, 0.0)),
    ("vx_-1.0", (-1.0, 0.0, 0.0)), ("vy_0.5", (0.0, 0.5, 0.0)), ("vy_-0.5", (0.0, -0.5, 0.0)),
    ("yaw_1.0", (0.0, 0.0, 1.0)), ("yaw_-1.0", (0.0, 0.0, -1.0)), ("zero", (0.0, 0.0, 0.0)),
    ("vx_0.7_yaw_0.5", (0.7, 0.0, 0.5)), ("vx_0.5_yaw_-1.0", (0.5, 0.0, -1.0)),
    ("step_yaw_1.0", (0.0, 0.0, 1.0), 1.0), ("step_vx_1.0", (1.0, 0.0, 0.0), 1.0),
)

#: Settings of the keyboard-driven viewer's env on top of the run's own (one robot, commands set by hand).
VIEWER_ENV = {"commands": {"heading_command": False, "resampling_time": 1.0e9},
              "domain_rand": {"push_robots": False}, "episode_length_s": 3600.0}


def make_go2(**kwargs: Any) -> VecEnv:
    from rlcore_tasks.go2.env import Go2Env  # MuJoCo: only when a Go2 env is built

    return Go2Env(**kwargs)


def make_go2_rough(**kwargs: Any) -> VecEnv:
    from rlcore_tasks.go2.env import Go2Env

    terrain = {"type": "rough", **kwargs.pop("terrain", {})}
    return Go2Env(terrain=terrain, **kwargs)


def env_from_interface(meta: dict) -> dict:
    """Go2 env settings for replaying an exported file: its actuation, timing, physics (solver, spawn height),
    observation layout, command ranges and reset randomisation (``spawn.training_randomisation``), from the
    interface, on the nominal robot; the task's defaults for the rest."""
    from rlcore_tasks.go2.variants import overrides_from_interface

    overrides = overrides_from_interface(meta, episode_s=20.0)
    described = meta.get("commands") or {}
    heading = described.get("heading") or {}
    commands = {**(described.get("ranges") or {}), "heading_command": bool(heading.get("in_training", False))}
    if "range" in heading:
        commands["heading"] = heading["range"]
    if "zero_below" in described:
        commands["zero_below"] = described["zero_below"]
    spawn = meta.get("spawn") or {}
    init = {k: v for k, v in overrides["init"].items() if k == "base_height"}
    init.update(spawn.get("training_randomisation") or {})  # episodes start as in training
    return {"sim": {k: v for k, v in overrides["sim"].items() if k != "threads"}, "control": overrides["control"],
            "init": init, "obs": overrides["obs"], "rewards": overrides["rewards"], "commands": commands,
            "domain_rand": overrides["domain_rand"]}


def robustness_suite() -> RobustnessSuite:
    """The fixed grid of robot variants (:data:`~rlcore_tasks.go2.variants.ROBUSTNESS_GRID`) x :data:`PROBE_COMMANDS`,
    run by :class:`~rlcore_tasks.go2.variants.Go2VariantEnv` rebuilt from the file's interface."""
    from rlcore_tasks.go2.variants import ROBUSTNESS_GRID, Go2VariantEnv, describe

    return RobustnessSuite(grid=ROBUSTNESS_GRID, probe_commands=PROBE_COMMANDS, make_env=Go2VariantEnv.from_interface,
                           describe=describe)


_SHARED = {"env_from_interface": env_from_interface, "robustness": robustness_suite, "viewer_env": VIEWER_ENV}

TASKS = [
    TaskSpec(name="go2", make_env=make_go2, summary="Unitree Go2 velocity tracking on flat ground (MuJoCo)",
             pretrained=PRETRAINED, **_SHARED),
    TaskSpec(name="go2_rough", make_env=make_go2_rough,
             summary="Unitree Go2 velocity tracking on rough terrain with a height scan (MuJoCo)", **_SHARED),
]
