"""Checkpoint files: atomic writes, code-free loads, and the RNG states an exact resume needs."""

from __future__ import annotations

import ast
import copy
import os
import random
import re
import tempfile

import numpy as np
import torch

from rlcore.errors import MissingPathError


def save_atomic(obj: dict, path: str | os.PathLike) -> str:
    """``torch.save`` to a temporary file in the same directory, then rename: a crash never leaves a torn file."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def copy_tree(tree):
    """A deep copy of a checkpoint-like tree (dicts, lists, tuples of tensors and plain values): every tensor is
    detached and cloned on its device, so later in-place updates of the originals leave the copy as it was."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {k: copy_tree(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(copy_tree(v) for v in tree)
    return copy.deepcopy(tree)


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device | None = "cpu") -> dict:
    """Load with ``weights_only=True`` (tensors and plain containers only: a checkpoint never runs code)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MissingPathError(f"Checkpoint '{path}' does not exist.")
    return torch.load(path, map_location=map_location, weights_only=True)


def find_checkpoint(path: str | os.PathLike) -> str:
    """A checkpoint file, or the newest ``model_<it>.pt`` of a run directory.

    The directory's checkpoints may sit in one subfolder of it; a directory whose checkpoints are spread over
    several folders (a parent of several runs, a sweep) is refused with those folders named, rather than
    mixing unrelated runs by iteration number.
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise MissingPathError(f"Checkpoint or run directory '{path}' does not exist.")
    found = []
    for root, _, files in os.walk(path):
        for name in files:
            m = re.fullmatch(r"model_(\d+)\.pt", name)
            if m:
                found.append((int(m.group(1)), os.path.join(root, name)))
    if not found:
        raise MissingPathError(f"No model_<iteration>.pt checkpoint in '{path}'.")
    folders = sorted({os.path.dirname(f) for _, f in found})
    if len(folders) > 1:
        listed = ", ".join(folders[:4]) + (f" and {len(folders) - 4} more" if len(folders) > 4 else "")
        raise MissingPathError(f"'{path}' holds the checkpoints of {len(folders)} runs ({listed}); give one run "
                                f"directory or a model_<iteration>.pt file.")
    return max(found)[1]


def get_rng_states() -> dict:
    """Python, NumPy and torch (CPU and CUDA) generator states."""
    np_state = np.random.get_state()
    states = {
        "python": random.getstate().__repr__(),
        "numpy": {"name": np_state[0], "keys": torch.from_numpy(np_state[1].astype(np.int64)),
                  "pos": int(np_state[2]), "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    """Restore what ``get_rng_states`` returned."""
    if "python" in states:
        random.setstate(_to_tuple(ast.literal_eval(states["python"])))
    if "numpy" in states:
        s = states["numpy"]
        np.random.set_state((s["name"], s["keys"].numpy().astype(np.uint32), s["pos"], s["has_gauss"],
                             s["cached_gaussian"]))
    if "torch" in states:
        torch.set_rng_state(states["torch"].cpu())
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# ------------------------------------------------------------------ comparing a checkpoint's train_cfg with a config
_MODEL_KEYS = ("class_name", "hidden_dims", "activation", "rnn_type", "rnn_hidden_dim", "rnn_num_layers",
               "obs_normalization", "cnn_cfg", "estimator_cfg")


def _norm(v):
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _with_model_defaults(cfg: dict) -> dict:
    """A model section with the settings it leaves out at its class's defaults (a Python config may omit them)."""
    from rlcore.config import registry  # the typed configs import Hydra: only when a checkpoint is compared
    from rlcore.config.schema import defaults_of

    entry = registry.find(str(cfg.get("class_name")), ("model",))
    schema = entry.config_class() if entry is not None else None
    return {**defaults_of(schema), **cfg} if schema is not None else cfg


def model_differences(saved: dict, new: dict, parts: tuple[str, ...]) -> list[str]:
    """``part.key: checkpoint X vs config Y`` for each model setting of ``parts`` that differs (a setting one side
    leaves out counts at its default)."""
    diffs = []
    for part in parts:
        a, b = saved.get(part), new.get(part)
        if not isinstance(a, dict) or not isinstance(b, dict):
            if isinstance(a, dict) != isinstance(b, dict):
                diffs.append(f"{part}: checkpoint {'has' if isinstance(a, dict) else 'has no'} {part} model, "
                             f"config {'has' if isinstance(b, dict) else 'has no'}")
            continue
        a, b = _with_model_defaults(a), _with_model_defaults(b)
        keys = _MODEL_KEYS if a.get("class_name") == b.get("class_name") else ("class_name",)
        for key in keys:
            va, vb = a.get(key), b.get(key)
            if key in ("rnn_type", "activation") and isinstance(va, str) and isinstance(vb, str):
                va, vb = va.lower(), vb.lower()
            if (key in a or key in b) and _norm(va) != _norm(vb):
                diffs.append(f"{part}.{key}: checkpoint {va!r} vs config {vb!r}")
        da, db = a.get("distribution_cfg") or {}, b.get("distribution_cfg") or {}
        if da.get("class_name") and da.get("class_name") != db.get("class_name"):  # older formats lack it
            diffs.append(f"{part}.distribution_cfg.class_name: checkpoint {da.get('class_name')!r} vs config "
                         f"{db.get('class_name')!r}")
    return diffs


def obs_group_differences(saved: dict, new: dict, sets: tuple[str, ...]) -> list[str]:
    """``obs_groups.<set>: checkpoint X vs config Y`` for each observation set of ``sets`` both configs name."""
    ga, gb = saved.get("obs_groups") or {}, new.get("obs_groups") or {}
    return [f"obs_groups.{s}: checkpoint {ga[s]!r} vs config {gb[s]!r}"
            for s in sets if s in ga and s in gb and _norm(ga[s]) != _norm(gb[s])]
