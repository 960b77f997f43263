"""densecode.api: train, evaluate and explain from Python with the command line's defaults (densecode.training,
densecode.eval.runner and densecode.eval.explain are the library behind both)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from densecode import api
from densecode.cli import build_parser
from densecode.errors import DensecodeError
from densecode.eval.spec import EvalSpec

FAST = ["train.batch_size=2", "generation.max_new_tokens=8", "train.eval_every=0", "train.save_every=0",
        "train.num_threads=1"]


def _cli_parser(command: str):
    import importlib

    from densecode.cli import COMMANDS

    _, subparsers = build_parser()
    importlib.import_module(COMMANDS[command][0]).configure(subparsers[command])
    return subparsers[command]


def _cli_args(command: str, argv: list[str]):
    return _cli_parser(command).parse_args(argv)


def test_eval_spec_defaults_are_densecode_eval_defaults():
    from_cli = EvalSpec.from_args(_cli_args("eval", ["--benchmark", "mbpp"]))
    assert from_cli == EvalSpec(benchmark="mbpp")
    # every flag of the command is a field of the spec (nothing the library would not see)
    flags = {a.dest for a in _cli_parser("eval")._actions if a.dest != "help"}
    assert len(flags) > 20 and flags <= {f.name for f in dataclasses.fields(EvalSpec)}, flags


def test_load_config_is_densecode_trains_config():
    from densecode.training import resolve_config

    args = _cli_args("train", ["--domain", "codegen", "--set", "train.lr=1e-5", "--steps", "7"])
    cli_cfg = resolve_config(args)[0]
    assert api.load_config(domain="codegen", overrides=["train.lr=1e-5"], steps=7) == cli_cfg
    assert cli_cfg.train.lr == 1e-5 and cli_cfg.train.steps == 7


def test_evaluate_checks_the_spec_before_loading_anything():
    with pytest.raises(DensecodeError, match="--n must be >= 1"):
        api.evaluate(benchmark="robotics", n=0)
    with pytest.raises(DensecodeError, match="name what to evaluate"):
        api.evaluate(EvalSpec())


def test_train_evaluate_explain_from_python(tiny_model_dir, tmp_path):
    run = api.train(domain="robotics", model=str(tiny_model_dir), steps=1, output_dir=tmp_path / "run",
                    overrides=[*FAST, "train.rollouts_every=1"], progress=False)
    assert run["step"] == 1 and not run["interrupted"]
    assert (run["run_dir"] / "metrics.jsonl").is_file() and (run["run_dir"] / "config.yaml").is_file()
    with pytest.raises(DensecodeError, match="already holds a run"):
        api.train(domain="robotics", model=str(tiny_model_dir), steps=1, output_dir=tmp_path / "run",
                  overrides=FAST, progress=False)
    results = api.evaluate(benchmark="robotics", model=str(run["run_dir"]), tasks=3, max_new_tokens=16,
                           workers=1, out=str(tmp_path / "eval"))
    assert results["scores"]["tasks"] == 3 and len(results["tasks"]) == 3
    assert json.loads((tmp_path / "eval" / "results.json").read_text())["scores"] == results["scores"]
    page = api.explain(run["run_dir"] / "rollouts.jsonl", tmp_path / "explain.html")
    assert page.is_file() and "<html" in page.read_text().lower()
