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

#: Names of the recurrent state inputs of an exported graph (each ``[L, batch, H]``, zeros at an episode start, fed
#: back from the output of the same name with ``_out``): an RNN's ``h_in`` / ``c_in``, the command integral's ``u_in``.
STATE_INPUTS = ("h_in", "c_in", "u_in")


def policy_metadata(module: nn.Module, policy: nn.Module, env=None, task: str | None = None) -> dict:
    """Everything a deployment program needs beside the graph, as JSON-able data (see :func:`write_onnx_metadata`).

    Args:
        module: the policy's ``as_onnx()`` wrapper (its input/output names and example shapes).
        policy: the model it was made from (its observation groups).
        env: the task; its optional ``deployment_interface()`` (joint names, gains, observation layout, ...)
            is merged in, one key per entry.
        task: the train config's task name.

    Keys written by rlcore itself: ``version``, ``task``, ``model``, ``inputs`` and ``outputs`` (names and shapes,
    ``"batch"`` for the batch axis), ``obs_groups`` (the 1D groups concatenated into the ``obs`` input, in order),
    ``recurrent_state`` (state inputs/outputs and their shapes; empty for a feed-forward policy),
    ``normalizer`` (where the observation normaliser is: inside the graph), ``control_dt`` (seconds per policy
    step) and, when the task describes its groups, ``obs_layout``: each term of ``obs`` with its ``start:stop``
    within that input.
    """
    shapes = {n: list(x.shape) for n, x in zip(module.input_names, module.example_inputs)}
    inputs, states = [], []
    for name in module.input_names:
        if name in STATE_INPUTS:
            shape = [shapes[name][0], "batch", shapes[name][2]]
            states.append({"input": name, "output": name.replace("_in", "_out"), "shape": shape})
        else:
            shape = ["batch", *shapes[name][1:]]
        inputs.append({"name": name, "shape": shape})
    outputs = [{"name": "actions", "shape": ["batch", int(policy.output_dim)]}]
    outputs += [{"name": s["output"], "shape": s["shape"]} for s in states]
    groups_1d = list(getattr(policy, "obs_groups_1d", []))
    meta: dict = {
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
    if callable(getattr(module, "metadata", None)):  # e.g. the command integral's gain and law
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
        layout = obs_layout(groups_1d, interface.get("observation_groups") or {})
        if layout is not None:
            meta["obs_layout"] = layout
    return meta


def obs_layout(groups: list[str], described: dict) -> list[dict] | None:
    """The terms of the ``obs`` input (groups concatenated in order), slices offset into it; None if a group is
    not described term by term."""
    layout, offset = [], 0
    for group in groups:
        terms = (described.get(group) or {}).get("terms")
        if not terms:
            return None
        for term in terms:
            entry = {"group": group, **term, "start": offset + term["start"], "stop": offset + term["stop"]}
            layout.append(entry)
        offset += int(described[group]["size"])
    return layout


def write_onnx_metadata(path: str | os.PathLike, metadata: dict) -> None:
    """Store ``metadata`` in the ONNX file's ``metadata_props``: key ``rlcore.<name>``, value ``json.dumps(value)``.

    Earlier ``rlcore.*`` entries are replaced; other producers' entries are kept. numpy/torch values become JSON
    numbers and lists; NaN and infinity are refused (strict JSON, readable by any deployment language).
    """
    import onnx  # only when a file is written or read: training imports this module

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


def read_onnx_interface(path: str | os.PathLike) -> dict:
    """The ``rlcore.*`` entries of an ONNX file's ``metadata_props``, decoded: ``{name: value}`` ({} if none)."""
    import onnx

    model = onnx.load(os.fspath(path), load_external_data=False)
    return {p.key[len(METADATA_PREFIX):]: json.loads(p.value) for p in model.metadata_props
            if p.key.startswith(METADATA_PREFIX)}
