"""Write exported policies to disk (ONNX, TorchScript) and check them."""

from __future__ import annotations

import os
import warnings

import torch
import torch.nn as nn


def export_onnx(module: nn.Module, path: str | os.PathLike, opset_version: int = 17) -> str:
    """Export a model's ``as_onnx()`` wrapper to ``path`` with its input/output names and a dynamic batch axis.

    Uses the TorchScript-based exporter (exact for GRU/LSTM, fast); falls back to the torch.export-based
    exporter where a torch release no longer ships it. Returns the path written.
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
    return path


def export_jit(script_module: torch.jit.ScriptModule, path: str | os.PathLike) -> str:
    """Save a model's ``as_jit()`` TorchScript module to ``path``. Returns the path written."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    script_module.save(path)
    return path
