"""``runner.video_interval``: clips of env 0 of the training env, which leave training unchanged.

Pendulum (drawn with numpy, no OpenGL), 16 envs, 8-step rollouts, 16-unit MLPs.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from runner_helpers import base_cfg, make_env

from rlcore.errors import ConfigError
from rlcore.logging.video import read_mp4
from rlcore.runners import OnPolicyRunner

N = 16
VIDEO = {"video_interval": 3, "video_length": 12, "video_width": 64, "video_height": 48}


def weights(runner: OnPolicyRunner) -> dict[str, torch.Tensor]:
    return {f"{name}.{k}": v.clone() for name, m in runner.models.items() for k, v in m.state_dict().items()}


@pytest.mark.slow
def test_video_leaves_training_unchanged_and_shows_env_0(tmp_path):
    """Same seed with and without videos: bit-identical weights; the frames are env 0 at the steps recorded."""
    plain = OnPolicyRunner(make_env(num_envs=N), base_cfg(), str(tmp_path / "plain"))
    plain.learn(5)

    env = make_env(num_envs=N)
    states = []  # env 0's state at every render() call
    draw = env.render

    def render(width: int = 640, height: int = 480):
        states.append(env.state[0].clone())
        return draw(width=width, height=height)

    env.render = render
    video = OnPolicyRunner(env, base_cfg(**VIDEO), str(tmp_path / "video"))
    video.learn(5)

    a, b = weights(plain), weights(video)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs with video_interval on"
    assert not torch.equal(a["actor.mlp.0.weight"], weights(OnPolicyRunner(make_env(num_envs=N), base_cfg(), None))
                           ["actor.mlp.0.weight"])  # training moved the weights: the comparison means something

    # Iterations 0..4 of 8 steps: a clip starts at iteration 0 (12 frames: iterations 0-1) and at 3 (the last
    # 16 steps hold 12 frames). One extra render at the start of learn() checks that rendering works.
    videos = tmp_path / "video" / "videos"
    assert sorted(os.listdir(videos)) == ["iter_0.mp4", "iter_3.mp4"]
    clip0, clip3 = read_mp4(videos / "iter_0.mp4"), read_mp4(videos / "iter_3.mp4")
    assert clip0.shape == clip3.shape == (12, 48, 64, 3)
    assert len(states) == 1 + 12 + 12
    reference = make_env(num_envs=1)

    def drawn(state: torch.Tensor) -> np.ndarray:
        reference.state[0] = state
        return reference.render(width=64, height=48).astype(np.float32)

    # Frame k of iter_0 is env 0 after step k of iteration 0 (render call k + 1): closer to that state's
    # picture than to the picture of a state 6 steps later (the pendulum swings in between).
    for k in (0, 5, 11):
        own = np.abs(clip0[k].astype(np.float32) - drawn(states[1 + k])).mean()
        other = np.abs(clip0[k].astype(np.float32) - drawn(states[1 + (k + 6) % 12])).mean()
        assert own < 0.6 * other, (k, own, other)


def test_clip_file_appears_only_when_complete(tmp_path):
    """A clip is written as *.mp4.part and renamed when complete, so loggers never pick up half a file."""
    runner = OnPolicyRunner(make_env(num_envs=N), base_cfg(video_interval=1, video_length=20, video_width=32,
                                                          video_height=32), str(tmp_path))
    seen = []
    runner.learn(2, callback=lambda it, stats: seen.append(glob.glob(str(tmp_path / "**" / "*.mp4"), recursive=True)))
    # iteration 0: 8 of 20 frames, iteration 1: 16 of 20 (at most a .part file); learn() ends: the clip is closed.
    assert seen == [[], []]
    assert os.listdir(tmp_path / "videos") == ["iter_0.mp4"]
    assert read_mp4(tmp_path / "videos" / "iter_0.mp4").shape[0] == 16


def test_tensorboard_gets_the_clip_path(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runner = OnPolicyRunner(make_env(num_envs=N), base_cfg(logger="tensorboard", video_interval=2, video_length=8,
                                                          video_width=32, video_height=32), str(tmp_path))
    runner.learn(3)
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("Videos/text_summary")]
    assert texts == [(0, "videos/iter_0.mp4 (8 frames)"), (2, "videos/iter_2.mp4 (8 frames)")]


@pytest.mark.slow
def test_wandb_offline_run_gets_the_clip(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for key, sub in [("WANDB_DIR", "wandb_dir"), ("WANDB_CONFIG_DIR", "wandb_config"),
                     ("WANDB_CACHE_DIR", "wandb_cache"), ("WANDB_DATA_DIR", "wandb_data")]:
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(key, str(tmp_path / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log_dir = tmp_path / "run"
    runner = OnPolicyRunner(make_env(num_envs=N), base_cfg(logger="wandb", video_interval=1, video_length=8,
                                                          video_width=32, video_height=32), str(log_dir))
    runner.learn(1)
    runner.close()
    runs = glob.glob(str(log_dir / "wandb" / "offline-run-*"))
    assert len(runs) == 1
    deadline = time.monotonic() + 15.0  # wandb's writer may copy the media just after finish() returned
    while not (media := glob.glob(os.path.join(runs[0], "files", "media", "videos", "*.mp4"))) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(media) == 1
    assert read_mp4(media[0]).shape == (8, 32, 32, 3)  # the clip itself, as wandb.Video


def _mujoco_renders() -> bool:
    """Whether MuJoCo can open an offscreen GL context here (EGL or OSMesa system libraries present)."""
    probe = ("import rlcore_tasks.go2, mujoco; "
             "mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco><worldbody/></mujoco>'), 8, 8).render()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0


@pytest.mark.skipif(not _mujoco_renders(), reason="no offscreen GL here (install libegl1 or libosmesa6)")
@pytest.mark.slow
def test_go2_video_leaves_training_unchanged(tmp_path):
    """Go2 renders env 0 from a copy of its joint state: 4 envs, 3 iterations, same weights with videos on."""
    from rlcore.env.task import make_task

    keys = {"obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]}}
    runs = {}
    for name, video in (("plain", {}), ("video", {"video_interval": 1, "video_length": 10, "video_width": 32,
                                                  "video_height": 32})):
        env = make_task("go2", num_envs=4, seed=0, sim={"threads": 1})
        runs[name] = OnPolicyRunner(env, base_cfg(**keys, **video), str(tmp_path / name))
        runs[name].learn(3)
        env.close()
    a, b = weights(runs["plain"]), weights(runs["video"])
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs with video_interval on"
    clip = read_mp4(tmp_path / "video" / "videos" / "iter_0.mp4")
    assert clip.shape == (10, 32, 32, 3) and clip.std() > 1.0  # a rendered scene, not a blank image
    assert sorted(os.listdir(tmp_path / "video" / "videos")) == ["iter_0.mp4", "iter_2.mp4"]


class NoRender(type(make_env(num_envs=1))):
    render = None


def test_env_without_render_is_refused_at_start():
    with pytest.raises(ConfigError, match=r"runner\.video_interval: NoRender cannot render"):
        OnPolicyRunner(NoRender(num_envs=4, seed=0), base_cfg(video_interval=10), None)
    OnPolicyRunner(NoRender(num_envs=4, seed=0), base_cfg(), None)  # videos off: no render needed


@pytest.mark.parametrize("key, value", [("video_interval", -1), ("video_length", 0), ("video_width", 0)])
def test_bad_video_settings_are_refused(key, value):
    with pytest.raises(ConfigError, match=rf"runner\.{key}={value}: must be an integer >= "):
        OnPolicyRunner(make_env(num_envs=4), base_cfg(**{key: value}), None)
