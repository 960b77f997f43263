"""docs/config.md is generated from the config dataclasses and must not go stale."""

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path

from densecode import config_docs
from densecode.config import DensecodeConfig

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "config.md"


def test_docs_config_md_is_current():
    assert PAGE.read_text() == config_docs.render(), (
        f"docs/config.md is stale: regenerate it with `{config_docs.REGENERATE}`")


def test_every_config_field_is_on_the_page():
    page = config_docs.render()
    for name, cls in config_docs.sections(DensecodeConfig):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                continue  # a section, listed under its own heading
            key = f"{name}.{f.name}" if name else f.name
            assert f"- **`{key}`** · " in page, f"{key} missing from docs/config.md"


@dataclass
class _Inner:
    """Options of the toy inner section."""

    # Why three: the toy needs
    # a two-line comment.
    count: int = 3
    ratio: float = 0.5  # trailing comment
    names: list[str] = field(default_factory=lambda: ["a", "b"])
    """An attribute docstring."""
    mode: str = field(default="off", metadata={"doc": "from metadata"})
    maybe: int | None = None


@dataclass
class _Toy:
    inner: _Inner = field(default_factory=_Inner)
    plain: bool = True


def test_generator_reads_comments_docstrings_and_metadata():
    page = config_docs.render(_Toy, intro="# Toy\n")
    assert page.startswith("# Toy\n")
    assert "## `inner`\n\nOptions of the toy inner section." in page
    assert "- **`inner.count`** · `int` · default `3`: Why three: the toy needs a two-line comment." in page
    assert "- **`inner.ratio`** · `float` · default `0.5`: trailing comment" in page
    assert "- **`inner.names`** · `list[str]` · default `[a, b]`: An attribute docstring." in page
    assert "default `'off'`: from metadata" in page  # quoted: bare `off` is false in YAML
    assert "- **`inner.maybe`** · `int | null` · default `null` (undocumented" in page
    assert "- **`plain`** · `bool` · default `true` (undocumented" in page


def test_wrapped_lines_never_open_a_list_item():
    fd = config_docs.FieldDoc("k", "str", "x", "word " * 12 + "- dash 1. one " + "word " * 30)  # 12: breaks at "- "
    lines = config_docs._bullet(fd)
    assert len(lines) > 1
    assert all(not line.strip().startswith(("- ", "1. ")) for line in lines[1:])


def test_check_flag_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "config.md"
    stale.write_text("# old\n")
    assert config_docs.main(["--check", str(stale)]) == 1
    assert "python -m densecode.config_docs > docs/config.md" in capsys.readouterr().err
    stale.write_text(config_docs.render())
    assert config_docs.main(["--check", str(stale)]) == 0


def test_every_field_says_why():
    """A field without a comment shows as "(undocumented ...)" on the page: none may."""
    assert "(undocumented" not in config_docs.render()
