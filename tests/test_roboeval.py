"""RoboEval loader and runner on the invented task (../shared/docs/example_task.py)."""

import os
import shutil
import sys

import pytest

from densecode.errors import DensecodeError
from densecode.eval.roboeval import evaluate_roboeval, format_report, load_roboeval, roboeval_prompts

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "docs", "example_task.py")
H = "def task_program():\n"
PROGRAMS = {
    "success": H + '    start = get_current_location()\n    go_to("library")\n'
    '    choice = ask("Mina", "Green tea or black tea?", ["green tea", "black tea"])\n'
    "    go_to(start)\n    say(\"Mina wants \" + choice)\n",
    "task_failure": H + '    go_to("library")\n    say("hello")\n',
    "robot_error": H + '    go_to("kitchen")\n',
    "python_error": H + "    x = undefined_name\n",
    "timeout": H + "    while True:\n        pass\n",
}
WAIT_TASK = '''import sys
sys.path.append('../..')
from benchmark.rtl import *
from benchmark.simulator import State
from misc.benchmark_utils import *
from typing import List

name = "WaitLab"
prompts = ["Wait in the lab until someone shows up, then say hi."]
state0 = State().addLocation("lab").addLocation("start_loc").addRobotLocation("start_loc")


def test0(trace_elements: List[TraceElement], VERBOSE: bool = False) -> bool:
    t = Trace(trace_elements)
    if VERBOSE:
        print_debug("checked", t.Exists(CheckEntity(".*")), [label_Unlisted])
    return t.Exists(CheckEntity("person")) and not t.Exists(Say(".*"))


tests = [{"state": state0, "test": test0, "timeout": True}]
'''


@pytest.fixture()
def task_dir(tmp_path):
    if not os.path.isfile(EXAMPLE):
        pytest.skip(f"invented RoboEval task not found at {os.path.abspath(EXAMPLE)}")
    shutil.copy(EXAMPLE, tmp_path / "TeaRound.py")
    (tmp_path / "WaitLab.py").write_text(WAIT_TASK)
    return tmp_path


def test_loader_uses_shims_only_while_importing(task_dir):
    tasks = load_roboeval(task_dir)
    assert [t.name for t in tasks] == ["TeaRound", "WaitLab"]
    assert len(tasks[0].prompts) == 5 and len(tasks[0].tests) == 2
    assert tasks[0].tests[0]["state"].to_world()["people"] == [[".*", "library", ["green"]]]
    assert not any(m in sys.modules for m in ("benchmark", "benchmark.rtl", "misc.benchmark_utils"))
    assert tasks[1].tests[0]["test"]([], True) is False  # VERBOSE path: unknown label_* names resolve
    prompts = roboeval_prompts(tasks)
    assert len(prompts) == 6 and prompts[0]["key"] == "TeaRound/0"
    assert prompts[0]["prompt"].startswith("# Instruction: Go to the library") and prompts[0]["prompt"].endswith(
        "def task_program():\n")


def test_runner_classifies_every_outcome(task_dir):
    tasks = load_roboeval(task_dir)
    wait = H + '    go_to("lab")\n    while not is_in_room("person"):\n        pass\n    say("hi")\n'
    report = evaluate_roboeval(
        tasks,
        {"TeaRound/0": list(PROGRAMS.values()), "TeaRound/1": [PROGRAMS["success"]], "WaitLab/0": [wait]},
        timeout_s=1.0,
    )
    tea0, tea1, wait0 = report["per_prompt"]
    states = [s["states"] for s in tea0["samples"]]
    assert states == [["success"] * 2, ["check_failure"] * 2, ["robot_error"] * 2, ["python_error"] * 2,
                      ["timeout"] * 2]
    assert tea0["samples"][2]["error"]["call"] == "go_to" and tea0["samples"][2]["error"]["line"] == 2
    assert tea0["samples"][3]["error"]["type"] == "NameError"
    assert tea0["breakdown"] == {"python_error": 1, "robot_error": 1, "task_failure": 2, "success": 1}
    assert tea0["pass@1"] == pytest.approx(0.2) and tea1["pass@1"] == 1.0
    assert wait0["samples"][0]["states"] == ["success"]  # expected timeout, partial trace judged
    assert report["n_prompts"] == 3 and report["successes"] == pytest.approx(0.2 + 1 + 1)
    assert sum(report["breakdown"].values()) == pytest.approx(3)
    assert "| Python error |" in format_report(report)


def test_bad_inputs_give_clear_errors(tmp_path):
    with pytest.raises(DensecodeError, match="RoboEval tasks not found"):
        load_roboeval(tmp_path / "missing")
    with pytest.raises(DensecodeError, match="no RoboEval task files"):
        load_roboeval(tmp_path)
    (tmp_path / "Broken.py").write_text("from benchmark.rtl import *\nname = 'B'\nprompts = ['x']\ntests = [1/0]\n")
    with pytest.raises(DensecodeError, match="Broken.py failed to import: ZeroDivisionError"):
        load_roboeval(tmp_path)
