"""The README and the pages under docs/: every relative link resolves, the README stays short, and its test command
is still the line that CI runs.

A relative link is a markdown link or image (``[text](target)``, ``![alt](target)``, ``[name]: target``) whose
target is not a URL (``http:``, ``https:``, ``mailto:``, ...) nor a pure ``#anchor``; its ``#fragment`` is dropped and
the rest must name an existing file or directory, relative to the directory of the page that contains it (a leading
``/`` means the repository root). Links inside fenced code blocks and inline code spans are not links.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
README_MAX_LINES = 260

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target); the text may hold one level of brackets and wrap over lines
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*(<[^>\n]*>|\S+)", re.M)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _blank_code(text: str) -> str:
    """``text`` with fenced code blocks and inline code spans blanked out, line numbers kept."""
    out, fence = [], None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                fence = None
            out.append("")
        else:
            out.append(_CODE_SPAN.sub("code", line))
    return "\n".join(out)


def extract_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every relative link in markdown ``text``, fragments removed, in order."""
    text = _blank_code(text)
    found = []
    for pattern in (_INLINE, _REFERENCE):
        for m in pattern.finditer(text):
            target = m.group(1).strip("<>").strip()
            if not target or target.startswith("#") or _SCHEME.match(target):
                continue
            target = unquote(target.split("#", 1)[0])
            if target:
                found.append((text.count("\n", 0, m.start(1)) + 1, target))
    return sorted(found)


def broken_links(page: Path, root: Path) -> list[str]:
    """``file:line: target`` for every relative link of ``page`` that names nothing."""
    broken = []
    for line, target in extract_links(page.read_text(encoding="utf-8")):
        path = (root / target.lstrip("/")) if target.startswith("/") else (page.parent / target)
        if not path.exists():
            broken.append(f"{page.relative_to(root)}:{line}: {target}")
    return broken


def doc_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


# ---------------------------------------------------------------------------------------------- the extractor
def test_extractor_finds_links_and_images_and_skips_urls_anchors_and_code():
    text = "\n".join([
        "# t",
        "See [the page](docs/a.md#section) and ![a picture (big)](img/p.png \"title\").",
        "A [web link](https://example.org/x), [mail](mailto:a@b.c), [an anchor](#here), `[code](nope.md)`.",
        "```bash",
        "echo [not a link](fenced.md)",
        "```",
        "[a wrapped",
        "link](sub/dir/) and [`code text`](code.md) and [x](<with space.md>)",
        "[ref]: ../up.md",
        "[enc](a%20b.md)",
    ])
    assert extract_links(text) == [
        (2, "docs/a.md"), (2, "img/p.png"), (8, "code.md"), (8, "sub/dir/"), (8, "with space.md"),
        (9, "../up.md"), (10, "a b.md"),
    ]


def test_a_broken_link_is_reported_with_file_line_and_target(tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "img.png").write_bytes(b"")
    (tmp_path / "docs" / "sub" / "page.md").write_text(
        "# page\n\n[up](../img.png) [root](/README.md) [dir](../sub/)\n\nthen [gone](missing.md#x) here\n",
        encoding="utf-8")
    (tmp_path / "README.md").write_text("[ok](docs/sub/page.md)\n[bad](docs/page.md)\n", encoding="utf-8")
    found = [b for page in doc_pages(tmp_path) for b in broken_links(page, tmp_path)]
    assert found == ["README.md:2: docs/page.md", "docs/sub/page.md:5: missing.md"]


# ---------------------------------------------------------------------------------------------- the real pages
@pytest.mark.parametrize("page", doc_pages(REPO_ROOT), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page):
    broken = broken_links(page, REPO_ROOT)
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_pages_have_links_to_check():
    """The README links the docs and its picture; a regression of the extractor to "nothing found" fails here."""
    targets = {t for _, t in extract_links(README.read_text(encoding="utf-8"))}
    assert {"docs/images/go2_flat.png", "docs/cli.md", "docs/results/README.md"} <= targets, targets


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_the_readme_test_command_is_the_line_ci_runs():
    """``.ci/run`` runs the first README line that its grep matches: that must be the second set-up command."""
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"grep -m1 -E '([^']+)' README\.md", ci)
    assert m, ".ci/run no longer greps README.md for its test command; update this test"
    lines = README.read_text(encoding="utf-8").split("\n")
    matching = [i for i, line in enumerate(lines) if re.search(m.group(1), line)]
    assert matching, f"no README line matches .ci/run's pattern {m.group(1)!r}"
    first = matching[0]
    block_start = lines.index("```bash")
    assert first == block_start + 2, "the test command must be the second line of the README's first code block"
    assert lines[first - 1].startswith("pip install ") and "rlcore.train" in lines[first - 1]
    assert "ruff check ." in lines[first] and "python -m pytest" in lines[first]


def unclosed_fence(text: str) -> int | None:
    """The 1-based line of a code fence that is never closed, or None. A fence closes with a bare fence of the same
    character, at least as long; a fence with an info string (```bash) inside an open block counts as the
    unclosed block's symptom too: in these docs it is always a block whose closing line was lost."""
    opened: tuple[int, str] | None = None
    for i, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if not m:
            continue
        fence, info = m.group(1), line.strip()[len(m.group(1)):].strip()
        if opened is None:
            opened = (i, fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]):
            if info:
                return opened[0]
            opened = None
    return None if opened is None else opened[0]


def test_an_unclosed_fence_is_found():
    assert unclosed_fence("a\n```bash\nx\n```\nb\n") is None
    assert unclosed_fence("```diff\n-a\n+b\nprose that was meant to be outside\n") == 1
    assert unclosed_fence("```\n~~~\n```\n") is None  # another fence character inside a block is its text
    assert unclosed_fence("```diff\n-a\ntext\n```bash\nx\n```\n") == 1  # the diff block's closing line is lost


@pytest.mark.parametrize("page", doc_pages(REPO_ROOT), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_code_block_is_closed(page):
    line = unclosed_fence(page.read_text(encoding="utf-8"))
    assert line is None, f"{page.relative_to(REPO_ROOT)}:{line}: a code block opened here is never closed"
