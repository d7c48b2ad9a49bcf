"""List every import from the library (``rlcore/``) into a task package; the boundary allows none.

    python tests/tools/task_imports.py          # prints each import found, then "imports from rlcore into task packages: N"

Task packages are the top-level packages that register tasks through the ``rlcore.tasks`` entry point (read from
``pyproject.toml``; ``rlcore_tasks`` here), plus ``tasks`` (the name the example tasks had before). Every ``import``
and ``from ... import`` statement in ``rlcore/**/*.py`` counts, at any depth (inside functions too), as do
``importlib.import_module("...")`` calls with a literal name. tests/tools/test_task_boundary.py asserts the count is 0.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def task_packages(pyproject: Path = REPO / "pyproject.toml") -> set[str]:
    """Top-level packages named by the ``rlcore.tasks`` entry points, and the former ``tasks``."""
    text = pyproject.read_text()
    section = re.search(r'^\[project\.entry-points\."rlcore\.tasks"\]\n(.*?)(?=^\[|\Z)', text, re.M | re.S)
    names = set(re.findall(r'=\s*"([A-Za-z_]\w*)', section.group(1))) if section else set()
    return names | {"tasks"}


def imports_into(root: Path, packages: set[str]) -> list[tuple[str, int, str]]:
    """(file, line, module) of every import under ``root`` whose top-level package is in ``packages``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                modules = [node.args[0].value]
            for module in modules:
                if module.split(".")[0] in packages:
                    found.append((str(path.relative_to(root.parent)), node.lineno, module))
    return found


def main() -> int:
    packages = task_packages()
    found = imports_into(REPO / "rlcore", packages)
    for file, line, module in found:
        print(f"{file}:{line}: imports {module}")
    print(f"task packages: {', '.join(sorted(packages))}")
    print(f"imports from rlcore into task packages: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
