"""Walk rsl_rl's public API and compare it with rlcore's, name by name (used by test_rsl_rl_api.py).

Run it as a script to print the coverage figure (needs rsl-rl-lib installed)::

    python tests/compat/api_walk.py [-v]

What is walked: the ``__all__`` of each package in ``PACKAGES`` (plus ``EXTRA``: the class of
``runner.logger``), keeping names that rsl_rl itself defines (re-exports of torch etc. are not its API).
For a class, every public member that a class of rsl_rl defines along its MRO (members inherited from
torch or ``object`` are not rsl_rl's API) plus its constructor; nested public classes are walked too.

The compatibility rule (one per kind of name):

- The name exists at the same module path of rlcore (``rsl_rl.X.Name`` -> ``rlcore.X.Name``), with the
  same kind: class for class, callable for function/method, static method for static method.
- Signatures (functions, methods, constructors), so that every call valid for rsl_rl stays valid:
    * every rsl_rl parameter exists in rlcore under the same name and the same kind (positional-or-keyword
      stays positional-or-keyword: rsl_rl's positional order is kept as rlcore's leading positional
      parameters; keyword-only may also be positional-or-keyword in rlcore);
    * an rsl_rl default is kept with an equal value (tuples and lists compare by items); a required rsl_rl
      parameter may gain a default in rlcore;
    * rlcore may add parameters, after rsl_rl's, only with defaults (or as ``*args``/``**kwargs``);
    * rsl_rl's ``*args`` / ``**kwargs`` must exist in rlcore too.
  Annotations and return values are not compared (behaviour is tested elsewhere).
- Properties: present on the rlcore class, or assigned as an instance attribute (``self.<name> = ...``) in it.
- Class attributes: present on the rlcore class; bool/int/float/str/None values equal.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass

PACKAGES = ("algorithms", "models", "modules", "runners", "storage", "extensions", "utils", "env")
"""The rsl_rl packages whose ``__all__`` is walked."""

EXTRA = {"utils.logger": ("Logger",)}
"""Public classes reached through the runner (``runner.logger``) rather than a package's ``__all__``."""


@dataclass
class Item:
    """One public name of rsl_rl and the verdict for rlcore."""

    path: str  # e.g. "runners.OnPolicyRunner.load"
    ok: bool
    why: str = ""


def _rsl_defined(obj) -> bool:
    return str(getattr(obj, "__module__", "") or "").startswith("rsl_rl")


def _resolve(root: str, dotted: str):
    """``rlcore.<module>.<attr...>`` or None (module path: first element; attributes: the rest)."""
    module_path, _, attrs = dotted.partition(":")
    try:
        obj = importlib.import_module(f"{root}.{module_path}")
    except ImportError:
        return None
    for part in attrs.split(".") if attrs else ():
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def _same_default(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    try:
        return bool(a == b)
    except (RuntimeError, TypeError, ValueError):  # e.g. tensors
        return a is b


def compare_signatures(ref, new) -> str:
    """'' when ``new`` accepts every call ``ref`` accepts (the rule in the module docstring), else why not."""
    try:
        rs, ns = inspect.signature(ref), inspect.signature(new)
    except (TypeError, ValueError) as err:
        return f"no signature ({err})"
    P = inspect.Parameter
    rp, np_ = list(rs.parameters.values()), list(ns.parameters.values())
    nmap = {p.name: p for p in np_}
    problems = []
    r_pos = [p.name for p in rp if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    n_pos = [p.name for p in np_ if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if n_pos[: len(r_pos)] != r_pos:
        problems.append(f"positional order {r_pos} vs {n_pos}")
    for p in rp:
        if p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            if not any(q.kind == p.kind for q in np_):
                problems.append(f"missing {'*' if p.kind == P.VAR_POSITIONAL else '**'}{p.name}")
            continue
        q = nmap.get(p.name)
        if q is None:
            problems.append(f"missing parameter '{p.name}'")
            continue
        if p.kind == P.KEYWORD_ONLY and q.kind not in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD):
            problems.append(f"'{p.name}' must accept a keyword")
        if p.default is not P.empty:
            if q.default is P.empty:
                problems.append(f"'{p.name}' lost its default {p.default!r}")
            elif not _same_default(p.default, q.default):
                problems.append(f"'{p.name}' default {q.default!r} != rsl_rl's {p.default!r}")
    rnames = {p.name for p in rp}
    for q in np_:
        named = q.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY, P.POSITIONAL_ONLY)
        if named and q.name not in rnames and q.default is P.empty:
            problems.append(f"extra required parameter '{q.name}'")
    return "; ".join(problems)


def _members(ref_cls) -> Iterator[tuple[str, object]]:
    """The public members (and ``__init__``) that classes of rsl_rl define along ``ref_cls``'s MRO."""
    seen: set[str] = set()
    for klass in ref_cls.__mro__:
        if not _rsl_defined(klass):
            continue
        for name, raw in vars(klass).items():
            if name in seen or (name.startswith("_") and name != "__init__"):
                continue
            seen.add(name)
            yield name, raw


def _walk_class(ref_cls, new_cls, path: str) -> Iterator[Item]:
    """Every member of ``ref_cls`` compared with ``new_cls`` (all missing when ``new_cls`` is None)."""
    for name, raw in _members(ref_cls):
        yield from _compare_member(ref_cls, new_cls, name, raw, f"{path}.{name}")


def _sets_attribute(cls, name: str) -> bool:
    """Whether a class of rlcore along ``cls``'s MRO assigns ``self.<name>`` (an instance attribute)."""
    for klass in cls.__mro__:
        if not str(klass.__module__).startswith("rlcore"):
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if f"self.{name} =" in source or f"self.{name}: " in source:
            return True
    return False


def _compare_member(ref_cls, new_cls, name: str, raw, path: str) -> Iterator[Item]:
    if new_cls is not None and isinstance(raw, property) and not hasattr(new_cls, name) \
            and _sets_attribute(new_cls, name):
        yield Item(path, True)  # rsl_rl's property is an instance attribute in rlcore
        return
    if new_cls is None or not hasattr(new_cls, name):
        yield Item(path, False, "missing")
        if isinstance(raw, type):
            yield from _walk_class(raw, None, path)
        return
    new_raw = inspect.getattr_static(new_cls, name)
    if isinstance(raw, type):
        if not isinstance(new_raw, type):
            yield Item(path, False, "not a class")
            return
        yield Item(path, True)
        yield from _walk_class(raw, new_raw, path)
    elif isinstance(raw, property):
        yield Item(path, True)
    elif isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
        if isinstance(raw, staticmethod) != isinstance(new_raw, staticmethod):
            yield Item(path, False, "static method in one, not in the other")
            return
        if not callable(getattr(new_cls, name)):
            yield Item(path, False, "not callable")
            return
        why = compare_signatures(getattr(ref_cls, name), getattr(new_cls, name))
        yield Item(path, not why, why)
    else:  # a plain class attribute
        value, new_value = raw, getattr(new_cls, name)
        if isinstance(value, (bool, int, float, str, type(None))) and not _same_default(value, new_value):
            yield Item(path, False, f"value {new_value!r} != rsl_rl's {value!r}")
        else:
            yield Item(path, True)


def walk() -> list[Item]:
    """Every public name of rsl_rl's walked packages, with rlcore's verdict."""
    targets = [(pkg, list(importlib.import_module(f"rsl_rl.{pkg}").__all__)) for pkg in PACKAGES]
    targets += [(mod, list(names)) for mod, names in EXTRA.items()]
    items: list[Item] = []
    for module_path, names in targets:
        ref_module = importlib.import_module(f"rsl_rl.{module_path}")
        for name in names:
            ref = getattr(ref_module, name)
            if name.startswith("_") or not _rsl_defined(ref):
                continue
            path = f"{module_path}.{name}"
            new = _resolve("rlcore", f"{module_path}:{name}")
            if inspect.isclass(ref):
                ok = inspect.isclass(new)
                items.append(Item(path, ok, "" if ok else "missing" if new is None else "not a class"))
                items.extend(_walk_class(ref, new if ok else None, path))
            elif new is None:
                items.append(Item(path, False, "missing"))
            else:
                why = compare_signatures(ref, new) if callable(new) else "not callable"
                items.append(Item(path, not why, why))
    return items


def coverage(items: list[Item], allowed: frozenset[str] | set[str] = frozenset()) -> tuple[int, int]:
    """``(compatible, total)`` over the walked names (``allowed`` ones count as not covered)."""
    return sum(1 for it in items if it.ok and it.path not in allowed), len(items)


def main(argv: list[str]) -> int:
    items = walk()
    ok, total = coverage(items)
    if "-v" in argv:
        for it in items:
            if not it.ok:
                print(f"  MISSING/INCOMPATIBLE {it.path}: {it.why}")
    print(f"rsl_rl public names compatible in rlcore: {ok}/{total} = {ok / total:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
