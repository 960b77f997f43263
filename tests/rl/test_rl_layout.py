"""The training package's layout (#42): densecode/rl is the loop and its parts, not a domain's or the CLI's.

- densecode/rl imports no domain, eval or CLI module (domains plug in through rl.protocols);
- nothing in densecode/rl probes densecode's own objects with hasattr / getattr(..., default): what an algorithm
  or a task source may provide is declared in rl.protocols (third-party objects — HF models, accelerate's
  optimizer wrapper, model configs, exceptions — are outside this rule); the reward function returns a
  RewardBatch whose outputs carry typed verdicts (ComponentOutput), so those are read as fields too;
- trainer.py stays the loop (<= 450 lines).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RL = ROOT / "densecode" / "rl"
FORBIDDEN = ("densecode.domains", "densecode.eval", "densecode.cli")
# First arguments of a probe that are densecode's own objects (the trainer's collaborators and data).
OWN = {"algo", "task_source", "reward_fn", "cfg", "batch", "mb", "out", "response", "g", "self", "reward_outputs",
       "rb", "o", "comp", "info", "outputs", "infos"}
THIRD_PARTY = {"self.optimizer", "tr.optimizer"}  # accelerate's AcceleratedOptimizer wraps torch's


def _rl_files():
    files = sorted(RL.glob("*.py"))
    assert RL / "trainer.py" in files
    return files


def _probes(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
            continue
        probe = node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) == 3)
        target = ast.unparse(node.args[0])
        if probe and target.split(".")[0] in OWN and target not in THIRD_PARTY:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_rl_imports_no_domain_eval_or_cli_module():
    bad = []
    for f in _rl_files():
        for node in ast.walk(ast.parse(f.read_text())):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            bad += [f"{f.name}:{node.lineno}: {m}" for m in mods if m.startswith(FORBIDDEN)]
    assert bad == []


def test_no_hasattr_probing_of_densecodes_own_objects_in_rl():
    assert [p for f in _rl_files() for p in _probes(f)] == []


def test_the_probe_check_sees_a_probe(tmp_path):
    probe = RL / "trainer.py"
    src = tmp_path / "x.py"
    src.write_text("def f(algo, self):\n    return hasattr(algo, 'kl_coef') or getattr(self, '_x', None)\n")
    assert len(_probes(src, tmp_path)) == 2 and _probes(probe) == []


def test_rl_reads_no_verdict_from_a_components_info_dict():
    """ComponentOutput.info is for logging: the optimisers and stats read the typed verdict fields."""
    bad = []
    for f in _rl_files():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "info" and ast.unparse(node.value) not in ("logger",
                                                                                                          "logging"):
                bad.append(f"{f.name}:{node.lineno}: {ast.unparse(node)}")
    assert bad == []


def test_trainer_is_the_loop():
    n = len((RL / "trainer.py").read_text().splitlines())
    assert n <= 450, f"densecode/rl/trainer.py has {n} lines; move helpers to their own rl/ module"
