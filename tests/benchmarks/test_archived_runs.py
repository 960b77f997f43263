"""Every archived run (benchmarks/results/runs/*/*.tar.xz) is what its command trains today.

The experiment scripts restore an archived run instead of training it when the run's settings (the script's
command-line choices, written into the archive) equal the command's. Those settings name a shipped config and
overrides, not the resolved values, so changing a shipped default (configs/<domain>.yaml) would silently make an
archive stand for a run the command no longer trains, and the docs' figure for a command it no longer reproduces.
This test resolves each archive's settings as its script does and compares the result with the config.yaml the run
was trained with. Fields added to the config since (absent from the archive) are not compared: a new field's
default keeps the old behaviour. A few fields are exempt, each for the reason given.
"""

import json
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = sorted((ROOT / "benchmarks" / "results" / "runs").glob("*/*.tar.xz"))
SETTINGS_FILES = ("rl_seeds.json", "recipe_sweep.json", "sweep.json")

# Fields that do not change what a run trains or the figures the docs take from it.
EXEMPT = {
    # Held-out evals do not touch the training RNG (tests/rl/test_train.py::test_held_out_evals_do_not_change_training);
    # the archives' before/after figures are the first and last eval, which every eval_every the runs used keeps.
    "train.eval_every": "an eval step more or fewer; training and the first/last eval unchanged",
    # null = every component that gives a verdict; in these domains those are syntax, tests and sim (lint gives
    # none), the list the archived runs spelled out.
    "algo.grpo.verdict_components": "null means the same components here",
}


def _resolve(name: str, settings: dict):
    from densecode.api import load_config

    if name == "rl_seeds.json":  # benchmarks.experiments.rl_seeds.train: --set train.seed first, then the overrides
        return load_config(settings.get("config"), domain=settings["domain"], steps=settings["steps"],
                           overrides=[f"train.seed={settings['seed']}", *settings["overrides"]])
    if name == "recipe_sweep.json":  # benchmarks.experiments.recipe_sweep.command
        return load_config(domain=settings["domain"], overrides=settings["overrides"])
    extra = settings["extra_args"]  # densecode.eval.sweep.train_command
    assert extra in ([],) or (len(extra) == 2 and extra[0] == "--model"), extra
    return load_config(settings["config"], overrides=settings["overrides"], steps=settings["steps"],
                       model=extra[1] if extra else None)


def _none_like(value) -> bool:
    return value is None or (isinstance(value, dict) and all(_none_like(v) for v in value.values()))


def _differences(saved, now, path: str = "") -> list[tuple[str, object, object]]:
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for key in saved.keys() & now.keys():
            out += _differences(saved[key], now[key], f"{path}.{key}" if path else key)
        return out
    if _none_like(saved) and _none_like(now):  # an unset section written as null or as a dict of nulls
        return []
    if isinstance(saved, (int, float)) and isinstance(now, (int, float)) and float(saved) == float(now):
        return []
    return [] if saved == now else [(path, saved, now)]


def _unread(path: str, algo: str) -> bool:
    """A field the run's optimiser never reads: another algorithm's section (PPO reads algo.ppo, and so on)."""
    parts = path.split(".")
    return len(parts) > 2 and parts[0] == "algo" and parts[1] in ("ppo", "grpo", "rft") and parts[1] != algo


@pytest.mark.skipif(not ARCHIVES, reason="no archived runs in benchmarks/results/runs")
def test_every_archived_run_is_what_its_command_trains_today():
    from densecode.config import to_dict

    problems, checked = [], 0
    for archive in ARCHIVES:
        with tarfile.open(archive, "r:xz") as tar:  # one decompression per archive for both files
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()
                     if m.name in ("config.yaml", *SETTINGS_FILES)}
        name = next((n for n in SETTINGS_FILES if n in files), None)
        if name is None:  # benchmarks.experiments.multitask keeps its own settings (its arms are not --set lists)
            continue
        saved = yaml.safe_load(files["config.yaml"])
        now = to_dict(_resolve(name, json.loads(files[name])))
        algo = saved["algo"]["name"]
        for path, old, new in _differences(saved, now):
            if path == "train.output_dir" or path in EXEMPT or _unread(path, algo):
                continue
            problems.append(f"{archive.relative_to(ROOT)}: {path} was {old!r}, its command now trains {new!r}")
        checked += 1
    assert checked >= 100, f"only {checked} archives with settings: did the archive layout change?"
    assert not problems, ("archived runs no longer match their commands (a shipped default changed?): pin the old "
                          "value in the script's settings and in the archive, or re-run:\n" + "\n".join(problems))
