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
    assert "pip install -e ." in readme
    assert "densecode train --domain robotics" in readme
