"""What the command-line entry points share: where ``conf/`` is, composing it, parsing ``key=value``
arguments against a structured config, and reporting user errors as one line with a non-zero exit.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import signal
import site
import sys
import sysconfig
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import MISSING, fields
from enum import Enum
from typing import NoReturn

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlcore.errors import ConfigError

#: Exit status of a user error (bad option, bad value, missing file): argparse's convention.
USER_ERROR_EXIT = 2

#: Every file of the config tree lives under these names; ``config_dir`` checks for them.
_CONF_MARKERS = ("config.yaml", os.path.join("model", "mlp.yaml"))


class UserError(ConfigError):
    """A mistake in the command line, the config or the files it names: reported as one line, no stack trace."""


# ============================================================================ the config tree
def config_dir() -> str:
    """Absolute path of the Hydra config tree (``conf/``).

    Looked up, in order: ``$RLCORE_CONF_DIR``; ``conf/`` beside the ``rlcore`` package (a source checkout
    or an editable install); ``share/rlcore/conf`` under the install prefixes, where a wheel puts it
    (pyproject's ``[tool.setuptools.data-files]``).
    """
    candidates = []
    if os.environ.get("RLCORE_CONF_DIR"):
        candidates.append(os.environ["RLCORE_CONF_DIR"])
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates.append(os.path.join(os.path.dirname(package_dir), "conf"))
    prefixes = [sysconfig.get_paths().get("data"), sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", None)]
    try:
        prefixes.append(site.getuserbase())
    except Exception:
        pass
    candidates += [os.path.join(p, "share", "rlcore", "conf") for p in prefixes if p]
    for path in candidates:
        if all(os.path.isfile(os.path.join(path, m)) for m in _CONF_MARKERS):
            return os.path.abspath(path)
    raise UserError("cannot find rlcore's config tree (conf/): reinstall rlcore, or point RLCORE_CONF_DIR at the "
                    "conf/ folder of a source checkout.")


def group_options(group: str) -> list[str]:
    """The options of a config group (``model`` -> ``['cnn', 'mlp', 'rnn']``), from the config tree."""
    folder = os.path.join(config_dir(), group)
    if not os.path.isdir(folder):
        return []
    return sorted(name[:-5] for name in os.listdir(folder) if name.endswith(".yaml"))


#: Config groups chosen automatically, not on the command line (``task_algorithm/<task>_<algorithm>.yaml``).
AUTOMATIC_GROUPS = ("task_algorithm",)


def user_groups_help() -> str:
    """The config groups a user chooses from, one ``group: option, ...`` line each, for ``train --help``.

    Read from ``conf/`` (its folders and their YAML files); the typed ``schema/...`` nodes that the config files
    start from and the groups chosen automatically (:data:`AUTOMATIC_GROUPS`) are internal and left out.
    """
    root = config_dir()
    groups = sorted(g for g in os.listdir(root) if os.path.isdir(os.path.join(root, g)) and g not in AUTOMATIC_GROUPS)
    options = {g: group_options(g) for g in groups}
    return "\n".join(f"{g}: {', '.join(names)}" for g, names in options.items() if names)


def compose(overrides: Sequence[str], config_name: str = "config", return_hydra_config: bool = False):
    """Compose ``conf/<config_name>.yaml`` with command-line ``overrides`` (Hydra's grammar).

    Raises:
        UserError: one line for an unknown group option (listing the valid ones), an unknown key, or an
            override that does not parse.
    """
    # Hydra loads only to compose (report and robustness parse their arguments without it).
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException, OverrideParseException

    try:
        with initialize_config_dir(config_dir=config_dir(), version_base=None, job_name="rlcore"):
            return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=return_hydra_config)
    except HydraException as err:
        if isinstance(err, OverrideParseException):
            culprit = _unparsable_override(overrides)
            if culprit is not None:
                reason = str(err).strip().splitlines()[0]
                raise UserError(f"cannot parse the argument '{culprit}' ({reason}); write key=value, quoting values "
                                "with special characters: key='a value'.") from None
        raise UserError(hydra_error_line(err)) from None


def _unparsable_override(overrides: Sequence[str]) -> str | None:
    """The first override that Hydra's grammar rejects."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_override(override)
        except HydraException:
            return override
    return None


def hydra_error_line(err: Exception) -> str:
    """One line for an error Hydra raised while composing."""
    text = str(err)
    missing = re.search(r"Could not (?:find|load) '([^']+)/([^'/]+)'", text)
    if missing:
        group, option = missing.group(1), missing.group(2)
        valid = group_options(group)
        if valid:
            return f"unknown option {group}={option}; valid choices for {group}: {', '.join(valid)}."
        return f"unknown option {group}={option}."
    missing_group = re.search(r"Could not override '([^']+)'. No match in the defaults list", text)
    if missing_group:
        return f"unknown config group '{missing_group.group(1)}'."
    cause = err.__cause__
    not_in_struct = re.search(r"Could not override '([^']+)'", text)
    if not_in_struct and cause is not None and "not in struct" in str(cause):
        return _unknown_key_line(not_in_struct.group(1), cause)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith(("See https", "\t"))]
    lines = [ln for ln in lines if not ln.startswith("Config search path")]
    if cause is not None:
        lines.append(_first_line(cause))
    return " ".join(lines) or type(err).__name__


def _unknown_key_line(key: str, cause: BaseException) -> str:
    """One line for an override of a key the config does not have (``key``: the override's key; the cause names the
    unknown key, which is deeper for a dict value): the closest key of its section (``did you mean
    runner.max_iterations?``) and, for a typed section, every valid key of it. ``+key=...`` (which adds a key) is
    offered where adding one can be right: a free-form section (``task.env``: the task checks it), or the top level
    without a close key."""
    full = str(getattr(cause, "full_key", "") or key)
    section, _, name = full.rpartition(".")
    parent = getattr(cause, "parent_node", None)
    try:
        present = [str(k) for k in parent.keys()] if parent is not None else []
    except Exception:  # a node without keys: nothing to suggest
        present = []
    present = [k for k in present if section or k != "hydra"]
    where = f"'{full}' in {key}=..." if full.startswith(key + ".") else f"'{full}'"
    guess = did_you_mean(name, present)
    line = f"unknown config key {where}"
    if guess:
        line += f": did you mean {section + '.' if section else ''}{guess}?"
    add = f" (to add a key that is not in the config, write +{key}=...)"
    if not present or (section and set(section.split(".")) & _free_form_fields()):
        return f"{line}{add}."
    listing = f"valid keys of {section}" if section else "valid top-level keys"
    # Only the top level takes keys of its own (a task file's); a typed section refuses an added key anyway.
    return f"{line}{' ' if guess else '; '}{listing}: {', '.join(present)}{'' if guess or section else add}."


def _free_form_fields() -> set[str]:
    """Names of the typed configs' dict-valued fields (``env``, ``estimator_cfg``, ...): the composed config holds
    only some of their keys, so it cannot list the valid ones."""
    import dataclasses

    from rlcore.config import schema as config_schema

    return {f.name for v in vars(config_schema).values() if isinstance(v, type) and dataclasses.is_dataclass(v)
            for f in dataclasses.fields(v) if "Dict[" in str(f.type) or str(f.type).startswith("dict")}


def did_you_mean(name: str, valid: Sequence[str]) -> str | None:
    """The valid name closest to a mistyped ``name`` (difflib), None when none is close."""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return close[0] if close else None


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "msg", None) or err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def check_counts(args: dict, keys: Sequence[str]) -> None:
    """Each of ``keys`` that ``args`` sets (not None) is at least 1; else a UserError naming it."""
    for key in keys:
        if args.get(key) is not None and int(args[key]) < 1:
            raise UserError(f"{key}={args[key]}: must be >= 1.")


def complete_args(args: dict, schema: type, command: str) -> dict:
    """``args`` of a command called from Python, completed with ``schema``'s defaults and type-checked against it as
    the command line is (enum members as their values), so that ``export({"checkpoint": run})`` means what
    ``python -m rlcore.export checkpoint=run`` does and ``export({"num_envs": "eight"})`` fails alike.

    Raises:
        UserError: a key that ``schema`` does not have (listing the valid ones), or a value of the wrong type.
    """
    valid = [f.name for f in fields(schema)]
    unknown = [k for k in args if k not in valid]
    if unknown:
        raise UserError(f"{command}: unknown key {unknown[0]!r}; valid keys: {', '.join(valid)}.")
    values = {k: getattr(v, "value", v) if isinstance(v, Enum) else v for k, v in args.items()}
    return _typed(schema, OmegaConf.create(values), command)


def _typed(schema: type, values, command: str) -> dict:
    """``values`` (an OmegaConf node) merged over ``schema``'s defaults, as a plain dict; a wrong type is a UserError
    naming the key."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), values)
        return OmegaConf.to_container(merged, resolve=True, enum_to_str=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", "") or ""
        raise UserError(f"{command}: {key + ': ' if key else ''}{_first_line(err).rstrip('.')}.") from None


def parse_key_values(argv: Sequence[str], schema: type, command: str) -> dict:
    """``key=value`` arguments checked against a dataclass ``schema``; returns a plain dict (enums as strings).

    Values are parsed as YAML (``video=true``, ``episodes=5``, ``onnx=policy.onnx``).

    Raises:
        UserError: an argument without ``=``, an unknown key (listing the valid ones), or a wrong type.
    """
    valid = [f.name for f in fields(schema)]
    dotlist = []
    for arg in argv:
        key, sep, _ = arg.partition("=")
        key = key.lstrip("+")
        if not sep or not key:
            raise UserError(f"{command}: expected key=value arguments, got '{arg}'; valid keys: {', '.join(valid)}.")
        if key not in valid:
            raise UserError(f"{command}: unknown key '{key}'; valid keys: {', '.join(valid)}.")
        dotlist.append(arg.lstrip("+"))
    return _typed(schema, OmegaConf.from_dotlist(dotlist), command)


def split_env_overrides(argv: Sequence[str], command: str) -> tuple[list[str], dict]:
    """Pull ``task.env.<path>=<value>`` arguments (the train CLI's spelling of a task setting) out of ``argv``:
    returns the other arguments and the settings as a nested dict (``{"sim": {"backend": "warp"}}``), values parsed
    as YAML."""
    rest, dotlist = [], []
    for arg in argv:
        key, sep, _ = arg.lstrip("+").partition("=")
        if key.startswith("task.env."):
            if not sep or key == "task.env.":
                raise UserError(f"{command}: expected task.env.<setting>=<value>, got '{arg}'.")
            dotlist.append(arg.lstrip("+").removeprefix("task.env."))
        else:
            rest.append(arg)
    return rest, OmegaConf.to_container(OmegaConf.from_dotlist(dotlist)) if dotlist else {}


def merge_settings(base: dict, overrides: dict) -> dict:
    """``base`` with ``overrides`` merged in, nested dicts key by key (neither is modified)."""
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merge_settings(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def usage(command: str, schema: type, summary: str) -> str:
    """A ``--help`` text listing the keys of ``schema`` with their defaults."""
    lines = [f"usage: python -m rlcore.{command} key=value ...", "", summary, "", "keys (default):"]
    for f in fields(schema):
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING
                                                              else "required")
        default = getattr(default, "value", default)
        lines.append(f"  {f.name:<14} {default!r}")
    return "\n".join(lines)


# ============================================================================ output paths
def file_in_the_way(directory: str) -> str | None:
    """The existing file that stands where ``directory`` or one of its parents should be a directory (None when
    there is none: every existing part of the path is a directory)."""
    part = os.path.abspath(directory)
    while not os.path.lexists(part):
        parent = os.path.dirname(part)
        if parent == part:
            return None
        part = parent
    return None if os.path.isdir(part) else part


def check_output_file(key: str, path: str) -> str:
    """``path`` (the absolute form), a file a command is to write, once it can be: not an existing directory, and
    no file where one of its directories should be; a UserError (one line) otherwise, before anything is loaded."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise UserError(f"{key}={path} is a directory; give the file to write, e.g. {key}="
                        f"{os.path.join(path, 'policy.onnx')}.")
    blocking = file_in_the_way(os.path.dirname(path))
    if blocking is not None:
        raise UserError(f"{key}={path}: '{blocking}' is a file, not a directory; choose another path.")
    return path


# ============================================================================ devices
def check_device(device: str) -> str:
    """``device`` if this machine has it (``cpu``, ``cuda``, ``cuda:1``, ``mps``), else a UserError saying why."""
    import torch  # only when a command runs: --help and argument errors answer without loading torch

    device = str(device).strip()
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise UserError(f"device={device} is not a device; use cpu, cuda or cuda:<index>.") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"device={device} but CUDA is not available on this machine (torch "
                            f"{torch.__version__}, no CUDA device found); use device=cpu.")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise UserError(f"device={device} but this machine has {count} CUDA device(s) "
                            f"(cuda:0..cuda:{count - 1}).")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise UserError(f"device={device} but MPS is not available on this machine; use device=cpu.")
    elif dev.type != "cpu":
        raise UserError(f"device={device} is not supported; use cpu, cuda or cuda:<index>.")
    return device


# ============================================================================ error reporting
#: Exceptions that mean "the user asked for something that cannot work", not "rlcore has a bug": rlcore's
#: validation error (``ConfigError``; ``UserError`` and ``rlcore.errors.MissingPathError`` are ones), raised where the
#: user's input is checked. Nothing is classified by type after the fact: any other exception, a ``ValueError``,
#: ``KeyError`` or ``FileNotFoundError`` from inside rlcore included, is reported as a bug with its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError,)

#: Exit status of an unexpected error (a bug in rlcore or in the user's own code).
BUG_EXIT = 1

BUG_HINT = ("this is not a configuration error but an unexpected exception, probably a bug in rlcore (or in "
            "your own task/model code): the traceback above shows where. Please report it with the command and "
            "the traceback; set RLCORE_DEBUG=1 to see the traceback of user errors too.")


def one_line(err: BaseException) -> str:
    """The error's message on one line (a KeyError's quotes dropped)."""
    msg = err.args[0] if isinstance(err, KeyError) and err.args and isinstance(err.args[0], str) else str(err)
    msg = " ".join(str(msg).split())
    return msg or type(err).__name__


#: Exit status of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
INTERRUPT_EXIT = 130

_sigint_seen = False


def watch_interrupts() -> None:
    """Handle SIGINT as Python does (raise ``KeyboardInterrupt``) and remember that it came.

    A Ctrl-C that lands while a C extension initialises (torch, MuJoCo, pybind11 modules) can surface as another
    exception (``ImportError: initialization failed``, or a half-imported module's ``AttributeError`` later);
    :func:`user_errors` reports any error after a remembered Ctrl-C as the interrupt it is. Main thread only.
    """
    import threading

    global _sigint_seen
    if threading.current_thread() is not threading.main_thread():
        return
    _sigint_seen = False

    def _on_sigint(signum, frame):
        global _sigint_seen
        _sigint_seen = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, _on_sigint)


def keep_interrupt_exit_status() -> None:
    """Make a command that :func:`exit_interrupted` ends exit with status 130, not by SIGINT (-2).

    CPython marks the process "ended by an unhandled KeyboardInterrupt" when the interrupt escapes code run by
    ``exec`` of a string (``dataclasses`` builds every ``__init__`` that way, thousands while torch imports), even
    when the program catches it later, and then kills itself with SIGINT after ``sys.exit(130)``. An ``atexit``
    hook registered early, so run after the others (torch's, the loggers'), flushes and exits with 130 when the
    command was interrupted. For a command's own process only: the hook ends the interpreter.
    """
    import atexit

    global _keeping_status
    if not _keeping_status:
        atexit.register(_exit_130_if_interrupted)
        _keeping_status = True


_keeping_status = False
_interrupt_exit = False


def _exit_130_if_interrupted() -> None:
    if not _interrupt_exit:
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(INTERRUPT_EXIT)


def interrupted(err: BaseException) -> bool:
    """Whether ``err`` comes from Ctrl-C: a ``KeyboardInterrupt``, one in its cause/context chain, or any error
    after a SIGINT that :func:`watch_interrupts` saw."""
    seen: set[int] = set()
    node: BaseException | None = err
    while node is not None and id(node) not in seen:
        if isinstance(node, KeyboardInterrupt):
            return True
        seen.add(id(node))
        node = node.__cause__ or node.__context__
    return _sigint_seen


def exit_interrupted(err: BaseException | None = None) -> NoReturn:
    """Ctrl-C is not an error: one short line, exit status 130. ``err``: the exception the interrupt surfaced as, when
    it is not a ``KeyboardInterrupt`` (named on the line; ``RLCORE_DEBUG=1`` prints its traceback)."""
    global _interrupt_exit
    _interrupt_exit = True
    if err is not None and not isinstance(err, KeyboardInterrupt):
        if os.environ.get("RLCORE_DEBUG"):
            traceback.print_exception(err)
        print(f"interrupted (then {type(err).__name__}: {one_line(err)[:160]})", file=sys.stderr, flush=True)
    else:
        print("interrupted", file=sys.stderr, flush=True)
    sys.exit(INTERRUPT_EXIT)


@contextlib.contextmanager
def user_errors(errors: tuple[type[BaseException], ...] = USER_ERRORS) -> Iterator[None]:
    """Report ``errors`` as ``error: <one line>`` on stderr with exit status 2; anything else as a bug.

    A bug (any other ``Exception``) prints its full traceback and a short hint, and exits with status 1, so
    that a library defect in the middle of training never looks like a config mistake. ``RLCORE_DEBUG=1``
    re-raises user errors with their traceback. Ctrl-C, also when it surfaces as another exception
    (:func:`interrupted`), prints ``interrupted`` and exits with status 130.
    """
    try:
        yield
    except KeyboardInterrupt:
        exit_interrupted()
    except errors as err:
        if os.environ.get("RLCORE_DEBUG"):
            raise
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        sys.exit(USER_ERROR_EXIT)
    except Exception as err:
        if interrupted(err):
            exit_interrupted(err)
        gl = _gl_backend_failure(err)
        if gl and not os.environ.get("RLCORE_DEBUG"):
            print(f"error: {gl}", file=sys.stderr, flush=True)
            sys.exit(USER_ERROR_EXIT)
        traceback.print_exc()
        print(f"error (unexpected): {BUG_HINT}", file=sys.stderr, flush=True)
        sys.exit(BUG_EXIT)


def _gl_backend_failure(err: BaseException) -> str | None:
    """One line when ``err`` is MuJoCo failing to load the OpenGL backend that ``MUJOCO_GL`` names (it does so
    at ``import mujoco``, before any rlcore code could check it); None for anything else."""
    backend = os.environ.get("MUJOCO_GL")
    if not backend:
        return None
    files = [frame.filename.replace(os.sep, "/") for frame in traceback.extract_tb(err.__traceback__)]
    in_gl = any("/mujoco/" in f and any(k in f for k in ("gl_context", "/osmesa/", "/egl/", "/glfw/", "/cgl/"))
                for f in files)
    if not in_gl and "MUJOCO_GL" not in str(err):
        return None
    return (f"MUJOCO_GL={backend}: MuJoCo cannot load this OpenGL backend ({one_line(err)[:160]}); install it "
            f"(Debian: libosmesa6 for osmesa, libegl1 for egl), choose another, or unset MUJOCO_GL when nothing "
            f"is rendered.")


def is_main_process() -> bool:
    """Rank 0 of a torchrun launch, or a plain process."""
    return int(os.environ.get("RANK", "0")) == 0
