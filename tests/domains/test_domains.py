"""Domains as plug-ins: the registry, typed `tasks:` options, a toy domain defined here trains two steps, and the
import rules of the source tree (densecode/rl knows no domain, eval or CLI; no import cycles)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from densecode.domains import (
    Domain,
    DomainOptions,
    build_domain,
    build_reward_fn,
    get_domain_class,
    load_config,  # densecode.config's, with `tasks:` typed by the domain
    register_domain,
)
from densecode.errors import ConfigError, DensecodeError

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- a toy domain, only in this file


@dataclass
class EchoOptions(DomainOptions):
    word: str = "ok"  # the word a response must contain


@register_domain
class EchoDomain(Domain):
    """Prompts ask for a word; the score is 1 when the response contains it. Its own reward component below."""

    name = "echo-toy"
    Options = EchoOptions
    default_weights: ClassVar[dict[str, float]] = {"echo": 1.0, "kl": 0.05}
    components: ClassVar[dict[str, str]] = {"echo": f"{__name__}:EchoComponent"}

    def tasks(self, split, n, seed):
        return [{"prompt": f"say {self.options.word}: ", "word": self.options.word, "task_id": f"{split}-{seed}-{i}"}
                for i in range(n)]

    def score(self, tasks, responses):
        return [{"outcome": "success" if t["word"] in r else "failure", "score": float(t["word"] in r)}
                for t, r in zip(tasks, responses)]


class EchoComponent:
    """+1 split over the response when it contains the task's word (a reward component the domain brings)."""

    name = "echo"

    def __call__(self, samples):
        from densecode.rewards.base import ComponentOutput

        outs = []
        for s in samples:
            values = np.zeros(s.n_tokens, dtype=np.float32)
            hit = s.task["word"] in s.response
            if hit and s.n_tokens:
                values += 1.0 / s.n_tokens
            outs.append(ComponentOutput(values, [], {"hit": float(hit)}))
        return outs


def test_a_domain_defined_in_a_test_file_trains_two_steps(tiny_model_dir, tmp_path):
    from densecode.cli import main

    run = tmp_path / "run"
    rc = main(["train", "--domain", "echo-toy", "--model", str(tiny_model_dir), "--output-dir", str(run), "--steps",
               "2", "--no-progress", "--set", "train.batch_size=4", "--set", "train.eval_tasks=4", "--set",
               "generation.max_new_tokens=8", "--set", "tasks.word=x", "--set", "reward.code_regions=completion"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in train] == [1, 2]
    assert "reward/echo/hit" in train[0] and "eval/success_rate" in evals[0]
    assert (run / "checkpoints" / "step-000002" / "model").is_dir()
    assert "word: x" in (run / "config.yaml").read_text()


def test_domain_options_are_typed():
    cfg = load_config(None, ["domain=echo-toy", "tasks.word=hi"])
    assert isinstance(cfg.tasks, EchoOptions) and cfg.tasks.word == "hi"
    with pytest.raises(ConfigError, match=r"--set tasks.wrod=1: unknown key 'tasks.wrod'"):
        load_config(None, ["domain=echo-toy", "tasks.wrod=1"])
    with pytest.raises(ConfigError, match=r"'tasks.eval_seed' expects an integer"):
        load_config(None, ["domain=echo-toy", "tasks.eval_seed=abc"])
    # robotics.yaml's tasks: keys exist in every domain's options except RoboSim's `sim`:
    with pytest.raises(ConfigError, match=r"robotics.yaml: unknown key 'tasks.sim'"):
        load_config("robotics", ["domain=echo-toy"])


def test_registry_lookup_order_and_errors(tmp_path):
    assert get_domain_class("robotics").name == "robotics"
    assert get_domain_class("code").name == "code"
    assert get_domain_class("echo-toy") is EchoDomain
    assert get_domain_class(f"{__name__}:EchoDomain") is EchoDomain
    assert get_domain_class("anything", {"simulator": "x:Y"}).__name__ == "PluginDomain"
    with pytest.raises(DensecodeError, match="unknown domain 'chess'"):
        get_domain_class("chess")
    with pytest.raises(DensecodeError, match="not a densecode.domains.Domain subclass"):
        get_domain_class("densecode.domains.base:DomainOptions")
    # module:Class resolves from the config's folder without PYTHONPATH
    (tmp_path / "my_domain_mod.py").write_text(
        "from densecode.domains import Domain\nclass Mine(Domain):\n    name = 'mine'\n"
        "    def tasks(self, split, n, seed):\n        return [{'prompt': 'p'}] * n\n")
    cfg_file = tmp_path / "mine.yaml"
    cfg_file.write_text("domain: 'my_domain_mod:Mine'\n")
    cfg = load_config(cfg_file)
    assert type(build_domain(cfg)).__name__ == "Mine"


def test_reward_weights_are_computed_once_and_carried():
    cfg = load_config("robotics", ["reward.weights.kl=0.3", "reward.weights.missing_eos=0.5"])
    domain = build_domain(cfg)
    reward_fn = build_reward_fn(cfg, domain)
    assert reward_fn.weights == {"lint": 0.1, "syntax": 0.1, "sim": 0.8, "kl": 0.3, "missing_eos": 0.5}
    assert reward_fn.components["lint"].builtins  # the robot API from the domain
    assert reward_fn.components["sim"].simulator is domain.simulator()


def test_missing_eos_penalty_is_a_component_on_the_last_token():
    from densecode.config import RewardConfig
    from densecode.rewards import Sample, build_assembler

    def sample(n, truncated):
        return Sample(prompt="x = ", response="a" * n, token_ids=list(range(n)),
                      token_spans=[(i, i + 1) for i in range(n)], code_regions=[(0, n)], truncated=truncated)

    asm = build_assembler(RewardConfig(weights={"missing_eos": 0.5, "echo": 0.0, "kl": 0.0}), EchoDomain())
    cut, done = sample(3, True), sample(3, False)
    batch = asm([cut, done])
    assert batch.total[0].tolist() == [0.0, 0.0, -0.5] and batch.total[1].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match="renamed: use reward.weights.missing_eos"):
        load_config(None, ["generation.missing_eos_penalty=1"])


def test_plugin_config_resets_robotics_options_with_null():
    cfg = load_config(ROOT / "configs" / "warehouse.yaml")
    assert type(cfg.tasks).__name__ == "PluginOptions" and not hasattr(cfg.tasks, "sim")
    domain = build_domain(cfg)
    assert domain.name == "warehouse" and domain.lint_builtins()[:2] == ["move", "scan"]


# --------------------------------------------------------------------------- import rules of the source tree


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / "sim" if path.is_relative_to(ROOT / "sim") else ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, top_level_only: bool, modules: set[str] = frozenset()) -> set[str]:
    """Imported module names. `from pkg import submodule` depends on the submodule only (Python imports it even
    while `pkg` is half initialised); `from mod import name` depends on `mod`. Not top-level only: every import,
    in functions too, except under `if TYPE_CHECKING:` (never run)."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(n) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
                   for stmt in block.body for n in ast.walk(stmt)}
    nodes = tree.body if top_level_only else [n for n in ast.walk(tree) if id(n) not in typing_only]
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            out |= subs
            if not subs <= set(modules):
                out.add(node.module)
    return out


def _sources(*roots: str) -> dict[str, Path]:
    files = {}
    for root in roots:
        for path in (ROOT / root).rglob("*.py"):
            files[_module_name(path)] = path
    return files


def test_rl_imports_no_domain_eval_or_cli():
    banned = ("densecode.domains", "densecode.eval", "densecode.cli", "densecode.training", "densecode.api",
              "densecode.simulators",
              "densecode_robosim", "densecode.embedded")
    bad = {name: sorted(i for i in _imports(path, top_level_only=False) if i.startswith(banned))
           for name, path in _sources("densecode/rl").items()}
    assert {k: v for k, v in bad.items() if v} == {}


def _cycles(modules: dict[str, Path]) -> list[list[str]]:
    """Import cycles among `modules`, reading every import (a function-level one runs on first call, and a
    cycle there breaks or not depending on which module a process imports first)."""
    graph = {name: {i for i in _imports(path, False, set(modules)) if i in modules and i != name}
             for name, path in modules.items()}
    seen: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in seen:
                visit(nxt, stack)
        stack.pop()
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name, [])
    # A package's __init__ importing its own submodules is how packages export; a submodule importing the
    # package back is the cycle that matters. Report every cycle that is not just "package -> its child".
    return [c for c in cycles if not all(b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(c, c[1:]))]


def test_no_import_cycles_between_modules():
    assert _cycles(_sources("densecode", "sim")) == []


def test_the_cycle_check_reads_function_level_imports(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("def f():\n    from b import g\n    return g\n")
    b.write_text("import a\n")
    c.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n")
    assert _cycles({"a": a, "b": b}) == [["a", "b", "a"]]
    assert _cycles({"a": a, "c": c}) == []  # a type-checking import never runs


# --------------------------------------------------------------------------- densecode eval on any domain


def test_eval_any_domain_canonical_and_model(tiny_model_dir, tmp_path):
    from densecode.cli import main

    out = tmp_path / "wh"
    assert main(["eval", "--config", str(ROOT / "configs" / "warehouse.yaml"), "--canonical", "--tasks", "6",
                 "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "warehouse" and results["scores"]["success pass@1"] == 1.0
    assert {"report.md", "chart.png"} <= {p.name for p in out.iterdir()}
    # a model's answers on a toy domain: every response scored by the domain's own score()
    out = tmp_path / "echo"
    assert main(["eval", "--domain", "echo-toy", "--model", str(tiny_model_dir), "--tasks", "3", "--max-new-tokens",
                 "4", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert len(results["tasks"]) == 3 and set(results["outcomes"]) <= {"success", "failure"}


def test_eval_domain_errors_are_one_line(tmp_path, capsys):
    from densecode.cli import main

    assert main(["eval", "--domain", "echo-toy", "--canonical", "--tasks", "2", "--out", str(tmp_path)]) == 2
    assert "have no canonical answer" in capsys.readouterr().err
    assert main(["eval", "--model", "densecode-tiny"]) == 2
    assert "name what to evaluate" in capsys.readouterr().err
