"""examples/deploy_go2_mujoco.py's Observer keeps a ring of ``max(lags)`` frames, not the whole episode (issue 52
item 11), and ``--teleop`` without a display is refused in one line (item 13).

The ring must read exactly what an unbounded history reads: :func:`unbounded` is that reference (every frame of the
episode kept, frame ``lag`` read as ``frames[max(n - lag, 0)]``, the current frame before the episode's first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deploy_go2_mujoco.py"
SCENE = ROOT / "rlcore_tasks" / "go2" / "assets" / "scene.xml"
sys.path.insert(0, str(EXAMPLE.parent))
import deploy_go2_mujoco as example  # noqa: E402

HISTORY = {"order": "newest_first", "before_episode_start": "first_frame"}


def unbounded(meta: dict):
    """The reference observer: every frame of the episode kept. Returns ``(observe(frames), reset())``."""
    groups = [(n, meta["observation_groups"][n]) for n in meta["obs_groups"]]
    past: dict[str, list[np.ndarray]] = {}

    def observe(frames: dict[str, np.ndarray]) -> np.ndarray:
        parts = []
        for name, group in groups:
            source = group.get("history_of")
            if source is None:
                parts.append(frames[name])
                continue
            seen = past.get(source) or [frames[source]]
            parts += [seen[max(len(seen) - lag, 0)] for lag in group["lags"]]
        for name in frames:
            past.setdefault(name, []).append(frames[name])
        return np.concatenate(parts)

    return observe, past.clear


def run(meta: dict, quantities, steps: int, reset_every: int) -> tuple[int, int]:
    """Step the example's Observer and the reference side by side (both reset every ``reset_every`` steps); asserts
    equal observations at every step. Returns ``(most frames the Observer held, most frames the reference held)``."""
    observer = example.Observer(meta)
    reference, reference_reset = unbounded(meta)
    own = [g for g in meta["obs_groups"] if "history_of" not in meta["observation_groups"][g]]
    held = kept = 0
    for k in range(steps):
        if k and k % reset_every == 0:
            observer.reset()
            reference_reset()
        q = quantities(k)
        obs = observer(q)
        frames = {g: observer_frame(meta, g, q) for g in own}
        np.testing.assert_array_equal(obs, reference(frames), err_msg=f"step {k}")
        held = max(held, *(len(v) for v in observer.past.values()))
        kept = max(kept, k % reset_every + 1)
    return held, kept


def observer_frame(meta: dict, group: str, quantities: dict) -> np.ndarray:
    """One group's frame as the Observer computes it (the Observer alone, on a meta holding only that group)."""
    one = {"obs_groups": [group], "observation_groups": {group: meta["observation_groups"][group]}}
    return example.Observer(one)(quantities)


def test_the_history_is_a_ring_of_max_lags_frames_that_reads_like_the_whole_episode():
    """Two history groups of one source with different lags (deepest 7): 3000 steps, an episode start every 1200
    (a robot that never falls keeps one episode for hours)."""
    meta = {"obs_groups": ["policy", "recent", "older"], "observation_groups": {
        "policy": {"terms": [{"name": "x", "scale": 2.0, "offset": 0.5}, {"name": "y", "scale": 1.0}], "clip": 3.0},
        "recent": {"history_of": "policy", "lags": [1, 2, 3], **HISTORY},
        "older": {"history_of": "policy", "lags": [7, 4], **HISTORY}}}
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(3000, 3))
    held, kept = run(meta, lambda k: {"x": draws[k, :1], "y": draws[k, 1:]}, 3000, 1200)
    assert held == 7, f"the Observer held {held} frames of the source (max(lags) = 7)"
    assert kept == 1200  # the reference kept the whole episode


def test_the_shipped_history_policy_keeps_five_frames():
    """go2_flat's interface (a 5-frame history of the 45-value policy group), 2000 steps of one episode."""
    from rlcore_tasks.go2.pretrained import PRETRAINED

    meta = example.read_interface(PRETRAINED["go2_flat"].path)
    sizes = {"base_ang_vel": 3, "projected_gravity": 3, "velocity_commands": 3, "joint_pos": 12, "joint_vel": 12,
             "last_actions": 12}
    rng = np.random.default_rng(1)
    held, _ = run(meta, lambda k: {n: rng.normal(size=s) for n, s in sizes.items()}, 2000, 10**9)
    assert held == 5, f"the Observer held {held} frames after 2000 steps (max(lags) = 5)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the DISPLAY check is Linux's")
def test_teleop_without_a_display_is_one_line(tmp_path):
    """``--teleop`` (the README's command) on a headless machine: one line naming the need, no GLFW warning or
    traceback, a non-zero exit status."""
    from rlcore_tasks.go2.pretrained import PRETRAINED

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, str(EXAMPLE), PRETRAINED["go2_flat"].path, str(SCENE), "--teleop"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and len(out.splitlines()) == 1, out
    assert "--teleop needs a display" in out and "Traceback" not in out and "GLFW" not in out, out
