"""``python -m rlcore.export checkpoint=<model_<it>.pt or run dir> format=onnx|jit [output=<file>]``.

Writes the deployable policy of a checkpoint (PPO actor or distillation student, observation normaliser
inside the graph; an ONNX file carries the task's deployment interface in its ``metadata_props``, read
back by ``rlcore.deployment.read_onnx_interface``) and, beside it, a JSON file (same name, ``.json``)
with its input/output names and shapes, the observation groups that make up each input, the normaliser
statistics and the result of the check below.

The check: the eager policy is run deterministically in the checkpoint's task for ``verify_steps`` steps (its
actions clipped to the run's ``runner.clip_actions``, as in training) and the observations are recorded; then
the eager policy and the written file are both run on that recorded stream (from a zero recurrent state) and
every output is compared. A difference beyond ``atol`` (1e-5) fails loudly: exit status 1, and the file is
renamed ``<file>.unverified``.

Run ``python -m rlcore.export --help`` for every key.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from rlcore.config.cli import (
    UserError,
    check_counts,
    check_device,
    check_output_file,
    complete_args,
    parse_key_values,
    usage,
    user_errors,
)
from rlcore.config.schema import ExportCfg
from rlcore.logging.video import control_period

# torch, onnxruntime and the run's task load inside the functions that use them, so that ``--help`` and a bad
# argument answer at once (importing torch alone takes seconds).

SUMMARY = ("Export a checkpoint's policy to ONNX or TorchScript with a JSON of its inputs, outputs, observation "
           "groups and normaliser, verified against the eager policy on recorded observations.")

#: Exit status when the written file does not reproduce the eager policy.
VERIFY_FAILED_EXIT = 1


class ExportMismatch(Exception):
    """The exported file's outputs differ from the eager policy's beyond the tolerance."""


def policy_inputs(policy, obs) -> list:
    """The exported policy's observation inputs for ``obs`` (TensorDict), in call order, as float32 CPU tensors."""
    import torch

    inputs = []
    for name, _ in policy.export_inputs():
        if name == "obs":
            groups = list(policy.obs_groups_1d)
            x = torch.cat([obs[g] for g in groups], dim=-1) if len(groups) > 1 else obs[groups[0]]
        else:
            x = obs[name]
        inputs.append(x.detach().float().cpu().contiguous())
    return inputs


def describe(policy, obs, fmt: str, info, output: str, env=None, module=None) -> dict:
    """The JSON description of an exported policy (names, shapes, groups, normaliser); ``module``: the exported
    ``as_onnx()`` wrapper (default: the policy's own)."""
    import torch

    from rlcore.deployment import STATE_INPUTS

    module = policy.as_onnx() if module is None else module
    input_names, output_names = list(module.input_names), list(module.output_names)
    shapes = {n: list(x.shape) for n, x in zip(input_names, module.example_inputs)}
    inputs = []
    for name in input_names:
        entry: dict = {"name": name, "dtype": "float32"}
        if name in STATE_INPUTS:
            entry["shape"] = [shapes[name][0], "batch", shapes[name][2]]
            entry["role"] = "recurrent state (zeros at an episode start)"
        else:
            entry["shape"] = ["batch", *shapes[name][1:]]
            if name == "obs":
                entry["groups"] = [{"name": g, "size": int(obs[g].shape[-1])} for g in policy.obs_groups_1d]
            else:
                entry["groups"] = [{"name": name, "shape": list(obs[name].shape[1:])}]
        inputs.append(entry)
    outputs = [{"name": "actions", "dtype": "float32", "shape": ["batch", int(policy.output_dim)]}]
    for name in output_names[1:]:
        outputs.append({"name": name, "dtype": "float32", "shape": [shapes[name.replace("_out", "_in")][0], "batch",
                                                                   shapes[name.replace("_out", "_in")][2]]})
    if fmt == "jit":  # TorchScript: positional observation inputs; recurrent state is kept inside the module
        inputs = [i for i in inputs if i["name"] not in STATE_INPUTS]
        outputs = outputs[:1]
    normalizer = None
    norm = getattr(policy, "obs_normalizer", None)
    if getattr(policy, "obs_normalization", False) and hasattr(norm, "mean"):
        normalizer = {"in_graph": True, "input": "obs", "formula": "(obs - mean) / (std + eps)",
                      "mean": [float(v) for v in norm.mean.flatten().tolist()],
                      "std": [float(v) for v in norm.std.flatten().tolist()],
                      "eps": float(norm.eps), "count": int(norm.count)}
    return {
        "format": fmt,
        "file": os.path.basename(output),
        "checkpoint": os.path.abspath(info.checkpoint),
        "iteration": info.ckpt.get("iter"),
        "task": info.task["name"],
        "task_env": info.task.get("env") or {},
        "algorithm": info.algorithm,
        "model": type(policy).__name__,
        "recurrent": bool(getattr(policy, "is_recurrent", False) or getattr(module, "is_recurrent", False)),
        "obs_set": info.policy_set,
        "obs_groups": {k: list(v) for k, v in (info.train_cfg.get("obs_groups") or {}).items()},
        "inputs": inputs,
        "outputs": outputs,
        "action_dim": int(policy.output_dim),
        "action_clip": action_clip(info, env),
        "control_period_s": control_period(env) if env is not None else None,
        "normalizer": normalizer,
        "deterministic": True,
        "torch_version": torch.__version__,
        "usage": ("onnxruntime: session.run(None, {input name: array}); recurrent state (h_in/c_in, the command "
                  "integral's u_in) starts at zeros and is fed back from h_out/c_out/u_out" if fmt == "onnx" else
                  "torch.jit.load(file)(*inputs) in the order of 'inputs'; recurrent modules keep their state, "
                  "call reset() to zero it"),
    }


def action_clip(info, env=None) -> float | None:
    """The bound training put on the actions the env received (None: none): the run's ``runner.clip_actions`` and
    the task's own clip (its ``deployment_interface()``'s ``action_clip``), the smaller of the two; what the ONNX
    interface's ``action_clip`` states and what the deployer applies to the graph's ``actions``."""
    from rlcore.deployment import training_action_clip

    hook = getattr(env, "deployment_interface", None)
    task_clip = (hook() or {}).get("action_clip") if callable(hook) else None
    return training_action_clip(task_clip, info.train_cfg.get("clip_actions"))


def _max_diff(a, b, rtol: float = 0.0) -> float:
    """``max |a - b| - rtol * |b|`` over elements (inf when the shapes differ): compared with ``atol``."""
    import torch

    a, b = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
    if a.shape != b.shape:
        return float("inf")
    return float(((a - b).abs() - rtol * b.abs()).max()) if a.numel() else 0.0


def verify_onnx(path: str, module, recorded: list, reference: list, rtol: float = 0.0) -> tuple[float, int]:
    """``(max |onnx - eager|, step of the max)`` over the recorded stream, state carried through onnxruntime;
    ``module``: the ``as_onnx()`` wrapper that was exported (its input names and example shapes)."""
    import onnxruntime as ort

    from rlcore.deployment import STATE_INPUTS

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    out_names = [o.name for o in session.get_outputs()]
    example = dict(zip(module.input_names, module.example_inputs))
    batch = recorded[0][0].shape[0]
    state = {n: np.zeros((example[n].shape[0], batch, example[n].shape[2]), dtype=np.float32)
             for n in names if n in STATE_INPUTS}
    worst, worst_step = 0.0, 0
    obs_names = [n for n in module.input_names if n not in STATE_INPUTS]
    for step, (inputs, ref) in enumerate(zip(recorded, reference)):
        feeds = {n: x.numpy() for n, x in zip(obs_names, inputs)}
        feeds.update(state)
        outputs = dict(zip(out_names, session.run(None, feeds)))
        for n in state:
            state[n] = outputs[n.replace("_in", "_out")]
        diff = _max_diff(outputs["actions"], ref, rtol)
        if diff > worst:
            worst, worst_step = diff, step
    return worst, worst_step


def verify_jit(path: str, recorded: list, reference: list, rtol: float = 0.0) -> tuple[float, int]:
    """``(max |jit - eager|, step of the max)``; a recurrent module carries its own state through the stream."""
    import torch

    module = torch.jit.load(path, map_location="cpu")
    module.eval()
    if hasattr(module, "reset"):
        module.reset()
    worst, worst_step = 0.0, 0
    with torch.no_grad():
        for step, (inputs, ref) in enumerate(zip(recorded, reference)):
            diff = _max_diff(module(*inputs), ref, rtol)
            if diff > worst:
                worst, worst_step = diff, step
    return worst, worst_step


def export(args: dict) -> dict:
    """Run ``args`` (keys of :class:`~rlcore.config.schema.ExportCfg`; the others take their defaults);
    returns the JSON description."""
    import torch

    from rlcore.checkpoint.io import seed_everything
    from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy

    args = complete_args(args, ExportCfg, "export")
    fmt, device = _check_args(args)
    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    seed_everything(int(args["seed"]))  # tasks that draw from the global generators replay the same way
    info = load_run(str(args["checkpoint"]))
    env = make_run_env(info, int(args["num_envs"]), device, int(args["seed"]))
    policy = make_run_policy(info, env, device)
    default_name = "policy.onnx" if fmt == "onnx" else "policy.pt"
    output = check_output_file("output", args.get("output") or os.path.join(info.run_dir, "exported", default_name))

    recorded, observations, reference = record_stream(policy, env, device, int(args["verify_steps"]),
                                                      info.train_cfg.get("clip_actions"))
    rtol, atol = float(args["rtol"]), float(args["atol"])
    module = _command_integral_module(policy, env, args)
    if module is not None:  # the graph is the policy plus its integral loop: check the file against that
        reference = _stateful_reference(module, recorded)
    worst = _write_and_verify(fmt, policy, env, info, output, recorded, reference, rtol, atol, module)

    meta = describe(policy, observations[0], fmt, info, output, env, module)
    meta["verification"] = {"recorded_steps": len(recorded), "num_envs": int(args["num_envs"]),
                            "max_abs_diff": worst, "atol": atol, "rtol": rtol,
                            "passed": True}
    meta_path = os.path.splitext(output)[0] + ".json"
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"[rlcore] exported {info.algorithm} policy ({meta['model']}) of {info.checkpoint} to {output}")
    print(f"[rlcore] verified on {len(recorded)} recorded steps x {int(args['num_envs'])} envs: max |{fmt} - eager| "
          f"= {worst:.2e} <= {atol:g}")
    print(f"[rlcore] description: {meta_path}")
    meta["path"], meta["json"] = output, meta_path
    return meta


def _check_args(args: dict) -> tuple[str, str]:
    """``(format, device)`` once every value of ``args`` is usable; a UserError (one line) names the first that
    is not, before anything is loaded."""
    if not args.get("checkpoint"):
        raise UserError("export needs checkpoint=<model_<it>.pt or a run directory>, e.g. "
                        "python -m rlcore.export checkpoint=logs/pendulum/<run> format=onnx.")
    fmt = str(args["format"])  # "onnx" or "jit": complete_args / parse_key_values checked it against ExportFormat
    check_counts(args, ("num_envs", "verify_steps", "threads"))
    if not float(args["atol"]) > 0 or float(args["rtol"]) < 0:
        raise UserError(f"atol={args['atol']}, rtol={args['rtol']}: atol must be > 0 and rtol >= 0.")
    if args.get("output"):
        check_output_file("output", str(args["output"]))
    return fmt, check_device(args["device"])


def record_stream(policy, env, device: str, steps: int, clip: float | None = None) -> tuple[list, list, list]:
    """``(recorded inputs, observations, eager reference)`` for the check: first the observations the policy really
    meets (the eager policy drives the task ``steps`` steps, recurrent state reset per episode, its actions clamped
    to ``[-clip, clip]`` as training's ``runner.clip_actions`` clamped them, so that the env, and its last-action
    observation, sees what it saw in training), then the eager policy's actions on that stream (the graph's output,
    unclipped: the deployer applies the file's ``action_clip``), one continuous sequence per env from a zero state."""
    import torch

    recorded, observations = [], []
    with torch.inference_mode():
        obs = env.get_observations().to(device)
        for _ in range(steps):
            observations.append(obs.clone())
            recorded.append(policy_inputs(policy, obs))
            actions = policy(obs, stochastic_output=False)
            if clip is not None:
                actions = actions.clamp(-float(clip), float(clip))
            obs, _, dones, _ = env.step(actions.to(env.device))
            obs = obs.to(device)
            policy.reset(dones.to(device))
        policy.reset()
        reference = [policy(o, stochastic_output=False).detach().float().cpu() for o in observations]
        policy.reset()
    return recorded, observations, reference


def _command_integral_module(policy, env, args: dict):
    """The graph the task exports for ``policy`` (its env's ``export_module``, the task protocol of
    :mod:`rlcore.env.task`; for the Go2, the policy with its integral loop on the command: the task's default when
    ``command_integral_gain`` is null, none at 0), or None for the policy alone; ONNX only."""
    keys = ("gain", "limit", "band", "yaw_gain", "yaw_limit", "yaw_band")
    gain = args.get("command_integral_gain")
    if str(args["format"]) != "onnx":
        if gain:
            raise UserError("command_integral_gain > 0 is written into an ONNX graph: use format=onnx.")
        return None
    hook = getattr(env, "export_module", None)
    if not callable(hook):
        if gain:
            raise UserError(f"command_integral_gain={gain}: the task {type(env).__name__} has no integral loop to "
                            "export (its env has no export_module); leave the key out.")
        return None
    options = {f"command_integral_{k}": None if args.get(f"command_integral_{k}") is None
               else float(args[f"command_integral_{k}"]) for k in keys}
    return hook(policy, **options)


def _stateful_reference(module, recorded: list) -> list:
    """``module``'s actions on the recorded stream, its states (``u``, and an RNN's memory) carried from zeros
    (each env one sequence)."""
    import torch

    state = module.initial_state(recorded[0][0].shape[0])
    reference = []
    with torch.no_grad():
        for inputs in recorded:
            actions, *state = module(*inputs, *state)
            reference.append(actions.float())
    return reference


def _write_and_verify(fmt: str, policy, env, info, output: str, recorded: list, reference: list, rtol: float,
                      atol: float, module=None) -> float:
    """Write the ``fmt`` file to ``output`` and return ``max |file - eager|`` on the recorded stream; beyond the
    tolerance, move the file to ``<output>.unverified`` and raise :class:`ExportMismatch`. ``module``: the ONNX
    wrapper to write (default: ``policy.as_onnx()``)."""
    from rlcore.deployment import export_jit, export_onnx, policy_metadata

    if fmt == "onnx":
        module = policy.as_onnx() if module is None else module
        export_onnx(module, output, metadata=policy_metadata(module, policy, env, info.task["name"],
                                                             action_clip=info.train_cfg.get("clip_actions")))
        worst, step = verify_onnx(output, module, recorded, reference, rtol)
    else:
        export_jit(policy.as_jit(), output)
        worst, step = verify_jit(output, recorded, reference, rtol)
    if not worst <= atol:
        failed = output + ".unverified"
        os.replace(output, failed)
        bound = f"atol {atol:g}" + (f" + rtol {rtol:g} x |eager|" if rtol else "")
        raise ExportMismatch(f"the exported {fmt} policy does not reproduce the eager policy: max |exported - eager| "
                             f"= {worst:.3g} > {bound} (step {step} of {len(recorded)} recorded steps); the file "
                             f"was moved to {failed}.")
    return worst


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m rlcore.export`` and ``rlcore-export``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(usage("export", ExportCfg, SUMMARY))
        return
    with user_errors():
        try:
            export(parse_key_values(argv, ExportCfg, "export"))
        except ExportMismatch as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(VERIFY_FAILED_EXIT)


if __name__ == "__main__":
    main()
