"""docs/config.md is generated from the typed configs and is current; every key is documented there; the files of
conf/ set only what differs from the defaults."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from rlcore.config import doc as config_doc
from rlcore.config import registry
from rlcore.config import schema as schemas

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "config.md"

#: conf files allowed to repeat a default (none: every file sets only what differs).
PENDING_TRIMS: set[str] = set()


@pytest.fixture(scope="module")
def page() -> str:
    return config_doc.render()


def test_docs_config_md_is_current(page):
    assert PAGE.is_file(), "docs/config.md is missing: python -m rlcore.config.doc > docs/config.md"
    assert PAGE.read_text(encoding="utf-8") == page, (
        "docs/config.md is out of date: run python -m rlcore.config.doc > docs/config.md")


def _schemas() -> list[type]:
    out = [schemas.TopLevelCfg, schemas.TaskCfg, schemas.RunnerCfg, schemas.LoggerCfg, schemas.PlayCfg,
           schemas.ExportCfg]
    return out + [e.config_class() for e in registry.ENTRIES if e.schema is not None]


def test_every_registered_class_and_every_key_has_a_table_row(page):
    tables = {m.group(1): m.group(2) for m in re.finditer(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", page, re.M | re.S)}
    for entry in registry.ENTRIES:
        if entry.schema is None:
            continue
        title = next((t for t in tables if t.endswith(entry.name)), None)
        assert title is not None, f"no section for {entry.kind} {entry.name}"
        rows = re.findall(r"^\| `(\w+)` \|", tables[title], re.M)
        assert rows == [f.name for f in fields(entry.config_class())], title


def test_every_field_has_a_description():
    comments = config_doc.field_comments()
    missing = [f"{s.__name__}.{f.name}" for s in _schemas() for f in fields(s)
               if not config_doc.describe(s, f.name, comments)]
    assert missing == []


def test_a_comment_above_a_field_and_one_on_its_line_are_both_read():
    comments = config_doc.field_comments()
    assert config_doc.describe(schemas.TaskCfg, "obs_groups", comments).startswith("observation sets -> observation")
    assert config_doc.describe(schemas.PPOCfg, "gamma", comments) == "discount"
    # inherited fields are described by the base class's comment
    assert config_doc.describe(schemas.RNNModelCfg, "hidden_dims", comments) == \
        config_doc.describe(schemas.MLPModelCfg, "hidden_dims", comments) != ""


def test_a_changed_default_changes_the_page(monkeypatch, page):
    """The page is generated from the dataclasses: another default gives another row."""
    row = re.search(r"^\| `learning_rate` \| float \| `0.001` \| initial learning rate \|.*$", page, re.M)
    assert row is not None
    monkeypatch.setattr(schemas.PPOCfg.__dataclass_fields__["learning_rate"], "default", 0.25)
    assert "| `learning_rate` | float | `0.25` | initial learning rate |" in config_doc.render()


def test_conf_files_set_only_what_differs_from_the_defaults(page):
    repeated = set(re.findall(r"([\w/]+): [^;|]*? \(= default\)", page))
    assert repeated <= PENDING_TRIMS, f"conf files that repeat a default: {sorted(repeated - PENDING_TRIMS)}"


def test_types_and_values_are_written_as_on_the_command_line():
    import typing

    assert config_doc.type_name(typing.Optional[typing.List[int]]) == "list[int] or null"
    assert config_doc.type_name(schemas.RNNType) == "gru | lstm"
    assert config_doc.value_text(None) == "null" and config_doc.value_text(False) == "false"
    assert config_doc.value_text([1e-3, "a"]) == "[0.001, a]" and config_doc.value_text("") == '""'


def test_a_global_group_file_shows_where_it_sets_other_groups_keys(page):
    """conf/algorithm/distillation.yaml is a _global_ file: its student noise preset appears in the distribution
    tables (model.actor.distribution_cfg.init_std), but its own algorithm keys do not leak into PPO's table."""
    tables = {m.group(1): m.group(2) for m in re.finditer(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", page, re.M | re.S)}
    gaussian = tables["model.actor.distribution_cfg: GaussianDistribution"]
    assert re.search(r"^\| `init_std` \|.*\| algorithm/distillation: 0\.1 \|$", gaussian, re.M)
    ppo_clip = re.search(r"^\| `max_grad_norm` \|.*$", tables["algorithm: PPO"], re.M).group(0)
    assert "algorithm/distillation" not in ppo_clip
    distillation = re.search(r"^\| `max_grad_norm` \|.*$", tables["algorithm: Distillation"], re.M).group(0)
    assert distillation.endswith("| algorithm/distillation: 1.0 |")
