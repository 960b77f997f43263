"""RoboEval judged as CodeBotler's evaluator judges it (issue #18), on invented tasks in RoboEval's file format
(../shared/docs/roboeval-format.md). Each of the issue's rules 1-9 has a test whose expected verdicts follow
from CodeBotler's rule; the `fixed` semantics differs exactly on the reference's accidents (2, 6, 8, 9)."""

import logging
import os
import re
import shutil
import sys
import textwrap

import pytest

from densecode.errors import DensecodeError
from densecode.eval.roboeval import (
    evaluate_roboeval,
    format_report,
    load_roboeval,
    resolve_style,
    roboeval_prompts,
    trace_from_stdout,
)
from densecode.eval.roboeval.semantics import contain_words, exclude_and_contain, rewrite_codebotler

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "docs", "example_task.py")
H = "def task_program():\n"
HEADER = """import sys
sys.path.append('../..')
from benchmark.rtl import *
from benchmark.simulator import State
from misc.benchmark_utils import *
from typing import List
"""


def task_file(name: str, state: str, check: str, timeout: bool = False, prompts: int = 1) -> str:
    """An invented task: one state (`state` is a State(...) expression), test = `check` on Trace t."""
    return HEADER + textwrap.dedent(f"""
        name = {name!r}
        prompts = [{", ".join(repr(f"{name} prompt {i}") for i in range(prompts))}]
        state0 = {state}


        def test0(trace_elements: List[TraceElement], VERBOSE: bool = False) -> bool:
            t = Trace(trace_elements)
            return {check}


        tests = [{{"state": state0, "test": test0, "timeout": {timeout}}}]
        """)


def judge(tmp_path, task_source: str, programs: dict[str, str], semantics: str) -> dict[str, str]:
    """{program label: outcome of its one state} for programs (bodies) judged on one invented task."""
    folder = tmp_path / semantics
    folder.mkdir(exist_ok=True)
    name = re.search(r"name = '(\w+)'", task_source).group(1)
    (folder / f"{name}.py").write_text(task_source)
    suite = load_roboeval(folder, semantics=semantics)
    report = evaluate_roboeval(suite, {f"{name}/0": [H + textwrap.indent(p, "    ") for p in programs.values()]})
    return {label: s["outcome"] for label, s in zip(programs, report["per_prompt"][0]["samples"])}


BOTH = ("codebotler", "fixed")
ROOMS = 'State().addLocation("start_loc").addLocation("lobby")'


# ------------------------------------------------------------------ rule 1: contain_words is plain containment


def test_rule1_contain_words_has_no_word_boundaries(tmp_path):
    assert re.search(contain_words(["arr"]), "The guests arrived", re.I)
    assert re.search(contain_words(["wa"]), "warmer", re.I) and re.search(contain_words(["cake"]), "cupcake", re.I)
    assert contain_words(["a", "b"]) == r"^(?=.*a)(?=.*b).*$"
    task = task_file("Arrival", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(Say(contain_words(["cake"])))')
    programs = {"cupcake": 'say("One cupcake left")', "pie": 'say("One pie left")'}
    for semantics in BOTH:  # not an accident: both semantics keep it
        assert judge(tmp_path, task, programs, semantics) == {"cupcake": "success", "pie": "check_failure"}


# ------------------------------------------------------------------ rule 2: the exclude-words regex and its precedence


def test_rule2_excluded_words_precedence(tmp_path):
    buggy = exclude_and_contain(["cake"], ["no", "not"], precedence_bug=True)
    assert buggy == r"^(?!.*\bno\b|\bnot\b)(?=.*cake).*$"  # anchored at ^; the 2nd word only at the very start
    assert re.search(buggy, "there is not cake", re.I) and not re.search(buggy, "not cake", re.I)
    assert not re.search(buggy, "there is no cake", re.I)
    fixed = exclude_and_contain(["cake"], ["no", "not"], precedence_bug=False)
    assert not re.search(fixed, "there is not cake", re.I) and re.search(fixed, "cake for all", re.I)
    task = task_file("CakeCheck", ROOMS + '.addRobotLocation("start_loc")',
                     't.Exists(Say(contain_words_and_exlude_words(["cake"], ["no", "not"])))')
    programs = {"not_later": 'say("there is not cake")', "not_first": 'say("not cake")',
                "no_later": 'say("there is no cake")', "plain": 'say("cake is here")'}
    assert judge(tmp_path, task, programs, "codebotler") == {
        "not_later": "success", "not_first": "check_failure", "no_later": "check_failure", "plain": "success"}
    assert judge(tmp_path, task, programs, "fixed") == {
        "not_later": "check_failure", "not_first": "check_failure", "no_later": "check_failure", "plain": "success"}


# ------------------------------------------------------------------ rule 3: ask's fallbacks


def test_rule3_ask_answers_with_yes_no_fallbacks(tmp_path):
    state = ('State().addLocation("start_loc").addLocation("office").addLocation("hall")'
             '.addAgent(".*", "office", ["juice"]).addAgent("Mina", "hall", ["tea"]).addRobotLocation("start_loc")')
    task = task_file("AskRules", state, 't.Exists(Say("^answer: "))')
    programs = {
        # the answer found in an option: that option
        "in_option": 'go_to("office")\nsay("answer: " + ask("", "Drink?", ["water", "orange juice"]))',
        # not in an option but in the question: the first option containing "yes"
        "in_question": 'go_to("office")\nsay("answer: " + ask("", "Want juice?", ["Oh yes", "No"]))',
        # in neither: the first option containing "no" ("know" counts)
        "neither_no": 'go_to("office")\nsay("answer: " + ask("", "Coffee?", ["Tea", "I don\'t know"]))',
        # in neither and no option contains "no": a robot error
        "nothing": 'go_to("office")\nsay("answer: " + ask("", "Coffee?", ["Tea", "Cake"]))',
        # an agent whose name pattern does not match the person asked: a robot error
        "wrong_person": 'go_to("hall")\nsay("answer: " + ask("Bob", "Tea?", ["tea", "coffee"]))',
        "right_person": 'go_to("hall")\nsay("answer: " + ask("Mina", "Tea?", ["tea", "coffee"]))',
    }
    want = {"in_option": "success", "in_question": "success", "neither_no": "success", "nothing": "robot_error",
            "wrong_person": "robot_error", "right_person": "success"}
    for semantics in BOTH:
        assert judge(tmp_path, task, programs, semantics) == want


def test_rule3_returned_option_reaches_the_trace(tmp_path):
    state = 'State().addLocation("start_loc").addLocation("office").addAgent(".*", "office", ["juice"])' \
            '.addRobotLocation("start_loc")'
    task = task_file("AskKnow", state, 't.Exists(Say("know"))')
    assert judge(tmp_path, task, {"p": 'go_to("office")\nsay(ask("", "Coffee?", ["Tea", "I don\'t know"]))'},
                 "codebotler") == {"p": "success"}


# ------------------------------------------------------------------ rule 4: time is imported, sleep(1) is short


def test_rule4_time_is_imported_and_sleeps_are_short(tmp_path):
    task = task_file("Sleepy", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(Say("done"))')
    programs = {"sleep1": 'for _ in range(30):\n    time.sleep(1)\nsay("done")',  # 30 s as written
                "sleep2": 'time.sleep(2)\nsay("done")'}
    # CodeBotler rewrites exactly `time.sleep(1)`; a 2 s sleep runs past the 1 s limit
    assert judge(tmp_path, task, programs, "codebotler") == {"sleep1": "success", "sleep2": "timeout"}
    assert judge(tmp_path, task, programs, "fixed") == {"sleep1": "success", "sleep2": "success"}


# ------------------------------------------------------------------ rule 5: robot errors are catchable exceptions


def test_rule5_a_program_may_catch_a_robot_error(tmp_path):
    task = task_file("Recover", ROOMS + '.addRobotLocation("start_loc")',
                     't.Exists(GoTo("lobby")) and t.Exists(Say("RobotGoToError"))')
    programs = {
        "caught": 'try:\n    go_to("kitchen")\nexcept Exception as e:\n    say(str(e))\ngo_to("lobby")',
        "uncaught": 'go_to("kitchen")\ngo_to("lobby")',
        "type_error_caught": 'try:\n    go_to(3)\nexcept TypeError as e:\n    say(str(e))\ngo_to("lobby")',
    }
    for semantics in BOTH:
        assert judge(tmp_path, task, programs, semantics) == {
            "caught": "success", "uncaught": "robot_error", "type_error_caught": "success"}


# ------------------------------------------------------------------ rule 6: the program's own prints end the trace


def test_rule6_prints_end_the_trace_read_from_stdout(tmp_path):
    task = task_file("Printer", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(GoTo("lobby")) and t.Exists(Say("hi"))')
    programs = {"print_between": 'go_to("lobby")\nprint("debug")\nsay("hi")',
                "exit_0": 'go_to("lobby")\nsay("hi")\nexit()\nsay("never")',
                "exit_1": 'go_to("lobby")\nsay("hi")\nsys.exit(1)',
                "print_after": 'go_to("lobby")\nsay("hi")\nprint("done")',
                "newline_in_say": 'go_to("lobby")\nsay("two\\nlines")\nsay("hi")'}
    # (a run that ends with exit status 0 is a finished run; any other status is a Python error)
    assert judge(tmp_path, task, programs, "codebotler") == {
        "print_between": "check_failure", "exit_0": "success", "exit_1": "python_error", "print_after": "success",
        "newline_in_say": "check_failure"}
    assert judge(tmp_path, task, programs, "fixed") == {
        "print_between": "success", "exit_0": "success", "exit_1": "python_error", "print_after": "success",
        "newline_in_say": "success"}


def test_trace_parser_reads_stdout_as_codebotler():
    d = "/$@!/"
    out = f"GoTo {d} lobby {d} None\nAsk {d} Tea? {d} ['yes', 'no']\nhello\nSay {d} hi {d} None\n"
    assert [e.to_list() for e in trace_from_stdout(out)] == [["GoTo", "lobby", None], ["Ask", "Tea?", ["yes", "no"]]]
    assert trace_from_stdout("") == [] and trace_from_stdout(f"Say {d} x {d} __import__('os')\n") == []


# ------------------------------------------------------------------ rule 7: an unexpected timeout is an execution error


def test_rule7_timeouts(tmp_path):
    loop = 'go_to("lobby")\nwhile True:\n    is_in_room("person")'
    for semantics in BOTH:
        unexpected = task_file("Loop", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(GoTo("lobby"))')
        assert judge(tmp_path, unexpected, {"loop": loop}, semantics) == {"loop": "timeout"}
        expected = task_file("Wait", ROOMS + '.addRobotLocation("start_loc")',
                             't.Exists(GoTo("lobby")) and t.Exists(CheckEntity("person"))', timeout=True)
        assert judge(tmp_path, expected, {"loop": loop}, semantics) == {"loop": "success"}
    from densecode.eval.roboeval import table_class

    assert table_class("timeout") == "robot_error"  # CodeBotler: "program should not timeout"


# ------------------------------------------------------------------ rule 8: double-quoted literals are lowercased


def test_rule8_double_quoted_literals_are_lowercased(tmp_path):
    state = 'State().addLocation("start_loc").addAgent(".*", "start_loc", ["yes"]).addRobotLocation("start_loc")'
    task = task_file("Quotes", state, 't.Exists(Say("^great$"))')
    programs = {
        "double": 'r = ask("", "Do you want it?", ["Yes", "No"])\nif r == "Yes":\n    say("great")',
        "mixed": "r = ask('', 'Do you want it?', ['Yes', 'No'])\nif r == \"Yes\":\n    say(\"great\")",
        "returned": 'r = ask("", "Do you want it?", ["Yes", "No"])\nif r == \'yes\':\n    say("great")',
        # an f-string's fields are inside the quotes too: `{Word}` becomes `{word}`, an undefined name
        "fstring": 'Word = "great"\nsay(f"{Word}")',
    }
    assert judge(tmp_path, task, programs, "codebotler") == {
        "double": "success", "mixed": "check_failure", "returned": "success", "fstring": "python_error"}
    assert judge(tmp_path, task, programs, "fixed") == {
        "double": "success", "mixed": "success", "returned": "check_failure", "fstring": "success"}


# ------------------------------------------------------------------ rule 9: API names are rewritten textually


def test_rule9_api_names_are_rewritten_textually(tmp_path):
    assert rewrite_codebotler(H + '    essay("x")\n').startswith("def task_program(robot):\n    esrobot.say(")
    assert rewrite_codebotler(H + "    pass\n").endswith("\n\ntask_program(robot)")
    task = task_file("Names", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(Say("a b"))')
    programs = {"replace": 'say("a-b".replace("-", " "))',
                "essay": 'def essay(text):\n    return text\nsay(essay("a b"))',
                "plain": 'say("a b")'}
    assert judge(tmp_path, task, programs, "codebotler") == {
        "replace": "python_error", "essay": "parse_error", "plain": "success"}  # parse errors: Python-error column
    assert judge(tmp_path, task, programs, "fixed") == {"replace": "success", "essay": "success", "plain": "success"}


# ------------------------------------------------------------------ the world's other CodeBotler details


def test_pick_place_and_rooms_list_follow_codebotler(tmp_path):
    state = ('State().addLocation("start_loc").addLocation("kitchen").addObject("apple", "kitchen")'
             '.addRobotLocation("start_loc")')
    task = task_file("Fetch", state, 't.Exists(Pick("apple")) and t.Exists(Place("apple"))')
    programs = {
        "ok": 'go_to("kitchen")\npick("red apple")\ngo_to("start_loc")\nplace("red apple")',
        "place_other_case": 'go_to("kitchen")\npick("apple")\nplace(\'Apple\')',  # place needs the exact string
        "failed_pick_untraced": 'go_to("start_loc")\ntry:\n    pick("apple")\nexcept Exception:\n    pass\n'
                                'go_to("kitchen")\npick("apple")\nplace("apple")',
        # the list get_all_rooms() returns is the simulator's: removing a room makes it unreachable
        "rooms_alias": 'rooms = get_all_rooms()\nrooms.remove("kitchen")\ngo_to("kitchen")',
        # ... and placing in a room no longer listed fails (CodeBotler's addObject checks the list)
        "place_unlisted": 'go_to("kitchen")\npick("apple")\nget_all_rooms().remove("kitchen")\nplace("apple")',
    }
    for semantics in BOTH:
        assert judge(tmp_path, task, programs, semantics) == {
            "ok": "success", "place_other_case": "robot_error", "failed_pick_untraced": "success",
            "rooms_alias": "robot_error", "place_unlisted": "robot_error"}


# ------------------------------------------------------------------ files and paths


@pytest.fixture()
def checkout(tmp_path):
    """A CodeBotler-shaped checkout: root with codebotler.py, benchmark/tasks with task files and a helper."""
    if not os.path.isfile(EXAMPLE):
        pytest.skip(f"invented RoboEval task not found at {os.path.abspath(EXAMPLE)}")
    root = tmp_path / "CodeBotler"
    tasks = root / "benchmark" / "tasks"
    (tasks / "open_world_knowledge").mkdir(parents=True)
    (root / "code_generation").mkdir()
    shutil.copy(EXAMPLE, tasks / "TeaRound.py")
    (tasks / "Arrival.py").write_text(task_file("Arrival", ROOMS + '.addRobotLocation("start_loc")',
                                                't.Exists(Say("arr"))', prompts=2))
    (tasks / "helpers.py").write_text("import websockets\nraise SystemExit('must never be imported')\n")
    (tasks / "__init__.py").write_text("")
    (tasks / "notes.txt").write_text("not code")
    (tasks / "open_world_knowledge" / "Ablation.py").write_text(
        task_file("Ablation", ROOMS + '.addRobotLocation("start_loc")', 't.Exists(Say("x"))'))
    (root / "codebotler.py").write_text("import websockets\nraise SystemExit('must never be imported')\n")
    (root / "benchmark" / "simulator.py").write_text("raise SystemExit('must never be imported')\n")
    (root / "code_generation" / "prompt_prefix.py").write_text(
        '"""Robot task programs."""\n\n# Say hi\ndef task_program():\n    say("hi")\n\n#  \n')
    return root


def test_paths_root_benchmark_tasks_and_home(checkout, monkeypatch, caplog):
    for where in (checkout, checkout / "benchmark", checkout / "benchmark" / "tasks"):
        with caplog.at_level(logging.WARNING, logger="densecode.roboeval"):
            caplog.clear()
            suite = load_roboeval(where)
        assert [t.name for t in suite.tasks] == ["Arrival", "TeaRound"] and suite.root == checkout.resolve()
        reasons = dict((os.path.basename(p), why) for p, why in suite.skipped)
        assert set(reasons) == {"helpers.py", "__init__.py", "notes.txt", "open_world_knowledge"}
        assert "no top-level name, prompts, tests" in reasons["helpers.py"]
        assert "--roboeval-subset open_world_knowledge" in reasons["open_world_knowledge"]
        assert all(os.path.basename(p) in caplog.text for p, _ in suite.skipped)  # every skip is warned, with why
    monkeypatch.setenv("HOME", str(checkout.parent))
    assert [t.name for t in load_roboeval("~/CodeBotler").tasks] == ["Arrival", "TeaRound"]
    assert not any(m in sys.modules for m in ("benchmark", "benchmark.rtl", "misc.benchmark_utils"))


def test_subset_flag_and_single_file(checkout):
    assert [t.name for t in load_roboeval(checkout, subset="open_world_knowledge").tasks] == ["Ablation"]
    with pytest.raises(DensecodeError, match="no such folder.*open_world_knowledge"):
        load_roboeval(checkout, subset="missing")
    with pytest.raises(DensecodeError, match="no such folder"):
        load_roboeval(checkout, subset="../../..")
    one = load_roboeval(checkout / "benchmark" / "tasks" / "TeaRound.py")
    assert [t.name for t in one.tasks] == ["TeaRound"] and one.root == checkout.resolve()
    with pytest.raises(DensecodeError, match="not a RoboEval task file"):
        load_roboeval(checkout / "codebotler.py")


def test_prompt_styles(checkout):
    suite = load_roboeval(checkout)
    style, prefix = resolve_style("auto", suite.prompt_prefix_path)
    assert style == "codebotler"
    prompt = roboeval_prompts(suite, style, prefix)[0]["prompt"]
    assert prompt.startswith('"""Robot task programs."""') and prompt.endswith(
        '    say("hi")\n\n# Arrival prompt 0\ndef task_program():\n')
    assert roboeval_prompts(suite, *resolve_style("instruction", suite.prompt_prefix_path))[0]["prompt"] == (
        "# Instruction: Arrival prompt 0\ndef task_program():\n")
    bare = load_roboeval(checkout / "benchmark" / "tasks" / "open_world_knowledge")
    assert resolve_style("auto", bare.prompt_prefix_path) == ("instruction", None)
    with pytest.raises(DensecodeError, match="prompt_prefix.py"):
        resolve_style("codebotler", bare.prompt_prefix_path, "somewhere")


def test_bad_inputs_give_clear_errors(tmp_path):
    with pytest.raises(DensecodeError, match="RoboEval tasks not found"):
        load_roboeval(tmp_path / "missing")
    with pytest.raises(DensecodeError, match="no RoboEval task files"):
        load_roboeval(tmp_path)
    (tmp_path / "Broken.py").write_text("from benchmark.rtl import *\nname = 'B'\nprompts = ['x']\ntests = [1/0]\n")
    with pytest.raises(DensecodeError, match="Broken.py failed to import: ZeroDivisionError"):
        load_roboeval(tmp_path)
    with pytest.raises(DensecodeError, match="roboeval-semantics"):
        load_roboeval(tmp_path, semantics="strict")


# ------------------------------------------------------------------ the report


def test_report_classifies_every_outcome(checkout):
    suite = load_roboeval(checkout)
    programs = [
        H + '    start = get_current_location()\n    go_to("library")\n'
        '    choice = ask("Mina", "Green tea or black tea?", ["green tea", "black tea"])\n'
        "    go_to(start)\n    say(\"Mina wants \" + choice)\n",
        H + '    go_to("library")\n    say("hello")\n',
        H + '    go_to("kitchen")\n',
        H + "    x = undefined_name\n",
        H + "    while True:\n        pass\n",
        H + "    go_to(\n",
    ]
    report = evaluate_roboeval(suite, {"TeaRound/0": programs, "Arrival/1": ['    say("arrived")\n']})
    tea, arrival = report["per_prompt"]
    assert [s["states"] for s in tea["samples"]] == [["success"] * 2, ["check_failure"] * 2, ["robot_error"] * 2,
                                                    ["python_error"] * 2, ["timeout"] * 2, ["parse_error"] * 2]
    assert tea["samples"][2]["error"]["line"] == 2 and "RobotGoToError" in tea["samples"][2]["error"]["message"]
    assert tea["samples"][3]["error"] == {"kind": "python", "type": "NameError", "line": 2,
                                          "message": "name 'undefined_name' is not defined"}
    assert tea["samples"][5]["error"]["line"] == 2
    assert tea["breakdown"] == {"python_error": 2, "robot_error": 2, "task_failure": 1, "success": 1}
    assert arrival["pass@1"] == 1.0 and report["semantics"] == "codebotler"
    assert sum(report["breakdown"].values()) == pytest.approx(2)
    assert "codebotler semantics" in format_report(report)


def test_cli_flags_semantics_prompt_style_subset(checkout, tmp_path, monkeypatch):
    import json

    from densecode.cli import main
    from densecode.eval import runner

    seen = {}

    def fake_bodies(args, prompts, out):
        seen["prompts"] = prompts
        return [['    print("hi")\n    say("arrived")\n'] for _ in prompts]

    monkeypatch.setattr(runner, "_robo_bodies", fake_bodies)
    base = ["eval", "--benchmark", "roboeval", "--data", str(checkout), "--limit", "2"]
    assert main([*base, "--out", str(tmp_path / "cb")]) == 0
    results = json.loads((tmp_path / "cb" / "results.json").read_text())
    settings = results["settings"]
    assert (settings["roboeval_semantics"], settings["prompt_style"]) == ("codebotler", "codebotler")
    assert settings["prompt_file"].endswith("code_generation/prompt_prefix.py")
    assert any("helpers.py" in s for s in settings["skipped_files"])
    assert seen["prompts"][0].startswith('"""Robot task programs."""')
    assert [t["outcome"] for t in results["tasks"]] == ["check_failure"] * 2  # the print ends CodeBotler's trace
    assert main([*base, "--roboeval-semantics", "fixed", "--prompt-style", "instruction",
                 "--out", str(tmp_path / "fx")]) == 0
    results = json.loads((tmp_path / "fx" / "results.json").read_text())
    assert results["settings"]["prompt_style"] == "instruction" and seen["prompts"][0].startswith("# Instruction: ")
    assert [t["outcome"] for t in results["tasks"]] == ["success"] * 2
    assert main([*base[:-2], "--roboeval-subset", "open_world_knowledge", "--out", str(tmp_path / "sub")]) == 0
    assert json.loads((tmp_path / "sub" / "results.json").read_text())["settings"]["tasks"] == 1
    assert main([*base, "--prompt-style", "chat", "--out", str(tmp_path / "bad")]) == 2


# ------------------------------------------------------------------ cross-check: sandboxed robot vs an in-process one


class _InProcessRobot:
    """CodeBotler's flow in one object, in-process (trusted test programs only): State + Robot, printing the
    trace, no bridge. The sandboxed robot + trusted world split must give the same stdout trace."""

    def __init__(self, state, out):
        import copy

        self.s, self.out, self.holding = copy.deepcopy(state), out, None

    def _m(self, pattern, value):
        return bool(re.search(pattern, str(value), re.IGNORECASE))

    def _p(self, *fields):
        print(" /$@!/ ".join(str(f) for f in fields), file=self.out)

    def get_current_location(self):
        return self.s.robot_location

    def get_all_rooms(self):
        return self.s.locations

    def is_in_room(self, entity):
        self._p("CheckEntity", entity, None)
        here = self.s.robot_location
        return any(self._m(o, entity) for o in self.s.objects.get(here, [])) or any(
            self._m(n, entity) for n, _ in self.s.agents.get(here, []))

    def go_to(self, location):
        self._p("GoTo", location, None)
        for loc in self.s.locations:
            if self._m(loc, location):
                self.s.robot_location = loc
                return
        raise Exception("RobotGoToError: update_robot_location failed")

    def ask(self, person, question, options):
        self._p("Ask", question, options)
        for name, answers in self.s.agents.get(self.s.robot_location, []):
            if self._m(name, person):
                ans = answers.pop(0) if len(answers) > 1 else answers[0]
                for o in options:
                    if self._m(ans, o):
                        return o
                word = "yes" if self._m(ans, question) else "no"
                for o in options:
                    if self._m(word, o):
                        return o
        raise Exception("RobotAskError: ask_agent failed")

    def say(self, message):
        self._p("Say", message, None)

    def pick(self, obj):
        if self.holding is not None:
            raise Exception("RobotPickError: holding")
        objs = self.s.objects.get(self.s.robot_location) or []
        for o in objs:
            if self._m(o, obj):
                objs.remove(o)
                self.holding = obj
                self._p("Pick", obj, None)
                return
        raise Exception("RobotPickError: removeObject failed")

    def place(self, obj):
        if self.holding != obj:
            raise Exception("RobotPlaceError: not holding")
        self.holding = None
        self.s.objects.setdefault(self.s.robot_location, []).append(obj)
        self._p("Place", obj, None)


def in_process_verdicts(task, program: str) -> list[str]:
    import io

    out = []
    for test in task.tests:
        buffer = io.StringIO()
        robot = _InProcessRobot(test["state"], buffer)
        try:
            exec(compile(rewrite_codebotler(program), "<p>", "exec"), {"robot": robot, "print": lambda *a, **k: print(
                *a, file=buffer)})  # noqa: S102 - our own test programs
        except Exception as exc:  # noqa: BLE001
            out.append("robot_error" if "Robot" in str(exc) else "python_error")
            continue
        elements = trace_from_stdout(buffer.getvalue())
        out.append("success" if test["test"](elements) is True else "check_failure")
    return out


def test_sandboxed_codebotler_mode_agrees_with_an_in_process_run(checkout):
    suite = load_roboeval(checkout)
    tea = next(t for t in suite.tasks if t.name == "TeaRound")
    bodies = [
        'start = get_current_location()\ngo_to("library")\nr = ask("Mina", "Green or black tea?", ["Green", "Black"])\n'
        'go_to(start)\nsay("Mina wants " + r + " tea")',
        'for room in get_all_rooms():\n    go_to(room)\n    if is_in_room("person"):\n'
        '        r = ask("", "Tea?", ["green tea", "black tea"])\n        go_to("start_loc")\n        say(r)\n        break',
        'go_to("library")\nr = ask("x", "Which tea?", ["green tea", "black tea"])\nprint(r)\ngo_to("start_loc")\nsay(r)',
        'go_to("garage")\ngo_to("library")\nsay(ask("", "tea?", ["Yes", "No"]))',
        'go_to("library")\nr = ask("", "Tea?", [\'Green tea\', \'Black tea\'])\ngo_to("start_loc")\nsay("She said " + r)',
        'rooms = get_all_rooms()\nrooms.reverse()\nfor r in rooms:\n    go_to(r)\ngo_to("start_loc")\nsay("done")',
        'go_to("library")\nchoice = ask("Mina", "Green tea or black tea? Do you know?", ["Unknown"])\nsay(choice)',
        'go_to("the LIBRARY")\nx = ask("", "Green or black?", ["GREEN", "BLACK"])\ngo_to("start_loc")\nsay(x.lower())',
        'go_to("library")\npick("tea")',
    ]
    programs = [H + textwrap.indent(b, "    ") + "\n" for b in bodies]
    report = evaluate_roboeval(suite, {"TeaRound/0": programs}, semantics="codebotler")
    got = [s["states"] for s in report["per_prompt"][0]["samples"]]
    want = [in_process_verdicts(tea, p) for p in programs]
    assert got == want
    assert {v for states in want for v in states} >= {"success", "check_failure", "robot_error"}
