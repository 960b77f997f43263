"""Real edit operators on real functions (densecode's function library), each with commit-message paraphrases.

An operator takes a rendered function and an rng and returns an `Edit` (before, after, the facts its messages name)
or None when it does not apply to that function. Every `after` parses (the generator checks). Levels: 1 = a local
change (docstring, type hints, rename), 2 = a change of behaviour or structure in one place (guard clause, default,
constant, function rename), 3 = a change that needs reading the logic (off-by-one fix, loop -> comprehension).
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from dataclasses import dataclass

from densecode.domains.testgen.library import Rendered

NEW_NAMES = ("total", "running", "tally", "found", "collected", "acc_value", "answer", "summary", "buffer", "kept")
ARG_TYPES = {"int": "int", "small_int": "int", "pos_int": "int", "score": "int", "int_list": "list[int]",
             "sorted_list": "list[int]", "word": "str", "palin": "str", "text": "str"}
SUMMARIES = {
    "count_above": "Count the items greater than a threshold", "sum_even": "Sum the even numbers",
    "scale_list": "Multiply every item by a factor", "filter_small": "Keep the items below a bound",
    "clamp": "Clamp a value into a range", "sign": "Return the sign of a number",
    "fizzbuzz": "Return the FizzBuzz label of a number", "grade": "Map a score to a letter grade",
    "max_of": "Return the largest item, or None when empty", "index_of": "Return the index of a value, or -1",
    "count_vowels": "Count the vowels in a string", "reverse_words": "Reverse the order of the words",
    "is_palindrome": "Tell whether a string reads the same backwards", "factorial": "Compute n factorial",
    "fib": "Return the n-th Fibonacci number", "word_lengths": "Map each word to its length",
    "char_freq": "Count how often each character occurs", "running_sum": "Return the running sums",
    "binary_search": "Find a value in a sorted list", "gcd": "Compute the greatest common divisor",
    "is_prime": "Tell whether a number is prime", "bubble_sort": "Return a sorted copy of a list",
    "dedupe": "Remove duplicates, keeping the first of each", "caesar": "Shift the letters of a text",
    "digit_sum": "Sum the decimal digits of a number", "pairs_sum": "Tell whether two items add up to a target",
    "bank_account": "A balance with deposits and withdrawals",
}


@dataclass(frozen=True)
class Edit:
    op: str
    level: int
    before: str
    after: str
    facts: dict  # names the message templates use


# op name -> (level, message paraphrases). The first is the plainest; all name the same facts.
MESSAGES: dict[str, tuple[int, tuple[str, ...]]] = {
    "rename_variable": (1, ("Rename {old} to {new} in {fn}", "Rename variable {old} to {new} in {fn}",
                            "Use the clearer name {new} instead of {old} in {fn}", "{fn}: rename {old} -> {new}")),
    "add_docstring": (1, ("Add docstring to {fn}", "Document {fn}", "Add a docstring explaining {fn}",
                          "{fn}: add docstring")),
    "add_type_hints": (1, ("Add type hints to {fn}", "Annotate the parameters of {fn}", "Add type annotations to {fn}",
                           "{fn}: add parameter type hints")),
    "add_guard": (2, ("Add guard clause for empty {arg} in {fn}", "Return early when {arg} is empty in {fn}",
                      "Handle empty {arg} in {fn}", "{fn}: guard against empty {arg}")),
    "change_default": (2, ("Change default {param} of {fn} from {old} to {new}", "Use {new} as the default {param} in {fn}",
                           "Set default {param} to {new} in {fn}", "{fn}: default {param} {old} -> {new}")),
    "extract_constant": (2, ("Extract {value} into constant {name}", "Replace magic number {value} with {name}",
                             "Introduce constant {name} for {value} in {fn}", "{fn}: name the constant {value} {name}")),
    "rename_function": (2, ("Rename {old} to {new}", "Rename function {old} to {new}", "Call {old} {new} instead",
                            "Rename {old}() to {new}()")),
    "fix_off_by_one": (3, ("Fix off-by-one error in {fn}", "Fix off-by-one in the {fn} comparison",
                           "Correct the boundary check in {fn}", "{fn}: fix off-by-one")),
    "loop_to_comprehension": (3, ("Replace loop with comprehension in {fn}", "Use a comprehension in {fn}",
                                  "Simplify {fn} with a comprehension", "{fn}: replace for loop with comprehension")),
}


def _rename_names(source: str, old: str, new: str) -> str:
    """`old` -> `new` on NAME tokens only (never inside strings or comments)."""
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    for tok in reversed(toks):  # right to left keeps earlier columns valid
        if tok.type == tokenize.NAME and tok.string == old:
            (row, col), (_, end) = tok.start, tok.end
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def _def_line(source: str) -> int:
    return next(i for i, ln in enumerate(source.split("\n")) if ln.startswith(("def ", "class ")))


def rename_variable(r: Rendered, rng: random.Random) -> Edit | None:
    old = r.params["acc"]
    if not re.search(rf"\b{old}\b", r.source) or r.template.args == ():
        return None
    names = {n.id for n in ast.walk(ast.parse(r.source)) if isinstance(n, ast.Name)} | {r.entry}
    new = rng.choice([n for n in NEW_NAMES if n not in names and n != old])
    return Edit("rename_variable", 1, r.source, _rename_names(r.source, old, new), {"old": old, "new": new})


def rename_function(r: Rendered, rng: random.Random) -> Edit | None:
    choices = [n for n in r.template.names if n != r.entry]
    if not choices:
        return None
    new = rng.choice(choices)
    return Edit("rename_function", 2, r.source, _rename_names(r.source, r.entry, new), {"old": r.entry, "new": new})


def add_docstring(r: Rendered, rng: random.Random) -> Edit | None:
    if r.template.args == ():
        return None
    lines = r.source.split("\n")
    i = _def_line(r.source)
    lines.insert(i + 1, f'    """{SUMMARIES.get(r.template.family, "Helper")}."""')
    return Edit("add_docstring", 1, r.source, "\n".join(lines), {})


def add_type_hints(r: Rendered, rng: random.Random) -> Edit | None:
    if not r.template.args:
        return None
    tree = ast.parse(r.source)
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef) or len(fn.args.args) < len(r.template.args):
        return None
    for arg, kind in zip(fn.args.args, r.template.args):
        arg.annotation = ast.Name(id=ARG_TYPES[kind])
    header = ast.unparse(fn).split("\n")[0]
    lines = r.source.split("\n")
    lines[_def_line(r.source)] = header
    return Edit("add_type_hints", 1, r.source, "\n".join(lines), {})


def add_guard(r: Rendered, rng: random.Random) -> Edit | None:
    if "guard" not in r.template.tags:
        return None
    arg = r.params["a"]
    empty = "[]" if re.search(rf"{re.escape(r.params['acc'])} = \[\]", r.source) else "0"
    lines = r.source.split("\n")
    i = _def_line(r.source)
    lines[i + 1:i + 1] = [f"    if not {arg}:", f"        return {empty}"]
    return Edit("add_guard", 2, r.source, "\n".join(lines), {"arg": arg})


def change_default(r: Rendered, rng: random.Random) -> Edit | None:
    if "default" not in r.template.tags:
        return None
    m = re.search(r"(\w+)=(-?\d+)", r.source.split("\n")[_def_line(r.source)])
    if not m:
        return None
    param, old = m.group(1), int(m.group(2))
    new = rng.choice([v for v in (old - 2, old - 1, old + 1, old + 2, old * 2) if v != old])
    after = r.source.replace(f"{param}={old}", f"{param}={new}", 1)
    return Edit("change_default", 2, r.source, after, {"param": param, "old": old, "new": new})


def extract_constant(r: Rendered, rng: random.Random) -> Edit | None:
    if "constant" not in r.template.tags:
        return None
    value = r.params["k"]
    name = {"fizzbuzz": "FIZZ_DIVISOR", "grade": "A_THRESHOLD"}.get(r.template.family, "LIMIT")
    pattern = re.compile(rf"(?<![\w.]){value}(?![\w.])")
    lines = r.source.split("\n")
    i = _def_line(r.source)
    body = [pattern.sub(name, ln) for ln in lines[i + 1:]]
    if body == lines[i + 1:]:
        return None
    after = "\n".join(lines[:i] + [f"{name} = {value}", "", ""] + [lines[i]] + body)
    return Edit("extract_constant", 2, r.source, after, {"value": value, "name": name})


_OFF_BY_ONE = ((" <= ", " < "), (" < ", " <= "), (" >= ", " > "), (" > ", " >= "), ("len({a}) - 1", "len({a})"),
               ("i + 1", "i"))


def fix_off_by_one(r: Rendered, rng: random.Random) -> Edit | None:
    """The `before` has the bug (a boundary moved by one), the `after` is the correct library function."""
    if "off_by_one" not in r.template.tags:
        return None
    lines = r.source.split("\n")
    start = _def_line(r.source) + 1
    for good, bad in _OFF_BY_ONE:
        good = good.format(a=r.params["a"])
        bad = bad.format(a=r.params["a"])
        for i in range(start, len(lines)):
            if good in lines[i]:
                buggy = lines[:i] + [lines[i].replace(good, bad, 1)] + lines[i + 1:]
                return Edit("fix_off_by_one", 3, "\n".join(buggy), r.source, {})
    return None


def loop_to_comprehension(r: Rendered, rng: random.Random) -> Edit | None:
    """`acc = []/0; for x in xs: [if c:] acc.append(e) / acc += e; return acc` -> one return with a comprehension."""
    tags = [t for t in r.template.tags if t.startswith("loop_to_comprehension")]
    if not tags:
        return None
    fn = ast.parse(r.source).body[0]
    if len(fn.body) != 3 or not isinstance(fn.body[1], ast.For):
        return None
    loop = fn.body[1]
    target, it = ast.unparse(loop.target), ast.unparse(loop.iter)
    inner = loop.body[0]
    cond = ""
    if isinstance(inner, ast.If):
        cond = f" if {ast.unparse(inner.test)}"
        inner = inner.body[0]
    if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call):  # acc.append(e)
        expr = f"[{ast.unparse(inner.value.args[0])} for {target} in {it}{cond}]"
    elif isinstance(inner, ast.AugAssign):  # acc += e
        value = ast.unparse(inner.value)
        expr = f"sum({value} for {target} in {it}{cond})"
    else:
        return None
    lines = r.source.split("\n")
    i = _def_line(r.source)
    after = "\n".join(lines[:i + 1] + [f"    return {expr}", ""])
    return Edit("loop_to_comprehension", 3, r.source, after, {})


OPERATORS = {
    "rename_variable": rename_variable, "add_docstring": add_docstring, "add_type_hints": add_type_hints,
    "add_guard": add_guard, "change_default": change_default, "extract_constant": extract_constant,
    "rename_function": rename_function, "fix_off_by_one": fix_off_by_one,
    "loop_to_comprehension": loop_to_comprehension,
}
