"""Unitree Go2 locomotion on MuJoCo (``task=go2`` flat, ``task=go2_rough`` rough terrain)."""

import os

# Offscreen rendering (play video=true) needs a GL backend; on a machine without a display default to EGL.
# It must be chosen before mujoco is first imported.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

from tasks.go2.env import Go2Env

__all__ = ["Go2Env"]
