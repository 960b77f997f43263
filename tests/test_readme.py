"""The README's test command is the one CI runs; keep them in sync."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_CMD = 'python -m pytest -m "not slow"'


def test_readme_shows_the_ci_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_CMD in readme, "README must show the test command CI runs"
    assert re.search(re.escape(TEST_CMD), ci), ".ci/run must run the README's test command"


def test_readme_shows_install_and_train():
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e . && densecode train --domain robotics" in readme  # developers (editable)
    assert re.search(r"pip install \S*git\+\S+ && densecode train --domain robotics", readme)  # users
    assert "pip install ./densecode && densecode train --domain robotics" in readme


def test_ci_runs_the_wheel_smoke_test_and_fails_with_it():
    ci = (ROOT / ".ci" / "run").read_text()
    smoke = (ROOT / ".ci" / "wheel-smoke").read_text()
    assert "bash .ci/wheel-smoke" in ci and 'if [ "$smoke_rc" -ne 0 ]' in ci
    for command in ("densecode --help", "densecode config --config robotics", "densecode train --domain robotics",
                    "gymnasium.make('RoboSim-v0')", "pip install -q --no-deps \"$work\"/dist/densecode-"):
        assert command in smoke, command
