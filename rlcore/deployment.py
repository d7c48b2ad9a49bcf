"""Write exported policies to disk (ONNX, TorchScript) and check them; the deployment interface stored inside
an ONNX file (``metadata_props``, keys ``rlcore.*``): written by :func:`write_onnx_metadata`, read back by
:func:`read_onnx_interface`."""

from __future__ import annotations

import json
import os
import warnings

import torch
import torch.nn as nn

from rlcore import __version__


def export_onnx(module: nn.Module, path: str | os.PathLike, opset_version: int = 17,
                metadata: dict | None = None) -> str:
    """Export a model's ``as_onnx()`` wrapper to ``path`` with its input/output names and a dynamic batch axis.

    Uses the TorchScript-based exporter (exact for GRU/LSTM, fast); falls back to the torch.export-based
    exporter where a torch release no longer ships it. ``metadata`` (e.g. :func:`policy_metadata`) goes into the
    file's ``metadata_props`` (:func:`write_onnx_metadata`). Returns the path written.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    kwargs = dict(input_names=list(module.input_names), output_names=list(module.output_names),
                  opset_version=opset_version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, tuple(module.example_inputs), path, dynamo=False,
                              dynamic_axes=module.dynamic_axes, **kwargs)
        except (TypeError, RuntimeError, NotImplementedError):
            torch.onnx.export(module, tuple(module.example_inputs), path, dynamo=True, **kwargs)
    if metadata:
        write_onnx_metadata(path, metadata)
    return path


def export_jit(script_module: torch.jit.ScriptModule, path: str | os.PathLike) -> str:
    """Save a model's ``as_jit()`` TorchScript module to ``path``. Returns the path written."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    script_module.save(path)
    return path


# ============================================================================ the interface inside the .onnx file
#: Prefix of the ``metadata_props`` keys rlcore writes; each value is one JSON document.
METADATA_PREFIX = "rlcore."

#: Version of the interface's layout (``rlcore.interface_version``): 2 since 2026-12-07 (docs/deployment.md). Files
#: without the key are version 1; :func:`read_onnx_interface` reads them as version 2 (:func:`upgrade_interface`).
INTERFACE_VERSION = 2

#: The JSON Schema every written interface is validated against (docs/deployment.md, "The interface, field by field").
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "schemas", "deployment_interface.v2.json")

#: Names of the recurrent state inputs of an exported graph (each ``[L, batch, H]``, zeros at an episode start, fed
#: back from the output of the same name with ``_out``): an RNN's ``h_in`` / ``c_in``, the command integral's ``u_in``.
STATE_INPUTS = ("h_in", "c_in", "u_in")

#: What each recurrent state input holds (``recurrent_state[i].role``).
STATE_ROLES = {"h_in": "rnn_hidden", "c_in": "rnn_cell", "u_in": "command_integral"}


def recurrent_state_entry(name: str, shape: list) -> dict:
    """The ``recurrent_state`` entry of state input ``name`` (``[L, "batch", H]``): where it comes back, what it holds,
    its value at an episode's first step (``initial``, every element) and when that value is set (``reset``)."""
    return {"input": name, "output": name.replace("_in", "_out"), "shape": shape, "role": STATE_ROLES[name],
            "initial": 0.0, "reset": "episode_start"}


def training_action_clip(task_clip: float | None, runner_clip: float | None) -> float | None:
    """The bound on the actions the env received in training: the smaller of the runner's ``clip_actions`` (applied
    before ``env.step``) and the task's own clip (applied inside it); None when neither clips.

    Both clamp symmetrically, one after the other, so the env saw ``clip(action, -b, b)`` with this ``b``: the one
    ``action_clip`` a deployer and every replay apply (docs/deployment.md).
    """
    clips = [float(c) for c in (task_clip, runner_clip) if c is not None]
    return min(clips) if clips else None


def policy_metadata(module: nn.Module, policy: nn.Module, env=None, task: str | None = None,
                    action_clip: float | None = None) -> dict:
    """Everything a deployment program needs beside the graph, as JSON-able data (see :func:`write_onnx_metadata`;
    the layout, version :data:`INTERFACE_VERSION`, is described field by field in docs/deployment.md and checked
    by the JSON Schema :data:`SCHEMA_PATH`).

    Args:
        module: the policy's ``as_onnx()`` wrapper (its input/output names and example shapes).
        policy: the model it was made from (its observation groups).
        env: the task; its optional ``deployment_interface()`` (joint names, gains, observation layout, ...)
            is merged in, one key per entry.
        task: the train config's task name.
        action_clip: the runner's ``clip_actions`` of the train config (None: the runner did not clip). The file's
            ``action_clip`` is :func:`training_action_clip` of it and the task's own (``deployment_interface()``'s
            ``action_clip``), so that it states what the env received in training; written whenever either clips.

    Keys written by rlcore itself: ``interface_version``, ``version``, ``task``, ``model``, ``inputs`` and
    ``outputs`` (names and shapes, ``"batch"`` for the batch axis), ``obs_groups`` (the 1D groups concatenated into
    the ``obs`` input, in order), ``recurrent_state`` (:func:`recurrent_state_entry` per state input; empty for a
    feed-forward policy), ``normalizer`` (where the observation normaliser is: inside the graph), ``control_dt``
    (seconds per policy step) and, when the task describes its groups, ``obs_layout``: each term of ``obs`` with
    its columns ``input_start:input_stop`` in that input, and ``action_clip`` (see ``action_clip`` above). Of the
    task's ``observation_groups`` only those the graph reads are kept.
    """
    shapes = {n: list(x.shape) for n, x in zip(module.input_names, module.example_inputs)}
    inputs, states = [], []
    for name in module.input_names:
        if name in STATE_INPUTS:
            shape = [shapes[name][0], "batch", shapes[name][2]]
            states.append(recurrent_state_entry(name, shape))
        else:
            shape = ["batch", *shapes[name][1:]]
        inputs.append({"name": name, "shape": shape})
    outputs = [{"name": "actions", "shape": ["batch", int(policy.output_dim)]}]
    outputs += [{"name": s["output"], "shape": s["shape"]} for s in states]
    groups_1d = list(getattr(policy, "obs_groups_1d", []))
    meta: dict = {
        "interface_version": INTERFACE_VERSION,
        "version": __version__,
        "task": task,
        "model": type(policy).__name__,
        "inputs": inputs,
        "outputs": outputs,
        "obs_groups": groups_1d,
        "recurrent_state": states,
        "normalizer": "in_graph" if getattr(policy, "obs_normalization", False) else None,
    }
    if getattr(module, "rnn_type", None):
        meta["rnn_type"] = module.rnn_type
    if callable(getattr(module, "metadata", None)):  # e.g. the command integral's gain and limit
        meta["command_integral"] = module.metadata()
    step_dt = getattr(env, "step_dt", None)
    if isinstance(step_dt, (int, float)):
        meta["control_dt"] = float(step_dt)
    interface = env.deployment_interface() if callable(getattr(env, "deployment_interface", None)) else None
    if interface:
        clash = sorted(set(interface) & (set(meta) | {"obs_layout"}))
        if clash:
            raise ValueError(f"deployment_interface() keys {clash} clash with the keys rlcore writes itself.")
        meta.update(interface)
        read = set(groups_1d) | {i["name"] for i in inputs if i["name"] != "obs" and i["name"] not in STATE_INPUTS}
        described = interface.get("observation_groups") or {}
        if described:  # a student's file describes only what its graph reads
            meta["observation_groups"] = {g: d for g, d in described.items() if g in read}
        layout = obs_layout(groups_1d, described)
        if layout is not None:
            meta["obs_layout"] = layout
    clip = training_action_clip(meta.get("action_clip"), action_clip)
    if clip is not None:
        meta["action_clip"] = clip
    return meta


def obs_layout(groups: list[str], described: dict) -> list[dict] | None:
    """The terms of the ``obs`` input (groups concatenated in order), each with its columns in that input,
    ``input_start:input_stop`` (a term's ``start:stop`` in ``observation_groups`` are its columns in its group);
    None if a group is not described term by term."""
    layout, offset = [], 0
    for group in groups:
        terms = (described.get(group) or {}).get("terms")
        if not terms:
            return None
        for term in terms:
            entry = {"group": group, **{k: v for k, v in term.items() if k not in ("start", "stop")},
                     "input_start": offset + term["start"], "input_stop": offset + term["stop"]}
            layout.append(entry)
        offset += int(described[group]["size"])
    return layout


class InterfaceError(ValueError):
    """An interface that does not follow the schema (one line: where, and what is wrong)."""


def validate_interface(metadata: dict) -> None:
    """Check ``metadata`` (the decoded ``rlcore.*`` entries) against the JSON Schema :data:`SCHEMA_PATH`; an
    :class:`InterfaceError` names the first field that does not follow it."""
    import jsonschema

    with open(SCHEMA_PATH) as f:
        schema = json.load(f)
    plain = json.loads(json.dumps(metadata, allow_nan=False, default=_plain))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(plain))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise InterfaceError(f"deployment interface v{INTERFACE_VERSION}: {where}: {error.message[:300]}")


def write_onnx_metadata(path: str | os.PathLike, metadata: dict, validate: bool = True) -> None:
    """Store ``metadata`` in the ONNX file's ``metadata_props``: key ``rlcore.<name>``, value ``json.dumps(value)``.

    Earlier ``rlcore.*`` entries are replaced; other producers' entries are kept. numpy/torch values become JSON
    numbers and lists; NaN and infinity are refused (strict JSON, readable by any deployment language). An
    interface (one with ``interface_version``) is validated first (:func:`validate_interface`; ``validate=False``
    skips it, for tests that write old or broken files on purpose).
    """
    import onnx  # only when a file is written or read: training imports this module

    if validate and "interface_version" in metadata:
        validate_interface(metadata)
    path = os.fspath(path)
    model = onnx.load(path)
    kept = [(p.key, p.value) for p in model.metadata_props if not p.key.startswith(METADATA_PREFIX)]
    del model.metadata_props[:]
    for key, value in kept:
        model.metadata_props.add(key=key, value=value)
    for key, value in metadata.items():
        model.metadata_props.add(key=METADATA_PREFIX + key, value=json.dumps(value, allow_nan=False, default=_plain))
    onnx.save(model, path)


def _plain(value):
    """numpy / torch scalars and arrays as JSON numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable (ONNX metadata takes JSON values)")


def read_onnx_interface(path: str | os.PathLike, raw: bool = False) -> dict:
    """The ``rlcore.*`` entries of an ONNX file's ``metadata_props``, decoded: ``{name: value}`` ({} if none); a
    version-1 file (exported before 2026-12-07) is read as version 2 (:func:`upgrade_interface`) unless ``raw``."""
    import onnx

    model = onnx.load(os.fspath(path), load_external_data=False)
    meta = {p.key[len(METADATA_PREFIX):]: json.loads(p.value) for p in model.metadata_props
            if p.key.startswith(METADATA_PREFIX)}
    return meta if raw or not meta else upgrade_interface(meta)


def upgrade_interface(meta: dict) -> dict:
    """A version-1 interface in version 2's layout (a version-2 one unchanged), for rlcore's own readers: what
    version 2 states as fields and version 1 left to prose or to the code (``upgraded_from: 1`` says it was read
    this way; fields version 1 never had, such as ``spawn``, stay absent)."""
    if int(meta.get("interface_version", 1)) >= 2:
        return meta
    meta = json.loads(json.dumps(meta))  # a deep copy
    meta["interface_version"], meta["upgraded_from"] = INTERFACE_VERSION, 1
    meta["recurrent_state"] = [recurrent_state_entry(s["input"], s["shape"]) for s in meta.get("recurrent_state", [])]
    groups = meta.get("observation_groups") or {}
    velocity = ((groups.get("privileged") or {}).get("terms") or [{}])[0]
    for group in groups.values():
        for term in group.get("terms", []):
            _upgrade_term(term)
        if group.get("history_of"):
            frames = int(group["frames"])
            group.update(order="newest_first", lags=list(range(1, frames + 1)), before_episode_start="first_frame")
            group.pop("reset", None)
    for term in meta.get("obs_layout") or []:
        term["input_start"], term["input_stop"] = term.pop("start"), term.pop("stop")
        _upgrade_term(term)
    loop = meta.get("command_integral")
    if loop:
        loop.pop("law", None)
        loop.update(applied_in_graph=True, axes=["lin_vel_x", "lin_vel_y"])
        if velocity.get("name") == "base_lin_vel":
            loop["estimate_scale"] = float(velocity["scale"])
    ranges = meta.pop("command_ranges", None)
    if ranges is not None:
        meta["commands"] = {"ranges": {k: ranges[k] for k in ("lin_vel_x", "lin_vel_y", "ang_vel_yaw") if k in ranges},
                            "zero_below": ranges.get("zero_below", 0.0),
                            "heading": {"in_training": bool(ranges.get("heading_command", False)),
                                        "fraction": ranges.get("heading_fraction", 1.0),
                                        "range": ranges.get("heading", [-3.14159, 3.14159])}}
    return meta


def _upgrade_term(term: dict) -> None:
    """A version-1 vector term's ``noise`` / ``bias`` as version 2's ``training_perturbations``."""
    if "noise" in term or "bias" in term:
        term["training_perturbations"] = {"noise": term.pop("noise", 0.0), "bias": term.pop("bias", 0.0)}
