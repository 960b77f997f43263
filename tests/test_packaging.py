"""The default configs are package data: `--config NAME` resolves from any folder, in any install."""

import importlib.resources
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from densecode.config import CONFIG_DIR, load_config, resolve_config_path
from densecode.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = importlib.resources.files("densecode") / "configs"


def test_packaged_configs_are_the_top_level_ones():
    """One source of truth: densecode/configs is the top-level configs/ (a link in a checkout)."""
    top = {p.name: p.read_bytes() for p in (ROOT / "configs").glob("*.yaml")}
    packaged = {p.name: p.read_bytes() for p in PACKAGED.iterdir() if p.name.endswith(".yaml")}
    assert top and packaged == top
    assert Path(str(PACKAGED)).resolve() == (ROOT / "configs").resolve(), (
        "densecode/configs must link to ../configs (a copy would drift)")


def test_config_names_resolve_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("robotics", "robotics.yaml", "code-grpo", "warehouse"):
        path = resolve_config_path(name)
        assert path.is_file() and path.parent == CONFIG_DIR, name
    cfg = load_config("robotics-grpo")  # has `base: robotics.yaml`, resolved next to the packaged file
    assert cfg.domain == "robotics" and cfg.algo.name == "grpo"


def test_a_file_given_by_path_wins_and_a_folder_does_not_shadow(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "robotics").mkdir()  # e.g. a run directory named like the config
    assert resolve_config_path("robotics").parent == CONFIG_DIR
    mine = tmp_path / "robotics.yaml"
    mine.write_text("train: {steps: 3}\n")
    assert resolve_config_path("robotics.yaml") == Path("robotics.yaml")
    assert load_config("robotics.yaml").train.steps == 3


def test_unknown_name_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="config file not found: no-such-config"):
        load_config("no-such-config")


def test_pyproject_ships_the_configs_and_the_simulator():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "configs/*.yaml" in project["tool"]["setuptools"]["package-data"]["densecode"]
    assert "densecode_robosim*" in project["tool"]["setuptools"]["packages"]["find"]["include"]


@pytest.mark.slow
def test_wheel_contains_configs_grammar_model_and_simulator(tmp_path):
    """Build the wheel (no isolation: the test venv's setuptools) and list what it ships."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT)], check=True, timeout=600, cwd=tmp_path)
    (wheel,) = tmp_path.glob("densecode-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"densecode/configs/{p.name}" for p in (ROOT / "configs").glob("*.yaml")} | {
        "densecode/grammars/python.lark", "densecode/assets/densecode-tiny/model.safetensors",
        "densecode_robosim/__init__.py", "densecode/config.py"}
    assert expected <= names, sorted(expected - names)
