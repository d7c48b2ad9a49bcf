"""The MP4 writer on synthetic frames, and the classic tasks' numpy renderer."""

from __future__ import annotations

import numpy as np
import pytest

from rlcore.utils.video import VideoWriter, read_mp4, write_mp4


def _frames(n: int, h: int, w: int) -> list[np.ndarray]:
    out = []
    for i in range(n):
        f = np.zeros((h, w, 3), dtype=np.uint8)
        f[:, : (i + 1) * w // n] = (255, 128, 0)  # a bar that grows frame by frame
        out.append(f)
    return out


def test_written_mp4_decodes_to_the_frames(tmp_path):
    frames = _frames(12, 48, 64)
    path = write_mp4(frames, tmp_path / "sub" / "bar.mp4", fps=20)
    video = read_mp4(path)
    assert video.shape == (12, 48, 64, 3)
    # lossy, but the picture survives: the bar's width grows
    widths = (video[:, 24, :, 0] > 128).sum(axis=1)
    assert np.all(np.diff(widths) > 0)
    assert abs(int(video[-1, 24, 32, 0]) - 255) < 20


def test_odd_sizes_are_padded(tmp_path):
    path = write_mp4(_frames(3, 25, 31), tmp_path / "odd.mp4", fps=10)
    assert read_mp4(path).shape == (3, 26, 32, 3)


def test_frames_of_another_size_are_refused(tmp_path):
    with VideoWriter(tmp_path / "x.mp4", fps=10) as writer:
        writer.write(np.zeros((16, 16, 3), np.uint8))
        with pytest.raises(ValueError, match="first frame was 16x16"):
            writer.write(np.zeros((8, 8, 3), np.uint8))
        with pytest.raises(ValueError, match=r"\[H, W, 3\]"):
            writer.write(np.zeros((16, 16), np.uint8))


@pytest.mark.parametrize("task", ["pendulum", "cartpole"])
def test_classic_tasks_render(task):
    from tasks.registry import make_task

    env = make_task(task, num_envs=2, seed=0)
    img = env.render(width=80, height=60)
    assert img.shape == (60, 80, 3) and img.dtype == np.uint8
    assert (img != 255).any()  # something is drawn on the white background
