"""The two RoboEval judging semantics: `codebotler` (CodeBotler's evaluator, accidents included) and `fixed`.

CodeBotler's evaluator defines the published RoboEval numbers, so `codebotler`
(the default) reproduces it: its checks' regex helpers, its rewriting of the
program text, its robot (errors are exceptions the program may catch) and
its trace, read back from the program's stdout. `fixed` corrects the
reference's accidents and keeps the rest:

| rule | codebotler | fixed |
|---|---|---|
| 2 exclude-words regex | `^(?!.*\\bw1\\b|\\bw2\\b)...`: w2 rejected only at the start | `^(?!.*(?:\\bw1\\b|\\bw2\\b))...` |
| 6 program's own print() | ends the trace the checks can read | ignored (the trace comes from the simulator) |
| 8 double-quoted literals | lowercased before running | left as written |
| 9 API names | `say(` -> `robot.say(` textually (also in `essay(`, `str.replace(`) | bound as functions; text unchanged |

Shared by both: contain_words is plain containment (rule 1), ask's fallbacks
(3), `time` imported and sleeps short (4; codebotler rewrites `time.sleep(1)`
only, fixed caps every sleep at 0.01 s), robot errors are catchable
exceptions (5), an unexpected timeout is an execution error (7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

API_METHODS = ("get_current_location", "get_all_rooms", "is_in_room", "say", "go_to", "ask", "pick", "place")
BRIDGE = "_roboeval_api"  # the one sandbox API function; the robot object in the child calls it


@dataclass(frozen=True)
class Semantics:
    name: str
    exclude_precedence_bug: bool  # rule 2
    prints_end_trace: bool  # rule 6: the trace is read from stdout
    lowercase_literals: bool  # rule 8
    rewrite_names: bool  # rule 9 (and `time.sleep(1)` -> `time.sleep(0.01)`)


SEMANTICS = {
    "codebotler": Semantics("codebotler", True, True, True, True),
    "fixed": Semantics("fixed", False, False, False, False),
}


def get_semantics(name: str | Semantics) -> Semantics:
    if isinstance(name, Semantics):
        return name
    if name not in SEMANTICS:
        from densecode.errors import DensecodeError

        raise DensecodeError(f"--roboeval-semantics must be one of {', '.join(SEMANTICS)}; got {name!r}")
    return SEMANTICS[name]


# ------------------------------------------------------------------ the checks' regex helpers (misc.benchmark_utils)


def contain_words(words: list[str]) -> str:
    """Every word occurs, in any order: plain containment, no word boundaries ("arr" accepts "arrived")."""
    return r"^(?=.*" + r")(?=.*".join(words) + r").*$"


def exclude_and_contain(contained: list[str], excluded: list[str], precedence_bug: bool) -> str:
    excluded_alternatives = r"|".join(r"\b" + re.escape(word) + r"\b" for word in excluded)
    if not precedence_bug:
        excluded_alternatives = "(?:" + excluded_alternatives + ")"
    return r"^(?!.*" + excluded_alternatives + r")(?=.*" + r")(?=.*".join(contained) + r").*$"


def exclude_helper(semantics: Semantics):
    """`contain_words_and_exlude_words` (sic) as the semantics defines it."""

    def contain_words_and_exlude_words(contained_words: list[str], excluded_words: list[str]) -> str:
        return exclude_and_contain(contained_words, excluded_words, semantics.exclude_precedence_bug)

    return contain_words_and_exlude_words


def print_debug(check_name: str, check_output: bool, labels: list | None = None) -> None:
    print(f"{check_name}: {check_output}. Labels: {labels or []}")


# ------------------------------------------------------------------ program text


def rewrite_codebotler(program: str) -> str:
    """CodeBotler's textual rewrite: lowercase double-quoted literals, prefix API names with `robot.`, call it."""
    program = re.sub(r"\".*?\"", lambda m: m.group(0).lower(), program)
    program = program.replace("task_program()", "task_program(robot)")
    for name in API_METHODS:
        program = program.replace(f"{name}(", f"robot.{name}(")
    program = program.replace("time.sleep(1)", "time.sleep(0.01)")
    return program + "\n\ntask_program(robot)"


# The robot in the sandboxed child. It owns only what CodeBotler's robot does
# in-process (argument type checks, the trace lines it prints, the rooms list
# it hands out); every world lookup goes to the trusted simulator through the
# bridge. The program's own prints share the stdout.
ROBOT_SOURCE = r'''
import sys, time
_api = %(bridge)s
_DELIM = "/$@!/"
_real_sleep = time.sleep
_PRINT_TRACE = %(print_trace)r


class _Pipe:
    """stdout as CodeBotler's harness reads it: a pipe; once `cap` bytes are unread the writer blocks for good."""

    def __init__(self, stream, cap):
        self._stream, self._cap, self._n = stream, cap, 0

    def write(self, text):
        self._n += len(str(text).encode("utf-8", "replace"))
        if self._n > self._cap:
            if %(block)r:
                self._stream.flush()
                while True:
                    _real_sleep(3600)
            return len(text)
        return self._stream.write(text)

    def flush(self):
        return self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


sys.stdout = _Pipe(sys.stdout, %(cap)d)
if %(cap_sleeps)r:
    def _short_sleep(seconds):
        _real_sleep(min(seconds, 0.01))
    time.sleep = _short_sleep


def _call(method, *args):
    reply = _api(method, list(args))
    if "e" in reply:
        raise Exception(reply["e"])
    return reply.get("v")


def _trace_line(name, value1, value2=None):
    if _PRINT_TRACE:
        print(f"{name} {_DELIM} {value1} {_DELIM} {value2}", flush=True)


_locations = _call("init")


class Robot:
    def get_current_location(self):
        return _call("get_current_location")

    def get_all_rooms(self):
        return _locations

    def is_in_room(self, entity):
        if type(entity) is not str:
            raise TypeError("RobotCheckEntityError: entity must be a string")
        _trace_line("CheckEntity", entity)
        return _call("is_in_room", entity)

    def go_to(self, location):
        if type(location) is not str:
            raise TypeError("RobotGoToError: location must be a string")
        _trace_line("GoTo", location)
        _call("go_to", location, [room if type(room) is str else None for room in _locations])

    def ask(self, person, question, options):
        if type(person) is not str:
            raise TypeError("RobotAskError: person must be a string")
        if type(question) is not str:
            raise TypeError("RobotAskError: question must be a string")
        if type(options) is not list:
            raise TypeError("RobotAskError: options must be a list")
        _trace_line("Ask", question, options)
        return options[_call("ask", person, question, [str(option) for option in options])]

    def say(self, message):
        if type(message) is not str:
            raise TypeError("RobotSayError: message must be a string")
        _trace_line("Say", message)
        _call("say", message)

    def pick(self, obj):
        if type(obj) is not str:
            raise TypeError("RobotPickError: obj must be a string")
        _call("pick", obj)
        _trace_line("Pick", obj)

    def place(self, obj):
        if type(obj) is not str:
            raise TypeError("RobotPlaceError: obj must be a string")
        _call("place", obj, [room if type(room) is str else None for room in _locations])
        _trace_line("Place", obj)


robot = Robot()
if %(bind_functions)r:
    for _name in %(methods)r:
        globals()[_name] = getattr(robot, _name)
'''

ROBOT_FILENAME = "<roboeval-robot>"
PIPE_BUFFER_BYTES = 65536  # a Linux pipe's buffer: what a blocked writer may have written ahead of the reader
READ_BYTES_PER_TICK = 1024  # CodeBotler's harness reads stdout 1 KiB per 0.1 s while the program runs


def visible_stdout_bytes(timeout_s: float) -> int:
    """How much of a program's stdout CodeBotler's harness has read when it kills the program at the timeout."""
    return max(1, int(round(timeout_s * 10))) * READ_BYTES_PER_TICK


def candidate_code(program: str, semantics: Semantics, timeout_s: float) -> tuple[str, str, int]:
    """(code, call, line offset): what the sandbox runs for `program` (a full `def task_program()` program).

    The robot is compiled under its own file name, so errors and API calls
    report the program's lines (shifted by the returned offset: one line).
    """
    robot = ROBOT_SOURCE % {
        "bridge": BRIDGE,
        "print_trace": semantics.prints_end_trace,
        "block": semantics.prints_end_trace,
        "cap": PIPE_BUFFER_BYTES + visible_stdout_bytes(timeout_s),
        "cap_sleeps": not semantics.rewrite_names,
        "bind_functions": not semantics.rewrite_names,
        "methods": API_METHODS,
    }
    head = f"exec(compile({robot!r}, {ROBOT_FILENAME!r}, 'exec'), globals())\n"
    if semantics.rewrite_names:
        return head + rewrite_codebotler(program), "None", 1
    return head + program, "task_program()", 1
