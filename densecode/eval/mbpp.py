"""MBPP and MBPP+ (EvalPlus): data loading, prompts, and the sandbox jobs that judge programs.

MBPP (original release, one JSON object per line: text, code, task_id,
test_setup_code, test_list, challenge_test_list) is judged by its own asserts.
Conventional splits by task_id: 1-10 prompt (few-shot), 11-510 test,
511-600 validation, 601-974 train.

MBPP+ (EvalPlus jsonl: task_id "Mbpp/N", prompt, entry_point,
canonical_solution, base_input, plus_input, atol) is judged as EvalPlus does:
call `entry_point` on every input and compare with the canonical solution's
output on the same input (computed in the sandbox, never in this process);
the MBPP "base" score uses `base_input`, the MBPP+ score `base_input +
plus_input`. Floats compare with `atol` (1e-6 when the task gives 0 and the
expected value is a float), and a handful of tasks use EvalPlus's special
oracles (set equality, "not None", alternative formulas), which run inside the
sandbox child as a wrapper around the candidate (see `_EVALPLUS_HARNESS`).
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from densecode.errors import DensecodeError
from densecode.eval.extract import parse_quietly

MBPP_SPLITS = {
    "prompt": range(1, 11),
    "test": range(11, 511),
    "validation": range(511, 601),
    "train": range(601, 975),
}
SPLIT_CHOICES = ("test", "validation", "train", "prompt", "all")

HUB_DATASETS = {
    "mbpp": ("google-research-datasets/mbpp", "full"),
    "mbppplus": ("evalplus/mbppplus_release v0.2.0", None),
}
# EvalPlus publishes MBPP+ (with base_input/plus_input) as a GitHub release, not on the
# dataset hub (the hub copy has another layout); sha256 of the .gz as published.
MBPPPLUS_URL = "https://github.com/evalplus/mbppplus_release/releases/download/v0.2.0/MbppPlus.jsonl.gz"
MBPPPLUS_GZ_SHA256 = "af43697e8791c4c149bdfd6b489d8b5412507551ac20e28a439f650b8225db63"

# Completion-style stop strings for a program that follows a docstring prompt
# (what the bigcode harness and EvalPlus use for base models).
COMPLETION_STOP = ["\nassert", '\n"""', "\nprint(", "\nif __name__", "\n```", "\n# Test", "\n<|"]
# Chat answers are pre-filled with an opened python block, so the block's end stops them.
CHAT_STOP = ["\n```"]

CHAT_INSTRUCTION = (
    "Please provide a self-contained Python script that solves the following problem in a markdown code block:\n"
    "```\n{problem}\n```"
)
# The tests call one function by name: the chat prompt states its signature (the model otherwise invents a name
# and every test fails with NameError). Shown after the problem, as EvalPlus's prompts end with the signature.
CHAT_SIGNATURE = "\nThe tests call this function, so define it with exactly this name and parameters:\n```python\n{signature}\n```"
CHAT_RESPONSE_PREFIX = (
    "Below is a Python script with a self-contained function that solves the problem and passes "
    "corresponding tests:\n```python\n"
)


@dataclass
class CodeTask:
    """One MBPP or MBPP+ problem, normalised."""

    task_id: str
    number: int
    text: str  # the natural-language statement
    problem: str  # docstring block: statement + one example assert (the EvalPlus prompt)
    entry_point: str
    canonical: str
    tests: list[str] = field(default_factory=list)  # MBPP asserts
    setup: str = ""  # MBPP test_setup_code
    base_input: list = field(default_factory=list)  # MBPP+ only
    plus_input: list = field(default_factory=list)
    atol: float = 0.0


# ------------------------------------------------------------------ loading


def _read_records(path: Path) -> list[dict]:
    """JSON lines, or one JSON array (sanitized-mbpp.json); errors name the file and line."""
    if not path.is_file():
        raise DensecodeError(f"benchmark data not found: {path} (pass --data with an existing file)")
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DensecodeError(f"{path}: not valid JSON: {exc}") from None
        return records
    from densecode.jsonl import read_jsonl

    return read_jsonl(path, what="records", hint="expected MBPP/MBPP+ JSON lines")


def _require(record: dict, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(record, dict):
        raise DensecodeError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise DensecodeError(
            f"{where}: missing field(s) {', '.join(missing)} — is this the right file for this benchmark?"
        )


def _called_names(asserts: list[str]) -> list[str]:
    names = []
    for line in asserts:
        try:
            tree = parse_quietly(line.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                names.append(node.func.id)
    return names


def _defined_names(code: str) -> list[str]:
    try:
        tree = parse_quietly(code)
    except SyntaxError:
        return re.findall(r"^def\s+(\w+)", code, flags=re.MULTILINE)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def _mbpp_entry_point(code: str, tests: list[str]) -> str:
    """The function the asserts call that the reference defines (first such), else the first called."""
    called = _called_names(tests)
    defined = set(_defined_names(code))
    for name in called:
        if name in defined:
            return name
    return called[0] if called else (next(iter(defined), "") if defined else "")


def docstring_problem(text: str, example_test: str) -> str:
    """The EvalPlus/MBPP+ problem block: statement and one example assert in a module docstring."""
    return f'"""\n{text.strip()}\n{example_test.strip()}\n"""\n'


def _split_ids(split: str) -> range | None:
    if split == "all":
        return None
    if split not in MBPP_SPLITS:
        raise DensecodeError(f"unknown MBPP split {split!r}; choose one of {', '.join(SPLIT_CHOICES)}")
    return MBPP_SPLITS[split]


def mbpp_task_from_record(record: dict, where: str) -> CodeTask:
    # The sanitized release names the statement "prompt" and the setup "test_imports".
    if "text" not in record and "prompt" in record:
        record = {**record, "text": record["prompt"], "test_setup_code": "\n".join(record.get("test_imports", []))}
    _require(record, ("task_id", "text", "code", "test_list"), where)
    tests = [t for t in record["test_list"] if isinstance(t, str) and t.strip()]
    if not tests:
        raise DensecodeError(f"{where}: task {record['task_id']} has an empty test_list")
    number = int(record["task_id"])
    return CodeTask(
        task_id=str(number),
        number=number,
        text=record["text"],
        problem=docstring_problem(record["text"], tests[0]),
        entry_point=_mbpp_entry_point(record["code"], tests),
        canonical=record["code"],
        tests=tests,
        setup=record.get("test_setup_code") or "",
    )


def _maybe_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def mbppplus_task_from_record(record: dict, where: str) -> CodeTask:
    _require(record, ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input"), where)
    task_id = str(record["task_id"])
    match = re.search(r"(\d+)$", task_id)
    if not match:
        raise DensecodeError(f"{where}: task_id {task_id!r} does not end in a number (expected 'Mbpp/N')")
    prompt = record["prompt"]
    text = prompt.strip().strip('"').strip()
    statement = "\n".join(line for line in text.splitlines() if not line.strip().startswith("assert"))
    return CodeTask(
        task_id=task_id,
        number=int(match.group(1)),
        text=statement.strip(),
        problem=prompt if prompt.endswith("\n") else prompt + "\n",
        entry_point=record["entry_point"],
        canonical=record["canonical_solution"],
        tests=[line.strip() for line in (record.get("assertion") or "").splitlines() if line.strip()],
        base_input=_maybe_json(record["base_input"]),
        plus_input=_maybe_json(record["plus_input"]) or [],
        atol=float(record.get("atol") or 0.0),
    )


def _hub_records(benchmark: str) -> list[dict]:
    """Download the benchmark from the dataset hub; a clear error when offline."""
    name, config = HUB_DATASETS[benchmark]
    hint = f"pass --data with a local copy of {benchmark} (e.g. ../shared/data/{'mbpp/mbpp.jsonl' if benchmark == 'mbpp' else 'mbppplus/MbppPlus-v0.2.0.derived.jsonl'})"
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise DensecodeError(f"no --data given and the dataset hub is disabled (HF_HUB_OFFLINE=1): {hint}")
    if benchmark == "mbppplus":
        return _evalplus_release_records(hint)
    try:
        import datasets
    except ImportError:
        raise DensecodeError(f"no --data given and the `datasets` package is not installed: {hint}") from None
    try:
        loaded = datasets.load_dataset(name, config) if config else datasets.load_dataset(name)
    except Exception as exc:  # network errors come in many types
        raise DensecodeError(f"could not download {name} from the dataset hub ({type(exc).__name__}: {exc}); {hint}") from None
    records: list[dict] = []
    for split in loaded.values():
        records.extend(dict(row) for row in split)
    return records


def _evalplus_release_records(hint: str) -> list[dict]:
    """MBPP+ v0.2.0 from EvalPlus's release, cached under ~/.cache/densecode/benchmarks/."""
    import gzip
    import hashlib
    import urllib.request

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "densecode" / "benchmarks"
    path = cache / "MbppPlus-v0.2.0.jsonl.gz"
    if not path.is_file():
        try:
            with urllib.request.urlopen(MBPPPLUS_URL, timeout=60) as response:
                blob = response.read()
        except OSError as exc:
            raise DensecodeError(f"could not download MBPP+ from {MBPPPLUS_URL} ({exc}); {hint}") from None
        digest = hashlib.sha256(blob).hexdigest()
        if digest != MBPPPLUS_GZ_SHA256:
            raise DensecodeError(f"MBPP+ download from {MBPPPLUS_URL} has sha256 {digest}, expected "
                                 f"{MBPPPLUS_GZ_SHA256}; {hint}")
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def load_tasks(benchmark: str, data: str | Path | None, split: str = "test") -> list[CodeTask]:
    """Tasks of `benchmark` ("mbpp" or "mbppplus") from `data` (or the hub when None).

    `split` selects MBPP task ids, for MBPP+ too (its tasks keep their MBPP ids): "all" is EvalPlus's whole set,
    while a model trained on MBPP's train split (601-974) is judged on "test" (224 of the 378 tasks), since 108
    MBPP+ tasks are train-split problems.
    """
    if benchmark not in HUB_DATASETS:
        raise DensecodeError(f"unknown code benchmark {benchmark!r}; choose mbpp or mbppplus")
    if data is None:
        records, source = _hub_records(benchmark), HUB_DATASETS[benchmark][0]
    else:
        path = Path(data)
        if path.is_dir():
            raise DensecodeError(f"--data {path} is a directory; pass the {benchmark} .jsonl file itself")
        records, source = _read_records(path), str(path)
    parse = mbpp_task_from_record if benchmark == "mbpp" else mbppplus_task_from_record
    tasks = [parse(r, f"{source} record {i + 1}") for i, r in enumerate(records)]
    tasks.sort(key=lambda t: t.number)
    ids = _split_ids(split)
    if ids is not None:
        tasks = [t for t in tasks if t.number in ids]
    if not tasks:
        raise DensecodeError(f"{source}: no {benchmark} tasks in split {split!r}")
    return tasks


# ------------------------------------------------------------------ prompts

# Invented few-shot examples (not MBPP problems), so few-shot prompting never
# leaks a test task and works for MBPP+ without the original file.
BUILTIN_SHOTS = [
    ("Write a function to return the sum of the squares of a list of numbers.",
     "assert sum_of_squares([1, 2, 3]) == 14",
     "def sum_of_squares(numbers):\n    return sum(x * x for x in numbers)\n"),
    ("Write a python function to count the vowels in a string.",
     "assert count_vowels('education') == 5",
     "def count_vowels(text):\n    return sum(1 for ch in text.lower() if ch in 'aeiou')\n"),
    ("Write a function to merge two dictionaries, the second one winning on shared keys.",
     "assert merge_dicts({'a': 1}, {'a': 2, 'b': 3}) == {'a': 2, 'b': 3}",
     "def merge_dicts(first, second):\n    merged = dict(first)\n    merged.update(second)\n    return merged\n"),
]


@dataclass
class Shot:
    problem: str
    solution: str


def few_shot_examples(k: int, pool: list[CodeTask] | None = None) -> list[Shot]:
    """k examples: MBPP's prompt split (tasks 2, 3, 4, ... as the MBPP paper does) when given, else built-ins."""
    if k <= 0:
        return []
    shots: list[Shot] = []
    for task in pool or []:
        if task.number in MBPP_SPLITS["prompt"] and task.number != 1:
            shots.append(Shot(task.problem, task.canonical.replace("\r\n", "\n").strip() + "\n"))
    shots += [Shot(docstring_problem(t, a), s) for t, a, s in BUILTIN_SHOTS]
    if k > len(shots):
        raise DensecodeError(f"--few-shot {k}: only {len(shots)} examples available")
    return shots[:k]


def completion_prompt(task: CodeTask, shots: list[Shot]) -> str:
    """Plain-completion prompt for base models: examples, then the problem docstring; the model writes the code."""
    parts = [f"{shot.problem}{shot.solution}\n\n" for shot in shots]
    return "".join(parts) + task.problem


def function_signature(code: str, name: str) -> str:
    """`def name(params):` of the top-level function `name` in `code` (a reference solution); "" when absent."""
    try:
        tree = parse_quietly(code)
    except SyntaxError:
        match = re.search(rf"^def\s+{re.escape(name)}\s*\(.*?\)\s*(->[^:]*)?:", code, flags=re.MULTILINE)
        return match.group(0) if match else ""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            return f"def {name}({ast.unparse(node.args)}){returns}:"
    return ""


def chat_user_message(problem: str, solution: str, entry_point: str) -> str:
    """The user turn of one problem: the statement block, then the signature the tests call (when known)."""
    text = CHAT_INSTRUCTION.format(problem=problem.strip())
    signature = function_signature(solution, entry_point) if entry_point else ""
    return text + CHAT_SIGNATURE.format(signature=signature) if signature else text


def chat_messages(task: CodeTask, shots: list[Shot]) -> list[dict]:
    messages: list[dict] = []
    for shot in shots:
        names = _defined_names(shot.solution)
        messages.append({"role": "user", "content": chat_user_message(shot.problem, shot.solution,
                                                                      names[0] if names else "")})
        messages.append({"role": "assistant", "content": CHAT_RESPONSE_PREFIX + shot.solution + "```"})
    messages.append({"role": "user", "content": chat_user_message(task.problem, task.canonical, task.entry_point)})
    return messages


def chat_prompt(task: CodeTask, shots: list[Shot], tokenizer) -> str:
    """Chat-template prompt, pre-filled with an opened python block (EvalPlus's instruct setting)."""
    from densecode.prompts import chat_prompt as templated

    return templated(tokenizer, chat_messages(task, shots)) + CHAT_RESPONSE_PREFIX


def program_from_completion(task: CodeTask, completion: str, style: str) -> str:
    """The code to judge: extract and sanitise, the way EvalPlus does for either prompt style."""
    from densecode.eval.extract import extract_code, sanitize

    if style == "chat":
        return extract_code(CHAT_RESPONSE_PREFIX + completion, task.entry_point)
    # Completion: the docstring problem is harmless module text; sanitise drops it with any trailing demo code.
    return sanitize(task.problem + completion, task.entry_point)


# ------------------------------------------------------------------ EvalPlus input types
# MBPP+ stores inputs as JSON, so tuples, sets and complex numbers arrive as
# lists or strings. EvalPlus converts them back per task before calling; these
# tables say which task takes which shape (the task numbers are EvalPlus's).


def _as_tuple(x):
    return tuple(x)


def _deep_tuple(x):
    return tuple(_deep_tuple(i) for i in x) if isinstance(x, list) else x


_EACH_ARG_TUPLE = {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726,
                   740, 744, 809}
_EACH_ARG_LIST_OF_TUPLES = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}
_FIRST_ARG_LIST_OF_TUPLES = {75, 413, 444, 753}
_SECOND_ARG_TUPLE = {106, 750}
_FIRST_ARG_TUPLE = {250, 405, 446, 617, 720, 763, 808}
_EACH_ARG_TUPLE_OF_TUPLES = {259, 401, 445}
_ALL_ARGS_DEEP_TUPLE = {580, 615, 791}


def _convert_args(number: int, args: list) -> list:
    """One input (argument list) of MBPP+ task `number`, with EvalPlus's types restored."""
    if number in _EACH_ARG_TUPLE:
        return [_as_tuple(a) for a in args]
    if number in _EACH_ARG_LIST_OF_TUPLES:
        return [[_as_tuple(x) for x in a] for a in args]
    if number in _FIRST_ARG_LIST_OF_TUPLES:
        return [[_as_tuple(x) for x in args[0]], *args[1:]]
    if number in _SECOND_ARG_TUPLE:
        return [args[0], _as_tuple(args[1]), *args[2:]]
    if number in _FIRST_ARG_TUPLE or number == 307:
        return [_as_tuple(args[0]), *args[1:]]
    if number in _EACH_ARG_TUPLE_OF_TUPLES:
        return [tuple(_as_tuple(x) for x in a) for a in args]
    if number == 115:
        # EvalPlus quirk kept on purpose: an empty list becomes {} (a dict), not set().
        return [[set(x) if isinstance(x, list) and x else {} for x in args[0]]]
    if number == 124:
        return [float(args[0]), complex(args[1])]
    if number == 252:
        return [complex(args[0])]
    if number == 278:
        return [tuple(_as_tuple(x) if isinstance(x, list) else x for x in args[0])]
    if number == 722:
        return [{k: _as_tuple(v) for k, v in args[0].items()}, *args[1:]]
    if number in _ALL_ARGS_DEEP_TUPLE:
        return list(_deep_tuple(args))
    return args


def evalplus_inputs(task: CodeTask) -> tuple[list, int]:
    """(base + plus inputs with types restored, number of base inputs)."""
    inputs = [_convert_args(task.number, list(args)) for args in task.base_input + task.plus_input]
    return inputs, len(task.base_input)


# ------------------------------------------------------------------ EvalPlus special oracles
# A few MBPP+ tasks are not judged by plain equality. The sandbox compares
# plain outputs in the parent, so these run as a thin wrapper in the child that
# maps the candidate's and the reference's outputs to a form where equality is
# the EvalPlus rule. The wrapper is appended after the code, so error lines in
# the candidate are unchanged.

ENTRY_WRAPPER = "__densecode_entry__"
# Output compared as a set (order and duplicates do not matter).
SET_EQ_TASKS = {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum",
                "intersection_array", "find_dissimilar", "Diff"}
# Output compared only as "is not None" (regex match objects in the reference), a bool compares as itself.
NOT_NONE_TASKS = {"check_str", "text_match_three", "text_starta_endb"}
# An alternative correct formula is also accepted: name -> source of `_alt(*args)`.
ALT_ORACLE_TASKS = {
    # Mbpp/581: "height" read as the perpendicular height of the pyramid.
    "surface_Area": (
        "def _alt(base_edge, height):\n"
        "    import math\n"
        "    slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)\n"
        "    return round(base_edge ** 2 + 4 * (base_edge * slant) / 2)\n"
    ),
    # Mbpp/558: digits compared after zero-padding to the same length.
    "digit_distance_nums": (
        "def _alt(num1, num2):\n"
        "    a, b = str(num1), str(num2)\n"
        "    width = max(len(a), len(b))\n"
        "    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(width), b.zfill(width)))\n"
    ),
}


def _set_eq_wrapper(entry: str) -> str:
    return (f"\n\ndef {ENTRY_WRAPPER}(*args):\n"
            f"    return frozenset({entry}(*args))\n")


def _not_none_wrapper(entry: str, reference: bool) -> str:
    if reference:
        return f"\n\ndef {ENTRY_WRAPPER}(*args):\n    return {entry}(*args) is not None\n"
    return (f"\n\ndef {ENTRY_WRAPPER}(*args):\n"
            f"    out = {entry}(*args)\n"
            f"    return out if isinstance(out, bool) else out is not None\n")


def _alt_wrapper(entry: str, canonical: str, alt_src: str, atol: float) -> str:
    # The candidate's output counts as the reference's when it matches the alternative formula;
    # the reference runs in its own namespace here only to supply that value (the verdict's
    # expected outputs still come from the separate reference run).
    return (
        "\n\ndef " + ENTRY_WRAPPER + "(*args):\n"
        "    import copy as _copy\n"
        "    ns = {}\n"
        f"    exec({canonical!r}, ns)\n"
        f"    exec({alt_src!r}, ns)\n"
        f"    out = {entry}(*_copy.deepcopy(args))\n"
        f"    exp = ns[{entry!r}](*_copy.deepcopy(args))\n"
        "    if out == exp:\n"
        "        return out\n"
        "    try:\n"
        f"        if abs(out - ns['_alt'](*_copy.deepcopy(args))) <= {max(atol, 0.0)!r}:\n"
        "            return exp\n"
        "    except Exception:\n"
        "        pass\n"
        "    return out\n"
    )


# Long list/tuple outputs are compared by a digest computed in the child: Mbpp/255's
# reference returns up to 1.66 M tuples for one input (240 MB of JSON over its inputs),
# far past what crosses the sandbox boundary (16 MB of records per program). Exact
# equality is kept: same type, length and element reprs in order (an integral float
# element hashes like the int, as 2.0 == 2). Float lists are left alone: they compare
# with atol, as EvalPlus does.
DIGEST_MIN_LEN = 1000

_DIGEST_HELPER = (
    "\n\ndef __densecode_digest__(out):\n"
    f"    if type(out) in (list, tuple) and len(out) > {DIGEST_MIN_LEN} and not all(type(x) is float for x in out):\n"
    "        import hashlib\n"
    "        h = hashlib.sha256()\n"
    "        for x in out:\n"
    "            if type(x) is float and x.is_integer() and abs(x) < 2 ** 53:\n"
    "                x = int(x)\n"
    "            h.update(repr(x).encode('utf-8', 'surrogatepass'))\n"
    "            h.update(b'\\x00')\n"
    "        return ('__densecode_digest__', type(out).__name__, len(out), h.hexdigest())\n"
    "    return out\n"
)


def _plain_wrapper(entry: str) -> str:
    return _DIGEST_HELPER + f"\n\ndef {ENTRY_WRAPPER}(*args):\n    return __densecode_digest__({entry}(*args))\n"


def evalplus_job_code(task: CodeTask, code: str, reference: bool) -> tuple[str, str]:
    """(code, entry point to call) for a candidate or the reference, with any special oracle."""
    entry = task.entry_point
    if entry in SET_EQ_TASKS:
        return code + _set_eq_wrapper(entry), ENTRY_WRAPPER
    if entry in NOT_NONE_TASKS:
        return code + _not_none_wrapper(entry, reference), ENTRY_WRAPPER
    if entry in ALT_ORACLE_TASKS and not reference:
        return code + _alt_wrapper(entry, task.canonical, ALT_ORACLE_TASKS[entry], task.atol), ENTRY_WRAPPER
    return code + _plain_wrapper(entry), ENTRY_WRAPPER


# ------------------------------------------------------------------ judging


def mbpp_job(task: CodeTask, program: str, timeout_s: float | None):
    """The candidate, then the task's setup code (it uses the candidate's definitions), then the asserts."""
    from densecode.sandbox import AssertJob
    from densecode.sandbox.asserts import program_with_setup

    return AssertJob(code=program_with_setup(program, task.setup), tests=task.tests, timeout_s=timeout_s)


def mbppplus_job(task: CodeTask, program: str, timeout_s: float | None):
    from densecode.sandbox import FunctionCallJob

    inputs, _ = evalplus_inputs(task)
    code, entry = evalplus_job_code(task, program, reference=False)
    reference, ref_entry = evalplus_job_code(task, task.canonical, reference=True)
    assert entry == ref_entry
    return FunctionCallJob(code=code, entry_point=entry, inputs=inputs, reference=reference, atol=task.atol,
                           timeout_s=timeout_s)


def _error_text(result) -> str | None:
    if result.passed:
        return None
    if result.exc_type:
        where = f" (line {result.error_line})" if result.error_line else ""
        return f"{result.exc_type}: {result.exc_message}{where}"[:500]
    if result.outcome == "wrong_answer":
        failed = [i for i, ok in enumerate(result.per_test) if not ok]
        return f"wrong answer on test {failed[0] + 1} of {result.n_tests}" if failed else "no test ran"
    info = result.details.get("setup_error") or result.details.get("message")
    return f"{result.outcome}{': ' + str(info) if info else ''}"


def verdict_record(benchmark: str, task: CodeTask, result) -> dict:
    """The judged sample as plain data for results.json."""
    record = {
        "verdict": "pass" if result.passed else "fail",
        "outcome": result.outcome,
        "error": _error_text(result),
        "n_passed": result.n_passed,
        "n_tests": result.n_tests,
        "duration_s": round(result.duration_s, 3),
    }
    if benchmark == "mbppplus":
        n_base = len(task.base_input)
        n_all = n_base + len(task.plus_input)
        per_test = list(result.per_test) + [False] * max(0, n_all - len(result.per_test))
        record["base_verdict"] = "pass" if per_test[:n_base] and all(per_test[:n_base]) else "fail"
        record["plus_verdict"] = "pass" if per_test and all(per_test[:n_all]) else "fail"
        record["verdict"] = record["plus_verdict"]
        if result.details.get("reference_errors"):
            record["reference_errors"] = len(result.details["reference_errors"])
    return record
