"""The mutation check's list stays applicable: each planted bug's original text occurs exactly once in its file and
its target tests exist (a refactor that moves or re-indents the code would otherwise turn a mutation into an error
that nobody runs until the next mutation check)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _mutations():
    spec = importlib.util.spec_from_file_location("mutation_check", REPO / "tests" / "tools" / "mutation_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_check"] = module  # dataclasses look the module up while the class is made
    spec.loader.exec_module(module)
    return module.MUTATIONS


MUTATIONS = _mutations()


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_mutation_applies_once_and_names_existing_tests(mutation):
    text = (REPO / mutation.file).read_text()
    assert text.count(mutation.original) == 1, f"{mutation.file}: the original text occurs {text.count(mutation.original)} times"
    assert mutation.replacement != mutation.original
    for test in mutation.tests:
        assert (REPO / test.split("::")[0]).exists(), test
