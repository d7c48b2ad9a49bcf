"""``python -m rlcore.play checkpoint=<model_<it>.pt or run dir> | onnx=<policy.onnx> | pretrained=<name> [episodes=10]
[video=true] [viewer=true]``.

With ``checkpoint=``, rebuilds the checkpoint's task (from the run's ``.hydra/config.yaml``, else the train config stored in the
checkpoint), runs its policy deterministically (the mean action; recurrent state reset per finished
episode), and prints each episode's return and length and the mean of the task's metrics
(``extras["log"]`` entries, keys starting with "/"), with a progress line whenever :data:`PROGRESS_S` seconds pass
without one. Actions are clipped as in training: to the run's ``runner.clip_actions``, or an ONNX file's
``action_clip``.

- ``video=true`` writes an MP4 of env 0 (``env.render()``; MuJoCo tasks render offscreen: on a machine
  without a display set ``MUJOCO_GL=egl`` (GPU) or ``MUJOCO_GL=osmesa`` (CPU, ``apt-get install libosmesa6``)).
- ``onnx=<file>`` runs an exported ONNX policy through onnxruntime instead of the torch model; without
  ``checkpoint=`` the file alone is enough for a Go2 policy: its metadata (actuation, timing, observation layout,
  command ranges) rebuilds the task, on the nominal robot.
- ``pretrained=<name>`` runs a policy shipped with rlcore (a task's ``TaskSpec.pretrained``, e.g. ``go2_flat``) that way.
- ``viewer=true`` opens MuJoCo's interactive viewer instead (go2 tasks): one robot in real time, velocity
  commands from the keyboard (:mod:`rlcore.viewer`).

Run ``python -m rlcore.play --help`` for every key.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlcore.checkpoint.io import seed_everything
from rlcore.checkpoint.run_files import RunInfo, load_run, make_run_env, make_run_policy
from rlcore.config.cli import (
    UserError,
    check_counts,
    check_device,
    complete_args,
    merge_settings,
    parse_key_values,
    split_env_overrides,
    usage,
    user_errors,
)
from rlcore.config.schema import PlayCfg
from rlcore.deployment import STATE_INPUTS, read_onnx_interface
from rlcore.env.task import find_pretrained, get_task, shipped_policies, tasks_with
from rlcore.errors import ConfigError
from rlcore.logging.logger import metric_name
from rlcore.logging.video import VideoWriter, control_period, render_frame  # rlcore.export imports control_period here

SUMMARY = ("Run a trained policy in its task deterministically; print episode returns and the task's metrics. "
           "video=true writes an MP4, onnx=<file> plays an exported ONNX policy (a file whose task rebuilds from its "
           "interface, e.g. go2's, needs no checkpoint), pretrained=<name> a policy shipped with a task, viewer=true "
           "opens MuJoCo's viewer with keyboard velocity commands (tasks with a viewer, e.g. go2).")


class OnnxActor:
    """An exported ONNX policy run through onnxruntime on TensorDict observations, state carried per env.

    Built for a checkpoint's policy (:meth:`for_policy`: the file's inputs are checked against it) or from the
    file's own interface metadata alone (:meth:`from_interface`: no checkpoint, no torch model).
    """

    def __init__(self, session, groups_1d: list[str], image_inputs: list[str], state: dict[str, tuple[int, int]],
                 num_envs: int) -> None:
        """``state``: recurrent input name -> (layers, hidden); the state of env e is ``[:, e, :]``."""
        self.session = session
        self.groups_1d = list(groups_1d)
        self.image_inputs = list(image_inputs)
        self.output_names = [o.name for o in session.get_outputs()]
        self.state = {name: np.zeros((layers, num_envs, hidden), dtype=np.float32)
                      for name, (layers, hidden) in state.items()}
        self.state_outputs = {name: name.replace("_in", "_out") for name in state}

    @classmethod
    def for_policy(cls, path: str, policy, num_envs: int) -> OnnxActor:
        """``path`` run in place of the checkpoint's torch ``policy``; its inputs must be the policy's (a file exported
        with a command integral has its state ``u_in`` besides them: it is driven by its own interface), and so must
        the observation groups its interface says it reads. A UserError (one line) says how they differ."""
        try:
            meta = read_onnx_interface(path)
        except Exception:  # not an ONNX file: _onnx_session below says so in one line
            meta = {}
        session = _onnx_session(path)
        reference = policy.as_onnx()
        expected = {name: tuple(x.shape) for name, x in zip(reference.input_names, reference.example_inputs)}
        given = {i.name: tuple(i.shape) for i in session.get_inputs()}
        if meta.get("command_integral"):  # the loop's own state, fed back by the actor from the file's interface
            given.pop(meta["command_integral"].get("state", "u_in"), None)
        problems = _input_mismatches(expected, given)
        groups = list(policy.obs_groups_1d)
        if "obs_groups" in meta and list(meta["obs_groups"]) != groups:
            problems.append(f"it reads the observation groups [{', '.join(meta['obs_groups'])}], the policy "
                            f"[{', '.join(groups)}]")
        if problems:
            task = f" (it is a policy for task {meta['task']})" if meta.get("task") else ""
            raise UserError(f"onnx={path} does not match the checkpoint's policy ({type(policy).__name__}){task}: "
                            + "; ".join(problems) + ".")
        if meta.get("command_integral"):
            return cls.from_interface(path, meta, num_envs)
        groups_2d = list(policy.obs_groups_2d)
        state = {n: (expected[n][0], expected[n][2]) for n in reference.input_names if n in STATE_INPUTS}
        return cls(session, list(policy.obs_groups_1d), [n for n in reference.input_names if n in groups_2d], state,
                   num_envs)

    @classmethod
    def from_interface(cls, path: str, meta: dict, num_envs: int) -> OnnxActor:
        """``path`` driven by its ``rlcore.*`` metadata alone (observation groups, recurrent state shapes)."""
        session = _onnx_session(path)
        state = {s["input"]: (int(s["shape"][0]), int(s["shape"][2])) for s in meta.get("recurrent_state") or []}
        images = [i["name"] for i in meta["inputs"] if i["name"] not in state and i["name"] != "obs"]
        groups = [g for g in meta["obs_groups"] if g not in images]
        return cls(session, groups, images, state, num_envs)

    def __call__(self, obs) -> torch.Tensor:
        feeds = {}
        if self.groups_1d:
            groups = self.groups_1d
            flat = torch.cat([obs[g] for g in groups], dim=-1) if len(groups) > 1 else obs[groups[0]]
            feeds["obs"] = flat.detach().float().cpu().numpy()
        for name in self.image_inputs:
            feeds[name] = obs[name].detach().float().cpu().numpy()
        feeds.update(self.state)
        outputs = dict(zip(self.output_names, self.session.run(None, feeds)))
        for name, out in self.state_outputs.items():
            self.state[name] = outputs[out]
        return torch.from_numpy(outputs["actions"])

    def reset(self, dones) -> None:
        if self.state:
            mask = dones.detach().cpu().numpy().astype(bool)
            for array in self.state.values():
                array[:, mask, :] = 0.0


def _onnx_session(path: str):
    """An onnxruntime CPU session of ``path``; one clear line when the file is missing or not a model."""
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - onnxruntime is a dependency
        raise UserError("onnx= needs onnxruntime: pip install onnxruntime") from None
    if not os.path.isfile(path):
        raise UserError(f"onnx={path}: no such file.")
    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as err:
        raise UserError(f"onnx={path}: onnxruntime cannot load it ({' '.join(str(err).split())[:200]}).") from None


def _input_mismatches(expected: dict[str, tuple], given: dict[str, tuple]) -> list[str]:
    """How the ONNX inputs ``given`` (name -> shape) differ from the policy's ``expected`` ones (batch axes free)."""
    problems = [f"input '{n}' missing" for n in expected if n not in given]
    problems += [f"unexpected input '{n}'" for n in given if n not in expected]
    for name, shape in expected.items():
        if name in given and len(given[name]) == len(shape):
            batch_axis = 1 if name in STATE_INPUTS else 0
            for axis, (a, b) in enumerate(zip(given[name], shape)):
                if axis != batch_axis and isinstance(a, int) and a != b:
                    problems.append(f"input '{name}' has shape {list(given[name])}, the policy needs "
                                    f"{['batch' if i == batch_axis else d for i, d in enumerate(shape)]}")
                    break
        elif name in given:
            problems.append(f"input '{name}' has {len(given[name])} dims, the policy needs {len(shape)}")
    return problems


class TorchActor:
    """The checkpoint's torch policy: deterministic output, recurrent state reset per finished env."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def __call__(self, obs):
        return self.policy(obs, stochastic_output=False)

    def reset(self, dones) -> None:
        self.policy.reset(dones)


class ClippedActor:
    """``actor`` with its actions clamped to ``[-clip, clip]``: the clip training applied before ``env.step``
    (``runner.clip_actions``; an exported file's ``action_clip``). Without it the env would receive, and its
    last-action observation report, actions training never sent."""

    def __init__(self, actor, clip: float) -> None:
        self.actor, self.clip = actor, float(clip)

    def __call__(self, obs) -> torch.Tensor:
        return self.actor(obs).clamp(-self.clip, self.clip)

    def reset(self, dones) -> None:
        self.actor.reset(dones)


def clipped(actor, clip: float | None):
    """``actor`` as :class:`ClippedActor` with ``clip``, or unchanged when ``clip`` is None (training did not clip)."""
    return actor if clip is None else ClippedActor(actor, clip)


def _clip_label(clip: float | None, source: str) -> str:
    """The start line's note on the action clip (empty without one)."""
    return "" if clip is None else f", actions clipped to +-{float(clip):g} ({source})"


@dataclass
class PolicySource:
    """What ``play`` runs: a checkpoint (its torch policy, or ``onnx=`` in its place), or an ONNX file alone."""

    info: RunInfo  # the task to build (for an ONNX file alone: rebuilt from its interface)
    make_actor: Callable  # (env, num_envs) -> actor
    label: str  # for the start line
    video_stem: str  # default video file name
    video_dir: str  # default video folder


def _scalar(value) -> float | None:
    try:
        if isinstance(value, torch.Tensor):
            if value.numel() == 0:
                return None
            value = value.detach().float().mean().item()
        value = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return value if math.isfinite(value) else None


def play(args: dict, env_overrides: dict | None = None) -> dict:
    """Run ``args`` (keys of :class:`~rlcore.config.schema.PlayCfg`; the others take their defaults); returns
    what was printed as data. ``env_overrides``: task settings merged over the policy's (``task.env.*`` on the
    command line, e.g. ``task.env.sim.backend=warp``)."""
    args = complete_args(args, PlayCfg, "play")
    episodes = _check_args(args)
    device = check_device(args["device"])
    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    seed_everything(int(args["seed"]))  # tasks that draw from the global generators replay the same way
    source = policy_source(args, device)
    if env_overrides:
        source.info.task["env"] = merge_settings(source.info.task.get("env") or {}, env_overrides)
    if args.get("viewer"):
        return view(source, args, device)
    info = source.info
    num_envs = int(args["num_envs"] or max(1, min(episodes, int(info.task.get("num_envs") or episodes))))
    env = make_run_env(info, num_envs, device, int(args["seed"]))
    if args["video"] and not callable(getattr(env, "render", None)):
        raise UserError(f"video=true: task {info.task['name']} cannot render (its env has no render() method).")
    actor = source.make_actor(env, num_envs)
    max_len = int(torch.as_tensor(env.max_episode_length).max().item())
    per_env = math.ceil(episodes / num_envs)  # each env contributes at most this many episodes
    max_steps = int(args["max_steps"]) if args.get("max_steps") else per_env * max_len + 1
    print(f"[rlcore] play: task={info.task['name']}, {source.label}, {num_envs} env(s), {episodes} episode(s) of "
          f"up to {max_len} steps, device={device}", flush=True)
    writer = None
    if args["video"]:
        video_path = args.get("video_file") or os.path.join(source.video_dir, "videos", f"{source.video_stem}.mp4")
        period = control_period(env)
        writer = VideoWriter(video_path, fps=float(args["video_fps"] if args.get("video_fps") is not None
                                                   else (1.0 / period if period else 30.0)))
    try:
        result = run_episodes(env, actor, device, episodes, per_env, max_steps, writer, args)
    finally:
        if writer is not None:
            writer.close()
    _print_summary(result, episodes, writer)
    return result


def _check_args(args: dict) -> int:
    """The number of episodes; one clear line for what cannot run."""
    sources = [k for k in ("checkpoint", "pretrained") if args.get(k)]
    if not sources and not args.get("onnx"):
        raise UserError("play needs checkpoint=<model_<it>.pt or a run directory>, onnx=<exported policy.onnx> or "
                        f"pretrained=<name> ({', '.join(sorted(shipped_policies())) or 'none installed'}), e.g. python -m rlcore.play "
                        "checkpoint=logs/pendulum/<run>.")
    if len(sources) > 1 or (args.get("pretrained") and args.get("onnx")):
        raise UserError("pretrained= is a policy of its own: give it without checkpoint= or onnx=.")
    check_counts(args, ("episodes", "num_envs", "threads", "video_width", "video_height"))
    if args.get("video_fps") is not None and not float(args["video_fps"]) > 0:
        raise UserError(f"video_fps={args['video_fps']}: must be > 0 (leave it unset for the task's control rate).")
    return int(args["episodes"])


def policy_source(args: dict, device: str) -> PolicySource:
    """The policy ``args`` name: a checkpoint's (torch, or its ``onnx=`` export), or an ONNX file alone
    (``onnx=`` without a checkpoint, or ``pretrained=``) with the task rebuilt from the file's interface."""
    if args.get("checkpoint"):
        info = load_run(str(args["checkpoint"]))
        if args.get("task") and args["task"] != info.task.get("name"):
            raise UserError(f"task={args['task']}: checkpoint {info.checkpoint} was trained on task="
                            f"{info.task.get('name')}; leave task= out (the checkpoint's task is played) or give a "
                            f"{args['task']} checkpoint.")
        onnx = args.get("onnx")
        clip = info.train_cfg.get("clip_actions")  # what training's runner applied before env.step

        def make_actor(env, num_envs: int):
            policy = make_run_policy(info, env, device)
            return clipped(OnnxActor.for_policy(str(onnx), policy, num_envs) if onnx else TorchActor(policy), clip)

        model = (info.train_cfg.get(info.policy_set) or {}).get("class_name", "?")
        label = (f"checkpoint={info.checkpoint} (iteration {info.ckpt.get('iter', '?')}), policy="
                 + (f"onnx {onnx}" if onnx else f"torch {model}") + _clip_label(clip, "runner.clip_actions"))
        return PolicySource(info, make_actor, label, os.path.splitext(os.path.basename(info.checkpoint))[0],
                            info.run_dir)
    if args.get("pretrained"):
        try:
            path = find_pretrained(str(args["pretrained"])).path  # another task's policy: refused below, naming it
        except ConfigError as err:
            raise UserError(str(err)) from None
    else:
        path = str(args["onnx"])
    meta = onnx_interface(path)
    if args.get("task") and args["task"] != meta["task"]:
        raise UserError(f"task={args['task']}: {path} is a policy for task {meta['task']}; leave task= out or give "
                        f"task={meta['task']}.")
    info = RunInfo(checkpoint=path, ckpt={}, train_cfg={}, task={"name": meta["task"], "env": env_from_interface(meta)},
                   run_dir=os.path.dirname(os.path.abspath(path)))
    name = f"pretrained={args['pretrained']}" if args.get("pretrained") else f"onnx={path}"
    stem = os.path.splitext(os.path.basename(path))[0]
    clip = meta.get("action_clip")  # the bound on what the env received in training (the rebuilt env applies it too)
    return PolicySource(info, lambda env, n: clipped(OnnxActor.from_interface(path, meta, n), clip),
                        f"{name} (onnxruntime, interface from the file)" + _clip_label(clip, "its action_clip"),
                        stem, os.getcwd())


def onnx_interface(path: str) -> dict:
    """The rlcore interface in ``path``'s metadata; one clear line when there is none or its task cannot be rebuilt."""
    if not os.path.isfile(path):
        raise UserError(f"onnx={path}: no such file.")
    try:
        meta = read_onnx_interface(path)
    except Exception as err:
        raise UserError(f"onnx={path}: cannot read it as an ONNX model ({' '.join(str(err).split())[:160]}).") from None
    if not meta or "task" not in meta or "inputs" not in meta:
        raise UserError(f"onnx={path} carries no rlcore interface (metadata_props); give the checkpoint it was "
                        "exported from too: checkpoint=<run> onnx=<file>.")
    try:
        rebuilds = get_task(str(meta["task"])).env_from_interface is not None
    except ConfigError as err:
        raise UserError(f"onnx={path} is a policy for task {meta['task']!r}: {err}") from None
    if not rebuilds:
        raise UserError(f"onnx={path} is a {meta['task']} policy; an ONNX file alone replays policies of tasks whose "
                        f"interface rebuilds them ({', '.join(tasks_with('env_from_interface')) or 'none installed'}); "
                        "for other tasks give checkpoint=<run> onnx=<file>.")
    return meta


def env_from_interface(meta: dict) -> dict:
    """The env settings that replay an exported file, from its task's ``TaskSpec.env_from_interface``."""
    return get_task(str(meta["task"])).env_from_interface(meta)



#: Seconds without output after which ``play`` prints a progress line (steps done, episodes finished): parallel
#: episodes end together, a Go2 episode of 1,000 steps only after tens of seconds on a CPU.
PROGRESS_S = 5.0


def progress_line(steps: int, max_steps: int, finished: int, episodes: int, elapsed: float) -> str:
    """The line ``play`` prints while no episode has ended for :data:`PROGRESS_S` seconds."""
    return (f"[rlcore] play: step {steps} (at most {max_steps}), {finished} of {episodes} episode(s) finished, "
            f"{elapsed:.0f} s")


def run_episodes(env, actor, device: str, episodes: int, per_env: int, max_steps: int, writer, args: dict) -> dict:
    """Step ``env`` with ``actor`` until ``episodes`` have finished (at most ``per_env`` from each env) or
    ``max_steps``; print each episode, and :func:`progress_line` after :data:`PROGRESS_S` seconds without one;
    returns returns, lengths, mean task metrics, steps (and the video path)."""
    num_envs = env.num_envs
    returns = torch.zeros(num_envs, dtype=torch.float64)
    lengths = torch.zeros(num_envs, dtype=torch.long)
    counts = [0] * num_envs
    finished: list[tuple[int, float, int]] = []
    metric_sum: dict[str, float] = {}
    metric_n: dict[str, int] = {}
    steps = 0
    start = last_output = time.monotonic()
    with torch.inference_mode():
        obs = env.get_observations().to(device)
        if writer is not None:
            writer.write(render_frame(env, args["video_width"], args["video_height"], "video=true"))
        while len(finished) < episodes and steps < max_steps:
            obs, rewards, dones, extras = env.step(actor(obs).to(env.device))
            obs, dones = obs.to(device), dones.to(torch.bool)
            actor.reset(dones.to(device))
            steps += 1
            returns += rewards.detach().double().cpu()
            lengths += 1
            for raw_key, value in (extras.get("log") or {}).items():
                v, key = _scalar(value), metric_name(raw_key)  # named as the training logs name it
                if v is not None:
                    metric_sum[key] = metric_sum.get(key, 0.0) + v
                    metric_n[key] = metric_n.get(key, 0) + 1
            if writer is not None:
                writer.write(render_frame(env, args["video_width"], args["video_height"], "video=true"))
            for i in dones.nonzero().flatten().cpu().tolist():
                if counts[i] < per_env and len(finished) < episodes:
                    counts[i] += 1
                    finished.append((i, float(returns[i]), int(lengths[i])))
                    print(f"episode {len(finished):3d}  env {i:3d}  return {float(returns[i]):12.3f}  "
                          f"length {int(lengths[i])}", flush=True)
                    last_output = time.monotonic()
                returns[i] = 0.0
                lengths[i] = 0
            now = time.monotonic()
            if now - last_output >= PROGRESS_S and len(finished) < episodes and steps < max_steps:
                print(progress_line(steps, max_steps, len(finished), episodes, now - start), flush=True)
                last_output = now
    result = {"returns": [r for _, r, _ in finished], "lengths": [n for _, _, n in finished],
              "metrics": {k: metric_sum[k] / metric_n[k] for k in sorted(metric_sum)}, "steps": steps,
              "video": writer.path if writer is not None else None}
    if not finished:
        result["partial_return"] = float(returns.mean())
    return result


def _print_summary(result: dict, episodes: int, writer) -> None:
    finished, steps = len(result["returns"]), result["steps"]
    if finished:
        rets = torch.tensor(result["returns"], dtype=torch.float64)
        std = float(rets.std()) if len(rets) > 1 else 0.0
        print(f"mean return {float(rets.mean()):.3f} +/- {std:.3f} over {len(rets)} episode(s) "
              f"(min {float(rets.min()):.3f}, "
              f"max {float(rets.max()):.3f}); mean length {sum(result['lengths']) / len(result['lengths']):.1f}")
    else:
        print(f"no episode finished within {steps} steps (max_steps); mean partial return "
              f"{result['partial_return']:.3f}")
    if finished < episodes and finished:
        print(f"only {finished} of {episodes} episodes finished within {steps} steps (raise max_steps=)")
    if result["metrics"]:
        print("task metrics (mean over the steps that reported them):")
        width = max(len(k) for k in result["metrics"])
        for key, value in result["metrics"].items():
            print(f"  {key:<{width}}  {value:.4f}")
    if writer is not None:
        print(f"[rlcore] video: {writer.path} ({writer.frames_written} frames, {writer.fps:g} fps)")


def view(source: PolicySource, args: dict, device: str) -> dict:
    """``viewer=true``: the policy driving one robot in MuJoCo's viewer, commands from the keyboard; returns
    :func:`rlcore.viewer.run_viewer`'s summary."""
    from rlcore.viewer import make_viewer_env, run_viewer  # glfw and MuJoCo's viewer: only for the window

    if args["video"]:
        raise UserError("viewer=true and video=true: choose one (the viewer shows the robot live; video=true records "
                        "an MP4 without a window).")
    if args.get("num_envs") not in (None, 1):
        raise UserError(f"num_envs={args['num_envs']}: the viewer runs one env; leave num_envs out.")
    env = make_viewer_env(source.info, device, int(args["seed"]))
    try:
        actor = source.make_actor(env, 1)
        print(f"[rlcore] play: task={source.info.task['name']}, {source.label}, viewer, device={device}")
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
        argv, env_overrides = split_env_overrides(argv, "play")
        play(parse_key_values(argv, PlayCfg, "play"), env_overrides)


if __name__ == "__main__":
    main()
