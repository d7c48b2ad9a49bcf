"""MP4 files from RGB frames, through PyAV (``av`` on PyPI, which bundles FFmpeg: no system install).

Frames are ``uint8 [H, W, 3]`` arrays and are encoded as they arrive (H.264, yuv420p), so a long
recording never sits in memory. Odd frame sizes are padded by one row/column (yuv420p needs even sizes).
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
            import av
        except ImportError:  # pragma: no cover - av is a dependency of rlcore
            raise RuntimeError("writing MP4 needs PyAV: pip install av") from None
        self._av = av
        self.path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)) or ".", exist_ok=True)
        if fps <= 0:
            raise ConfigError(f"fps must be positive, got {fps}")
        self.fps = float(fps)
        self.codec = codec or ("libx264" if "libx264" in av.codecs_available else "mpeg4")
        self._container = av.open(self.path, mode="w")
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
