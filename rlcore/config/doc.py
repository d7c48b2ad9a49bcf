"""``python -m rlcore.config.doc > docs/config.md``: the reference page of every config key.

Each key of the typed configs (``rlcore.config.schema``) with its type, its default and its description
(the comment on the field, or on the lines just above it), one table per section and per registered class
(``rlcore.config.registry``), and the files of ``conf/`` that set it to something else (the presets). The page
is generated, never edited: tests/utils/test_config_doc.py fails when it is not current.
"""

from __future__ import annotations

import ast
import inspect
import io
import os
import sys
import tokenize
import typing
from dataclasses import MISSING, dataclass, fields
from enum import Enum

from omegaconf import OmegaConf

from rlcore.config import registry
from rlcore.config import schema as schemas
from rlcore.config.cli import config_dir


# ============================================================================ descriptions (field comments)
def field_comments(module=schemas) -> dict[tuple[str, str], str]:
    """``{(class name, field name): description}`` from the comments of the dataclass fields in ``module``'s
    source: the comment on the field's line, after the comment lines just above it."""
    source = inspect.getsource(module)
    comments: dict[int, str] = {}
    own_line: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
            if not tok.line[:tok.start[1]].strip():
                own_line.add(tok.start[0])
    out = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                above, line = [], stmt.lineno - 1
                while line in own_line:
                    above.insert(0, comments[line])
                    line -= 1
                trailing = [] if stmt.lineno in own_line else [comments.get(stmt.lineno, "")]
                out[(node.name, stmt.target.id)] = " ".join(t for t in above + trailing if t)
    return out


def describe(schema: type, name: str, comments: dict[tuple[str, str], str]) -> str:
    """The description of field ``name`` of ``schema`` (looked up along its base classes)."""
    for cls in schema.__mro__:
        if (cls.__name__, name) in comments:
            return comments[(cls.__name__, name)]
    return ""


# ============================================================================ types and defaults
def type_name(tp) -> str:
    """A short, readable name of a field's type (``int``, ``list[int]``, ``gru | lstm``, ``float or null``)."""
    if isinstance(tp, type) and issubclass(tp, Enum):
        return " | ".join(str(m.value) for m in tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        rest = [a for a in args if a is not type(None)]
        return " or ".join(type_name(a) for a in rest) + (" or null" if len(rest) < len(args) else "")
    if origin in (list, typing.List):
        return f"list[{type_name(args[0])}]" if args else "list"
    if origin in (dict, typing.Dict):
        return "mapping"
    if tp is typing.Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


def value_text(value) -> str:
    """A value as it is written in YAML or on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    return repr(value)


def default_value(f):
    """A field's default as a plain value (an enum as its value; MISSING when the field is required)."""
    value = f.default_factory() if f.default_factory is not MISSING else f.default
    if value == "???":
        return MISSING
    return value.value if isinstance(value, Enum) else value


# ============================================================================ presets in conf/
@dataclass
class ConfFile:
    """One file of ``conf/``: its name (``algorithm/ppo``), its settings (absolute key paths), the typed configs
    its defaults list starts from (``{"actor": "MLPModel"}`` for ``- /schema/model/MLPModel@actor``) and whether it
    is a ``@package _global_`` file (one that may set keys outside its own group)."""

    name: str
    settings: dict
    bases: dict[str, str]
    is_global: bool = False


def conf_files(conf: str | None = None) -> list[ConfFile]:
    """Every YAML file of the config tree, its settings placed at their key paths."""
    conf = conf or config_dir()
    out = []
    for group in sorted(os.listdir(conf)):
        folder = os.path.join(conf, group)
        if not os.path.isdir(folder):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".yaml"):
                continue
            path = os.path.join(folder, file)
            raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
            defaults = raw.pop("defaults", None) or []
            is_global = "@package _global_" in open(path, encoding="utf-8").read()
            settings = raw if is_global else {group: raw}
            bases = {}
            for entry in defaults:
                if isinstance(entry, str) and entry.startswith(f"/{schemas.SCHEMA_GROUP}/"):
                    target, _, package = entry.partition("@")
                    bases[package] = target.rsplit("/", 1)[-1]
            out.append(ConfFile(f"{group}/{file[:-5]}", settings, bases, is_global))
    return out


def _lookup(settings: dict, path: str):
    node = settings
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def presets(files: list[ConfFile], paths: list[str], only_files: list[str] | None = None, default=MISSING) -> str:
    """``file: value`` for every conf file that sets one of ``paths`` (``only_files`` limits the files of their
    groups; ``_global_`` files of other groups, such as the task files, always count); a value equal to the
    ``default`` is marked ``(= default)``: it should not be there."""
    found = []
    own_groups = {name.split("/")[0] for name in only_files or ()}
    for file in files:
        if (only_files is not None and file.name not in only_files
                and not (file.is_global and file.name.split("/")[0] not in own_groups)):
            continue
        for path in paths:
            value = _lookup(file.settings, path)
            if value is not MISSING:
                shown = value_text(value) if not isinstance(value, dict) else "{...}"
                same = " (= default)" if default is not MISSING and value == default else ""
                found.append(f"{file.name}: {shown if len(shown) <= 40 else shown[:37] + '...'}{same}")
                break
    return "; ".join(found)


# ============================================================================ the page
@dataclass
class Section:
    """One table: a typed config at one or more key paths of the composed config."""

    title: str
    schema: type
    prefixes: list[str]  # where its keys sit ("" for the top level)
    note: str = ""
    files: list[str] | None = None  # group files whose presets apply (None: every file)


def sections(files: list[ConfFile]) -> list[Section]:
    """The tables of the page, in order: the train command's sections, then each registered class, then play and
    export."""

    def users(kind: str, name: str) -> list[str]:
        return [f.name for f in files if f.name.startswith(f"{kind}/") and name in f.bases.values()]

    out = [Section("Top level", schemas.TopLevelCfg, [""], "`seed=3`, `device=cuda`, ..."),
           Section("task", schemas.TaskCfg, ["task"], "set by each `conf/task/<name>.yaml`; `task.env` is the task's own"),
           Section("runner", schemas.RunnerCfg, ["runner"], "`conf/runner/default.yaml`"),
           Section("logger", schemas.LoggerCfg, ["logger"], "`logger=tensorboard|wandb|none`")]
    for entry in registry.entries("algorithm"):
        chosen = ", ".join(f"`{u.replace('/', '=')}`" for u in users("algorithm", entry.name))
        out.append(Section(f"algorithm: {entry.name}", entry.config_class(), ["algorithm"], chosen,
                           users("algorithm", entry.name)))
    out.append(Section("algorithm.exploration_cfg (PPO)", schemas.ExplorationCfg, ["algorithm.exploration_cfg"],
                       "the exploration schedule (rlcore/extensions/exploration.py); null by default, so a task that "
                       "does not set it takes `+algorithm.exploration_cfg.<key>=...` on the command line"))
    for entry in registry.entries("model"):
        chosen = ", ".join(f"`{u.replace('/', '=')}`" for u in users("model", entry.name))
        out.append(Section(f"model.actor / model.critic: {entry.name}", entry.config_class(),
                           ["model.actor", "model.critic"], chosen, users("model", entry.name)))
    for entry in registry.entries("distribution"):
        chosen = ", ".join(f"`{u.replace('/', '=')}`" for u in users("model", entry.name))
        chosen = f"; the policy's distribution in {chosen}" if chosen else ""
        out.append(Section(f"model.actor.distribution_cfg: {entry.name}", entry.config_class(),
                           ["model.actor.distribution_cfg"], f"aliases: {', '.join(entry.aliases)}{chosen}",
                           users("model", entry.name)))
    for entry in registry.entries("extension"):
        out.append(Section(f"extension.{entry.name}", entry.config_class(), [f"extension.{entry.name}"],
                           f"`extension=[{entry.name}]`; the algorithm's `{entry.cfg_key}`"))
    out.append(Section("play", schemas.PlayCfg, [], "`python -m rlcore.play key=value ...`"))
    out.append(Section("export", schemas.ExportCfg, [], "`python -m rlcore.export key=value ...`"))
    return out


HEADER = """# Configuration reference

Generated by `python -m rlcore.config.doc > docs/config.md` from the typed configs in
`rlcore/config/schema.py` (the one home of every default) and the names of `rlcore/config/registry.py`;
do not edit it by hand (tests/utils/test_config_doc.py fails when it is not current). The files of `conf/` start
from these defaults and set only what differs: the last column lists them. Any key can be set on the command
line, e.g. `python -m rlcore.train task=cartpole algorithm.learning_rate=1e-3 runner.max_iterations=200`.
"""


def _cell(text: str, code: bool = False) -> str:
    """A table cell: ``|`` escaped; outside code spans ``<`` too (``model_<it>.pt`` is not an HTML tag)."""
    text = text.replace("|", "\\|")
    return text if code else text.replace("<", "&lt;")


def render_section(section: Section, files: list[ConfFile], comments: dict) -> str:
    hints = typing.get_type_hints(section.schema)
    lines = [f"## {section.title}", ""]
    if section.note:
        lines += [section.note, ""]
    lines += ["| key | type | default | description | set in conf/ |", "|---|---|---|---|---|"]
    for f in fields(section.schema):
        paths = [f"{p}.{f.name}" if p else f.name for p in section.prefixes]
        default = default_value(f)
        row = [_cell(f"`{f.name}`", code=True), _cell(type_name(hints[f.name])),
               "required" if default is MISSING else _cell(f"`{value_text(default)}`", code=True),
               _cell(describe(section.schema, f.name, comments)),
               _cell(presets(files, paths, section.files, default)) if section.prefixes else ""]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def render(conf: str | None = None) -> str:
    """The whole page (Markdown)."""
    files, comments = conf_files(conf), field_comments()
    return HEADER + "".join("\n" + render_section(s, files, comments) for s in sections(files))


def main() -> None:
    """Print the page (``python -m rlcore.config.doc > docs/config.md``)."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
