"""Go2's ``render()``: "fast" frames (no multisampling, shadows or reflections; what videos during training use)
and MuJoCo's "full" ones show the same scene, differ only in those effects, and a wrong quality is one line."""

from __future__ import annotations

import os

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
os.environ.setdefault("MUJOCO_GL", "egl")

from rlcore.errors import ConfigError  # noqa: E402
from tasks.registry import make_task  # noqa: E402


def frame(quality: str) -> np.ndarray:
    env = make_task("go2", num_envs=1, device="cpu", seed=0, sim={"threads": 1, "render_quality": quality})
    try:
        return env.render(width=160, height=120)
    except Exception as err:  # no OpenGL context on this machine
        pytest.skip(f"cannot render here: {err}")
    finally:
        env.close()


def test_fast_and_full_frames_show_the_same_scene_without_and_with_the_effects():
    fast, full = frame("fast"), frame("full")
    assert fast.shape == full.shape == (120, 160, 3) and fast.dtype == np.uint8
    assert fast.std() > 10 and full.std() > 10  # both draw a scene, not a blank
    diff = np.abs(fast.astype(int) - full.astype(int)).sum(axis=2)
    # Same camera, robot and floor: most pixels agree; shadows, reflections and smoothed edges change some.
    assert 0.005 < (diff > 30).mean() < 0.5
    # The robot's shadow darkens the floor under it in the full frame only.
    assert full.astype(int).sum() < fast.astype(int).sum()


def test_unknown_render_quality_is_one_line():
    with pytest.raises(ConfigError, match=r"go2.sim.render_quality: 'nice'; use one of \['fast', 'full'\]"):
        make_task("go2", num_envs=1, device="cpu", seed=0, sim={"render_quality": "nice"})
