"""MP4 files from RGB frames, through PyAV (``av`` on PyPI, which bundles FFmpeg: no system install).

Frames are ``uint8 [H, W, 3]`` arrays and are encoded as they arrive (H.264, yuv420p), so a long
recording never sits in memory. Odd frame sizes are padded by one row/column (yuv420p needs even sizes).

Also what ``python -m rlcore.play video=true`` and the runner's ``video_interval`` share: the frame rate of
an env (:func:`control_period`), its frames with one-line errors (:func:`check_can_render`,
:func:`render_frame`) and a clip of a fixed number of frames (:class:`ClipRecorder`).
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np

from rlcore.errors import ConfigError


class VideoWriter:
    """Streams RGB frames into an MP4 file; use as a context manager or call :meth:`close`.

    Args:
        path: the ``.mp4`` file to write (folders are created).
        fps: frames per second.
        codec: FFmpeg encoder; ``libx264`` when the bundled FFmpeg has it, else ``mpeg4``.
    """

    def __init__(self, path: str | os.PathLike, fps: float = 30.0, codec: str | None = None) -> None:
        try:
            import av  # PyAV bundles FFmpeg (slow to load): only when a video is written or read
        except ImportError:  # pragma: no cover - av is a dependency of rlcore
            raise RuntimeError("writing MP4 needs PyAV: pip install av") from None
        self._av = av
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)) or ".", exist_ok=True)
        if fps <= 0:
            raise ConfigError(f"fps must be positive, got {fps}")
        self.fps = float(fps)
        self.codec = codec or ("libx264" if "libx264" in av.codecs_available else "mpeg4")
        self._container = av.open(self.path, mode="w", format="mp4")  # whatever the file name ends with
        self._stream = None
        self.size: tuple[int, int] | None = None  # (height, width) of the frames given
        self.frames_written = 0

    def write(self, frame: np.ndarray) -> None:
        """Append one ``uint8 [H, W, 3]`` RGB frame (every frame must have the first frame's size)."""
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"video frames must be [H, W, 3] RGB arrays, got shape {frame.shape}")
        if frame.dtype != np.uint8:
            frame = np.clip(frame, 0, 255).astype(np.uint8)
        h, w = frame.shape[:2]
        if self._stream is None:
            self.size = (h, w)
            rate = Fraction(self.fps).limit_denominator(1000)
            self._stream = self._container.add_stream(self.codec, rate=rate)
            self._stream.width, self._stream.height = w + w % 2, h + h % 2
            self._stream.pix_fmt = "yuv420p"
            if self.codec == "libx264":
                self._stream.options = {"crf": "20"}
        elif (h, w) != self.size:
            raise ValueError(f"video frame {self.frames_written} is {h}x{w}, the first frame was "
                             f"{self.size[0]}x{self.size[1]}")
        if h % 2 or w % 2:
            frame = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        av_frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        for packet in self._stream.encode(av_frame):
            self._container.mux(packet)
        self.frames_written += 1

    def close(self) -> None:
        """Flush the encoder and close the file (a file without frames is removed)."""
        if self._container is None:
            return
        if self._stream is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
        self._container.close()
        self._container = None
        if self.frames_written == 0 and os.path.exists(self.path):
            os.remove(self.path)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_mp4(frames, path: str | os.PathLike, fps: float = 30.0) -> str:
    """Write an iterable of RGB frames to ``path``; returns the path."""
    with VideoWriter(path, fps) as writer:
        for frame in frames:
            writer.write(frame)
    return os.fspath(path)


def read_mp4(path: str | os.PathLike) -> np.ndarray:
    """Decode every frame of a video: ``uint8 [T, H, W, 3]`` (for checks and tests)."""
    import av

    with av.open(os.fspath(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), dtype=np.uint8)


# ============================================================================ frames of an env
RENDER_HINT = "on a machine without a display set MUJOCO_GL=egl (GPU) or MUJOCO_GL=osmesa (CPU)"


def control_period(env) -> float | None:
    """The env's seconds per step (``step_dt``, ``dt``, or a classic task's ``dt``/``tau`` setting), else None."""
    for name in ("step_dt", "dt"):
        value = getattr(env, name, None)
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    cfg = getattr(env, "cfg", None)
    if isinstance(cfg, dict):
        for name in ("step_dt", "dt", "tau"):
            value = cfg.get(name)
            if isinstance(value, (int, float)) and value > 0:
                return float(value)
    return None


def check_can_render(env, setting: str) -> None:
    """Raise ConfigError, naming ``setting`` and the env class, when ``env`` has no ``render()`` method."""
    if not callable(getattr(env, "render", None)):
        raise ConfigError(f"{setting}: {type(env).__name__} cannot render (it has no render() method); "
                          "record videos of a task whose env has one, or leave the setting off.")


def render_frame(env, width: int, height: int, setting: str) -> np.ndarray:
    """``env.render(width=, height=)`` (env 0), a failure turned into one ConfigError line naming ``setting``.

    Rendering only reads the env's state (MuJoCo tasks draw from a copy of env 0's ``qpos``/``qvel``).
    """
    try:
        return env.render(width=int(width), height=int(height))
    except Exception as err:
        raise ConfigError(f"{setting}: rendering failed ({' '.join(str(err).split())[:200]}); {RENDER_HINT}.") from None


class ClipRecorder:
    """Records the next ``length`` frames of env 0 into ``path`` (an MP4), one frame per :meth:`capture`.

    The file is written as ``<path>.part`` and renamed to ``path`` when complete (or closed early), so a file
    named ``*.mp4`` is always whole: loggers upload every new one they find in the run directory.

    Args:
        env: the env (``render(width=, height=)`` draws env 0).
        path: the ``.mp4`` to write.
        length: frames of the clip.
        width, height: frame size in pixels.
        fps: frames per second (default: 1 / the env's control period, else 30).
        setting: what to name in error messages (e.g. ``runner.video_interval``).
    """

    def __init__(self, env, path: str | os.PathLike, length: int, width: int, height: int,
                 fps: float | None = None, setting: str = "video") -> None:
        self.env, self.path, self.length = env, os.fspath(path), int(length)
        self.width, self.height, self.setting = int(width), int(height), setting
        period = control_period(env)
        self._writer = VideoWriter(self.path + ".part", fps=fps or (1.0 / period if period else 30.0))
        self._closed = False

    @property
    def done(self) -> bool:
        """Whether the clip has all its frames."""
        return self._writer.frames_written >= self.length

    @property
    def frames_written(self) -> int:
        return self._writer.frames_written

    def capture(self) -> bool:
        """Render env 0 and append the frame (nothing once the clip is complete); returns :attr:`done`."""
        if not self.done:
            self._writer.write(render_frame(self.env, self.width, self.height, self.setting))
        return self.done

    def close(self) -> str | None:
        """Finish the file; returns its path, or None when no frame was captured (nothing is left behind)."""
        frames = self._writer.frames_written
        if not self._closed:
            self._writer.close()
            if frames:
                os.replace(self._writer.path, self.path)
            self._closed = True
        return self.path if frames else None
