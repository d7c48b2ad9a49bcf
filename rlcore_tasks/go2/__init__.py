"""Unitree Go2 locomotion on MuJoCo (``task=go2`` flat, ``task=go2_rough`` rough terrain).

:class:`~rlcore_tasks.go2.env.Go2Env` is imported on first use (``from rlcore_tasks.go2 import Go2Env``), so that the
task spec (:mod:`rlcore_tasks.go2.task`), which the ``rlcore.tasks`` entry point loads whenever any task is looked up,
does not load MuJoCo.
"""

import os
from typing import Any

# Offscreen rendering (play video=true) needs a GL backend; on a machine without a display default to EGL.
# It must be chosen before mujoco is first imported.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

__all__ = ["Go2Env"]


def __getattr__(name: str) -> Any:
    if name == "Go2Env":
        from rlcore_tasks.go2.env import Go2Env

        return Go2Env
    raise AttributeError(f"module 'rlcore_tasks.go2' has no attribute '{name}'")
