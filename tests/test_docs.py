"""README.md and docs/: short front page, links that resolve, no over-long lines."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); the target stops at whitespace or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")
MAX_README_LINES = 250
MAX_LINE_CHARS = 300
EXPECTED_PAGES = ["training", "rewards", "grpo", "grammar", "sandbox", "simulators", "embedded-model",
                  "evaluation", "performance", "results", "architecture", "config"]


def prose_lines(path: Path):
    """(line number, text) of the lines outside fenced code blocks."""
    in_code = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            yield number, line


def relative_links(path: Path):
    for number, line in prose_lines(path):
        # inline code may show link syntax as an example; it is not a link
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http:, mailto:, in-page anchors
            yield number, target


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_docs_page_exists_and_readme_links_it():
    readme = (ROOT / "README.md").read_text()
    for page in EXPECTED_PAGES:
        assert (ROOT / "docs" / f"{page}.md").is_file(), f"docs/{page}.md is missing"
    for path in DOC_FILES[1:]:
        assert f"(docs/{path.name})" in readme, f"README.md does not link docs/{path.name}"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    broken = []
    for number, target in relative_links(path):
        file_part = target.split("#", 1)[0]
        if file_part and not (path.parent / file_part).exists():
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_overlong_lines(path):
    long_lines = [f"{path.relative_to(ROOT)}:{n}: {len(line)} chars" for n, line in prose_lines(path)
                  if len(line) > MAX_LINE_CHARS]
    assert not long_lines, "rewrap these lines:\n" + "\n".join(long_lines)


def test_link_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [x](missing.md) and [y](page.md#top), `[z](ignored.md)`\n```\n[w](code.md)\n```\n")
    targets = [t for _, t in relative_links(page)]
    assert targets == ["missing.md", "page.md#top"]


def test_no_citation_of_files_missing_from_the_repository():
    """Source, configs and docs must not cite method.md (never part of the repository)."""
    offenders = []
    roots = [ROOT / d for d in ("densecode", "sim", "configs", "docs", "benchmarks", "tests")]
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *(p for r in roots for p in r.rglob("*"))]
    for path in files:
        if path.suffix not in {".py", ".md", ".yaml", ".toml"} or path == Path(__file__).resolve():
            continue
        if "method.md" in path.read_text(errors="replace"):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"these files cite method.md, which is not in the repository: {offenders}"
