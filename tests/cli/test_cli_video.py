"""The MP4 writer on synthetic frames, and the classic tasks' numpy renderer."""

from __future__ import annotations

import numpy as np
import pytest

from rlcore.logging.video import VideoWriter, read_mp4, write_mp4


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


POLE, CART = (204, 102, 51), (40, 40, 40)  # the renderer's colours


def _centroid(img: np.ndarray, color: tuple[int, int, int]) -> np.ndarray:
    """``(x, y)`` pixel centroid of the pixels of exactly ``color`` (y grows downwards)."""
    ys, xs = np.nonzero((img == np.array(color, dtype=np.uint8)).all(-1))
    assert len(xs) > 0, f"nothing drawn in {color}"
    return np.array([xs.mean(), ys.mean()])


@pytest.mark.parametrize("task", ["pendulum", "cartpole"])
def test_classic_tasks_render_the_state(task):
    """The picture follows env 0's state: the pole points where its angle says (0 = up, +pi/2 = right)."""
    from rlcore.env.task import make_task

    env = make_task(task, num_envs=2, seed=0)
    angle = 0 if task == "pendulum" else 2  # index of the pole angle in the state

    def pole_at(theta: float) -> np.ndarray:
        env.state[0] = 0.0
        env.state[0, angle] = theta
        env.state[1, angle] = -theta  # env 1 is not drawn
        img = env.render(width=80, height=60)
        assert img.shape == (60, 80, 3) and img.dtype == np.uint8
        return _centroid(img, POLE)

    up, right, left = pole_at(0.0), pole_at(np.pi / 2), pole_at(-np.pi / 2)
    assert right[0] > up[0] + 5 > left[0] + 10  # x: left < up < right
    assert up[1] < right[1] - 5 and abs(right[1] - left[1]) < 1.0  # up is higher; sideways poles level
    if task == "pendulum":
        down = pole_at(np.pi)
        assert down[1] > right[1] + 5 and abs(down[0] - up[0]) < 1.0
    else:  # the cart rides with x
        env.state[0] = 0.0
        env.state[0, 0] = 1.0
        at_plus = _centroid(env.render(width=80, height=60), CART)
        env.state[0, 0] = -1.0
        at_minus = _centroid(env.render(width=80, height=60), CART)
        assert at_plus[0] > at_minus[0] + 5 and abs(at_plus[1] - at_minus[1]) < 1.0
