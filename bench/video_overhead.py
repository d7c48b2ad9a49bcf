"""What ``runner.video_interval`` costs a Go2 training run.

Trains ``task=go2`` (the default config, 1024 envs) for ``--iterations`` iterations with
``runner.video_interval=--every`` and times, in the same process, every iteration and every piece of clip work
(drawing env 0 and encoding the frame, closing the file, handing it to the logger). A clip is
``runner.video_length`` frames (150) recorded over the following iterations; its cost is independent of the
interval, so the overhead of an interval N is the mean cost of one clip over N iterations' time without clips:

    overhead(N) = clip_s / (N * iteration_s)

Last line: ``video_overhead: clip_s=<s> iteration_s=<s> interval=<N> overhead=<percent>%``.

    python bench/video_overhead.py                 # 24 iterations, a clip every 8: 3 clips
    python bench/video_overhead.py --interval 50   # the interval the overhead is reported for
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import argparse
import tempfile
import time
from pathlib import Path

from _common import go2_training


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=24, help="training iterations measured")
    p.add_argument("--every", type=int, default=8, help="runner.video_interval while measuring")
    p.add_argument("--interval", type=int, default=50, help="interval the overhead is reported for")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. task.num_envs=256")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    import rlcore.runners.on_policy_runner as runner_module
    from rlcore.runners import OnPolicyRunner

    cfg, train_cfg, _, env = go2_training(args.seed, [f"runner.video_interval={args.every}", *args.overrides],
                                          args.threads)

    clip_time = [0.0]
    recorder = runner_module.ClipRecorder

    def timed(method):  # the wrapped method's wall time is added to clip_time
        def wrapper(self, *a, **k):
            t = time.perf_counter()
            try:
                return method(self, *a, **k)
            finally:
                clip_time[0] += time.perf_counter() - t
        return wrapper

    # every piece of clip work (opening the writer, each frame, closing the file), timed where the runner calls it
    TimedClip = type("TimedClip", (recorder,), {name: timed(getattr(recorder, name))
                                                 for name in ("__init__", "capture", "close")})

    runner_module.ClipRecorder = TimedClip
    times: list[tuple[float, float]] = []  # (iteration wall time, clip time within it)
    with tempfile.TemporaryDirectory() as log_dir:
        runner = OnPolicyRunner(env, train_cfg, log_dir=log_dir, device="cpu")
        last = [time.perf_counter(), 0.0]

        def on_iteration(it: int, stats: dict) -> None:
            now = time.perf_counter()
            times.append((now - last[0], clip_time[0] - last[1]))
            print(f"[video_overhead] it={it:3d} wall={now - last[0]:.2f}s clip work={clip_time[0] - last[1]:.2f}s",
                  flush=True)
            last[0], last[1] = now, clip_time[0]

        runner.learn(num_learning_iterations=args.iterations, init_at_random_ep_len=True, callback=on_iteration)
        clips = sorted(p.name for p in (Path(log_dir) / "videos").glob("*.mp4"))
    env.close()
    runner_module.ClipRecorder = recorder
    plain = [w - c for w, c in times[1:]]  # iteration 0 includes start-up work
    iteration_s = sum(plain) / len(plain)
    clip_s = clip_time[0] / max(1, len(clips))
    overhead = clip_s / (args.interval * iteration_s)
    print(f"[video_overhead] {len(clips)} clips written ({', '.join(clips)}); {args.iterations} iterations, "
          f"{cfg.task.num_envs} envs, torch threads {torch.get_num_threads()}")
    print(f"video_overhead: clip_s={clip_s:.2f} iteration_s={iteration_s:.2f} interval={args.interval} "
          f"overhead={100 * overhead:.1f}%")
    return {"clip_s": clip_s, "iteration_s": iteration_s, "overhead": overhead, "clips": clips}


if __name__ == "__main__":
    main()
