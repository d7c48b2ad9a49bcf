"""``python -m rlcore.play checkpoint=<model_<it>.pt or run dir> [episodes=10] [video=true] [onnx=policy.onnx]``.

Rebuilds the checkpoint's task (from the run's ``.hydra/config.yaml``, else the train config stored in the
checkpoint), runs its policy deterministically (the mean action; recurrent state reset per finished
episode), and prints each episode's return and length and the mean of the task's metrics
(``extras["log"]`` entries, keys starting with "/").

- ``video=true`` writes an MP4 of env 0 (``env.render()``; MuJoCo tasks render offscreen: on a machine
  without a display set ``MUJOCO_GL=egl`` (GPU) or ``MUJOCO_GL=osmesa`` (CPU, ``apt-get install libosmesa6``)).
- ``onnx=<file>`` runs an exported ONNX policy through onnxruntime instead of the torch model.
- ``viewer=true`` opens MuJoCo's interactive viewer instead (go2 tasks): one robot in real time, velocity
  commands from the keyboard (:mod:`rlcore.viewer`).

Run ``python -m rlcore.play --help`` for every key.
"""

from __future__ import annotations

import math
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

from rlcore.utils.cli import UserError, check_device, parse_key_values, usage, user_errors
from rlcore.utils.config_schema import PlayCfg
from rlcore.utils.video import control_period  # rlcore.export imports it from here too

SUMMARY = ("Run a trained policy in its task deterministically; print episode returns and the task's metrics. "
           "video=true writes an MP4, onnx=<file> plays an exported ONNX policy, viewer=true opens MuJoCo's "
           "viewer with keyboard velocity commands (go2 tasks).")


class OnnxActor:
    """An exported ONNX policy run through onnxruntime on TensorDict observations, state carried per env."""

    def __init__(self, path: str, policy, num_envs: int) -> None:
        import numpy as np

        try:
            import onnxruntime as ort
        except ImportError:  # pragma: no cover - onnxruntime is a dependency
            raise UserError("onnx= needs onnxruntime: pip install onnxruntime") from None
        if not os.path.isfile(path):
            raise UserError(f"onnx={path}: no such file.")
        try:
            self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        except Exception as err:
            raise UserError(f"onnx={path}: onnxruntime cannot load it ({' '.join(str(err).split())[:200]}).") from None
        reference = policy.as_onnx()
        expected = {name: tuple(x.shape) for name, x in zip(reference.input_names, reference.example_inputs)}
        given = {i.name: tuple(i.shape) for i in self.session.get_inputs()}
        problems = [f"input '{n}' missing" for n in expected if n not in given]
        problems += [f"unexpected input '{n}'" for n in given if n not in expected]
        for name, shape in expected.items():
            if name in given and len(given[name]) == len(shape):
                batch_axis = 1 if name in ("h_in", "c_in") else 0
                for axis, (a, b) in enumerate(zip(given[name], shape)):
                    if axis != batch_axis and isinstance(a, int) and a != b:
                        problems.append(f"input '{name}' has shape {list(given[name])}, the policy needs "
                                        f"{['batch' if i == batch_axis else d for i, d in enumerate(shape)]}")
                        break
            elif name in given:
                problems.append(f"input '{name}' has {len(given[name])} dims, the policy needs {len(shape)}")
        if problems:
            raise UserError(f"onnx={path} does not match the checkpoint's policy ({type(policy).__name__}): "
                            + "; ".join(problems) + ".")
        self.np = np
        self.groups_1d = list(policy.obs_groups_1d)
        self.groups_2d = list(policy.obs_groups_2d)
        self.image_inputs = [n for n in reference.input_names if n in self.groups_2d]
        self.state_names = [n for n in reference.input_names if n in ("h_in", "c_in")]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.state = {}
        for name in self.state_names:
            layers, _, hidden = expected[name]
            self.state[name] = np.zeros((layers, num_envs, hidden), dtype=np.float32)

    def __call__(self, obs):
        import torch

        feeds = {}
        if self.groups_1d:
            groups = self.groups_1d
            flat = torch.cat([obs[g] for g in groups], dim=-1) if len(groups) > 1 else obs[groups[0]]
            feeds["obs"] = flat.detach().float().cpu().numpy()
        for name in self.image_inputs:
            feeds[name] = obs[name].detach().float().cpu().numpy()
        feeds.update(self.state)
        outputs = dict(zip(self.output_names, self.session.run(None, feeds)))
        for name in self.state_names:
            self.state[name] = outputs[name.replace("_in", "_out")]
        return torch.from_numpy(outputs["actions"])

    def reset(self, dones) -> None:
        if self.state:
            mask = dones.detach().cpu().numpy().astype(bool)
            for array in self.state.values():
                array[:, mask, :] = 0.0


class TorchActor:
    """The checkpoint's torch policy: deterministic output, recurrent state reset per finished env."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def __call__(self, obs):
        return self.policy(obs, stochastic_output=False)

    def reset(self, dones) -> None:
        self.policy.reset(dones)


def _scalar(value) -> float | None:
    import torch

    try:
        if isinstance(value, torch.Tensor):
            if value.numel() == 0:
                return None
            value = value.detach().float().mean().item()
        value = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return value if math.isfinite(value) else None


def play(args: dict) -> dict:
    """Run ``args`` (the keys of :class:`~rlcore.utils.config_schema.PlayCfg`); returns what was printed as data."""
    import torch

    from rlcore.utils.run_files import load_run, make_run_env, make_run_policy

    if not args.get("checkpoint"):
        raise UserError("play needs checkpoint=<model_<it>.pt or a run directory>, e.g. "
                        "python -m rlcore.play checkpoint=logs/pendulum/<run>.")
    episodes = int(args["episodes"])
    if episodes < 1:
        raise UserError(f"episodes={episodes}: must be >= 1.")
    if args.get("num_envs") is not None and int(args["num_envs"]) < 1:
        raise UserError(f"num_envs={args['num_envs']}: must be >= 1.")
    device = check_device(args["device"])
    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    from rlcore.utils.checkpoint import seed_everything

    seed_everything(int(args["seed"]))  # tasks that draw from the global generators replay the same way
    info = load_run(str(args["checkpoint"]))
    if args.get("viewer"):
        return view(info, args, device)
    num_envs = int(args["num_envs"] or max(1, min(episodes, int(info.task.get("num_envs") or episodes))))
    env = make_run_env(info, num_envs, device, int(args["seed"]))
    if args["video"] and not callable(getattr(env, "render", None)):
        raise UserError(f"video=true: task {info.task['name']} cannot render (its env has no render() method).")
    policy = make_run_policy(info, env, device)
    actor = OnnxActor(str(args["onnx"]), policy, num_envs) if args.get("onnx") else TorchActor(policy)

    max_len = int(torch.as_tensor(env.max_episode_length).max().item())
    per_env = math.ceil(episodes / num_envs)  # each env contributes at most this many episodes
    max_steps = int(args["max_steps"]) if args.get("max_steps") else per_env * max_len + 1
    source = f"onnx {args['onnx']}" if args.get("onnx") else f"torch {type(policy).__name__}"
    print(f"[rlcore] play: task={info.task['name']}, checkpoint={info.checkpoint} (iteration "
          f"{info.ckpt.get('iter', '?')}), policy={source}, {num_envs} env(s), {episodes} episode(s), device={device}")

    writer = None
    video_path = None
    if args["video"]:
        from rlcore.utils.video import VideoWriter, render_frame

        stem = os.path.splitext(os.path.basename(info.checkpoint))[0]
        video_path = args.get("video_file") or os.path.join(info.run_dir, "videos", f"{stem}.mp4")
        period = control_period(env)
        fps = float(args["video_fps"] or (1.0 / period if period else 30.0))
        writer = VideoWriter(video_path, fps=fps)

    def record() -> None:
        writer.write(render_frame(env, args["video_width"], args["video_height"], "video=true"))

    returns = torch.zeros(num_envs, dtype=torch.float64)
    lengths = torch.zeros(num_envs, dtype=torch.long)
    counts = [0] * num_envs
    finished: list[tuple[int, float, int]] = []
    metric_sum: dict[str, float] = {}
    metric_n: dict[str, int] = {}
    steps = 0
    try:
        with torch.inference_mode():
            obs = env.get_observations().to(device)
            if writer is not None:
                record()
            while len(finished) < episodes and steps < max_steps:
                actions = actor(obs)
                obs, rewards, dones, extras = env.step(actions.to(env.device))
                obs = obs.to(device)
                dones = dones.to(torch.bool)
                actor.reset(dones.to(device))
                steps += 1
                returns += rewards.detach().double().cpu()
                lengths += 1
                for key, value in (extras.get("log") or {}).items():
                    v = _scalar(value)
                    if v is not None:
                        metric_sum[key] = metric_sum.get(key, 0.0) + v
                        metric_n[key] = metric_n.get(key, 0) + 1
                if writer is not None:
                    record()
                done_ids = dones.nonzero().flatten().cpu().tolist()
                for i in done_ids:
                    if counts[i] < per_env and len(finished) < episodes:
                        counts[i] += 1
                        finished.append((i, float(returns[i]), int(lengths[i])))
                        print(f"episode {len(finished):3d}  env {i:3d}  return {float(returns[i]):12.3f}  "
                              f"length {int(lengths[i])}")
                    returns[i] = 0.0
                    lengths[i] = 0
    finally:
        if writer is not None:
            writer.close()

    result = {"returns": [r for _, r, _ in finished], "lengths": [n for _, _, n in finished],
              "metrics": {k: metric_sum[k] / metric_n[k] for k in sorted(metric_sum)}, "steps": steps,
              "video": video_path}
    if finished:
        rets = torch.tensor(result["returns"], dtype=torch.float64)
        std = float(rets.std()) if len(rets) > 1 else 0.0
        print(f"mean return {float(rets.mean()):.3f} +/- {std:.3f} over {len(rets)} episode(s) "
              f"(min {float(rets.min()):.3f}, "
              f"max {float(rets.max()):.3f}); mean length {sum(result['lengths']) / len(result['lengths']):.1f}")
    else:
        partial = float(returns.mean())
        print(f"no episode finished within {steps} steps (max_steps); mean partial return {partial:.3f}")
        result["partial_return"] = partial
    if len(finished) < episodes and finished:
        print(f"only {len(finished)} of {episodes} episodes finished within {steps} steps (raise max_steps=)")
    if result["metrics"]:
        print("task metrics (mean over the steps that reported them):")
        width = max(len(k) for k in result["metrics"])
        for key, value in result["metrics"].items():
            print(f"  {key:<{width}}  {value:.4f}")
    if video_path is not None:
        print(f"[rlcore] video: {video_path} ({writer.frames_written} frames, {writer.fps:g} fps)")
    return result


def view(info, args: dict, device: str) -> dict:
    """``viewer=true``: the checkpoint's policy (or ``onnx=``) driving one robot in MuJoCo's viewer, commands from
    the keyboard; returns :func:`rlcore.viewer.run_viewer`'s summary."""
    from rlcore.utils.run_files import make_run_policy
    from rlcore.viewer import make_viewer_env, run_viewer

    if args["video"]:
        raise UserError("viewer=true and video=true: choose one (the viewer shows the robot live; video=true records "
                        "an MP4 without a window).")
    if args.get("num_envs") not in (None, 1):
        raise UserError(f"num_envs={args['num_envs']}: the viewer runs one env; leave num_envs out.")
    env = make_viewer_env(info, device, int(args["seed"]))
    try:
        policy = make_run_policy(info, env, device)
        actor = OnnxActor(str(args["onnx"]), policy, 1) if args.get("onnx") else TorchActor(policy)
        source = f"onnx {args['onnx']}" if args.get("onnx") else f"torch {type(policy).__name__}"
        print(f"[rlcore] play: task={info.task['name']}, checkpoint={info.checkpoint} (iteration "
              f"{info.ckpt.get('iter', '?')}), policy={source}, viewer, device={device}")
        return run_viewer(env, actor, device, max_steps=args.get("max_steps"))
    finally:
        if callable(getattr(env, "close", None)):
            env.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m rlcore.play`` and ``rlcore-play``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(usage("play", PlayCfg, SUMMARY))
        return
    with user_errors():
        play(parse_key_values(argv, PlayCfg, "play"))


if __name__ == "__main__":
    main()
