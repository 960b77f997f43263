"""Import boundaries read from the source tree (ast): the simulator package is pure gymnasium."""

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import statement in a file, lazy (in-function) imports included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def densecode_imports(files) -> list[str]:
    return [f"{f.relative_to(ROOT)}:{line}: {mod}" for f in files for line, mod in imported_modules(f)
            if mod == "densecode" or mod.startswith("densecode.")]


def test_robosim_package_imports_nothing_from_densecode():
    files = sorted((ROOT / "sim" / "densecode_robosim").rglob("*.py"))
    assert files, "sim/densecode_robosim not found"
    assert densecode_imports(files) == []


def test_robosim_tests_run_without_densecode():
    files = [ROOT / "tests" / "sim" / name for name in ("test_robosim.py", "test_robosim_tasks.py")]
    assert densecode_imports(files) == []
    # and for real: the package and its test modules import with densecode made unimportable
    code = ("import sys; sys.modules['densecode'] = None; import densecode_robosim, densecode_robosim.env; "
            "import test_robosim, test_robosim_tasks; print('ok')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "sim"), str(ROOT / "tests" / "sim")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT / "tests" / "sim")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_check_sees_lazy_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from densecode.sandbox import ApiError\n    import densecode.errors as e\n")
    assert [m for _, m in imported_modules(probe)] == ["densecode.sandbox", "densecode.errors"]
