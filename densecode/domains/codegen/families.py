"""The codegen task families: one small, parameterised function (or class) each.

A family knows how to draw its parameters, its names (entry point, argument names), how to describe the function in
words, the reference body (source text, run only in the sandbox), a Python oracle that computes the expected value of a
call (trusted code of this module: the asserts' expected values come from it), and how to draw inputs.
The reference text and the oracle are two independent implementations: tests/domains/test_codegen.py runs every reference in
the sandbox against the oracle's asserts, so a wrong template or a wrong oracle shows up as a failing canonical answer.

A `Spec` is one concrete function: family + parameters + names. Its `key` (what the split hash reads) is the function's
identity, so every task of one function -- whatever its test inputs -- lands in the same split.
"""

from __future__ import annotations

import operator
import random
import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

CATEGORIES = ("strings", "lists", "dicts", "arithmetic", "loops", "conditionals", "recursion", "sorting", "classes")


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    level: int  # 1 easy - 3 hard
    entries: tuple[str, ...]  # entry-point names to choose from
    arg_names: tuple[tuple[str, ...], ...]  # per argument: names to choose from
    params: Callable[[random.Random], dict]
    describe: Callable[[dict], str]  # {a}, {b} in the text are the argument names
    body: Callable[[dict], str]  # reference body; {a}, {b} are argument names, other braces doubled
    oracle: Callable[..., Any]  # oracle(params, *args) -> expected value
    inputs: Callable[[random.Random, dict], tuple]
    kind: str = "function"  # "function" or "class"
    # class families: the constructor's arguments are fixed by the params; `ops` draws method calls
    methods: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Spec:
    family: Family
    params: tuple  # sorted (name, value) pairs
    entry: str
    args: tuple[str, ...]

    @property
    def p(self) -> dict:
        return dict(self.params)

    @property
    def key(self) -> str:
        return f"{self.family.name}|{self.params!r}|{self.entry}|{','.join(self.args)}"

    def names(self) -> dict:
        return {k: v for k, v in zip("abc", self.args)}

    def description(self) -> str:
        return self.family.describe(self.p).format(**self.names())

    def body(self) -> str:
        return self.family.body(self.p).format(entry=self.entry, **self.names())

    def call(self, *args) -> Any:
        return self.family.oracle(self.p, *args)


def _words(rng: random.Random, n: int, lo: int = 1, hi: int = 7) -> list[str]:
    return ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def _ints(rng: random.Random, n: int, lo: int = -20, hi: int = 50) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _text(rng: random.Random, n_words: int) -> str:
    pool = ["Hello", "world", "Data", "code", "python", "Level", "noon", "apple", "Sky", "tree", "42", "x7", "a1b2"]
    return " ".join(rng.choice(pool) for _ in range(n_words))


# ------------------------------------------------------------------------------------------------ strings

CHAR_CLASSES = {
    "vowels": ("vowels (a, e, i, o, u, either case)", "ch.lower() in 'aeiou'", lambda c: c.lower() in "aeiou"),
    "digits": ("digits", "ch.isdigit()", str.isdigit),
    "uppercase": ("uppercase letters", "ch.isupper()", str.isupper),
    "spaces": ("space characters", "ch == ' '", lambda c: c == " "),
    "consonants": (
        "consonants (letters other than a, e, i, o, u, either case)",
        "ch.isalpha() and ch.lower() not in 'aeiou'",
        lambda c: c.isalpha() and c.lower() not in "aeiou",
    ),
}

COUNT_CHARS = Family(
    "count_chars",
    "strings",
    1,
    ("count_matching", "tally_chars", "count_kind", "count_class", "how_many", "char_count"),
    (("s", "text", "word", "phrase", "line"),),
    params=lambda r: {"cls": r.choice(sorted(CHAR_CLASSES))},
    describe=lambda p: f"Return how many characters of the string {{a}} are {CHAR_CLASSES[p['cls']][0]}.",
    body=lambda p: f"    return sum(1 for ch in {{a}} if {CHAR_CLASSES[p['cls']][1]})\n",
    oracle=lambda p, s: sum(1 for c in s if CHAR_CLASSES[p["cls"]][2](c)),
    inputs=lambda r, p: (_text(r, r.randint(1, 4)),),
)

REVERSE_WORDS = Family(
    "reverse_words",
    "strings",
    1,
    ("reverse_words", "flip_words", "mirror_words", "reverse_order", "swap_words", "word_flip"),
    (("s", "sentence", "text", "phrase", "line"),),
    params=lambda r: {"mode": r.choice(["order", "each"]), "sep": r.choice([" ", "-", "_"])},
    describe=lambda p: (
        "Split the string {a} on single spaces, "
        + ("reverse the order of the words" if p["mode"] == "order" else "reverse the letters of each word")
        + f" and join them with {p['sep']!r}."
    ),
    body=lambda p: (
        "    words = {a}.split(' ')\n"
        + ("    words = words[::-1]\n" if p["mode"] == "order" else "    words = [w[::-1] for w in words]\n")
        + f"    return {p['sep']!r}.join(words)\n"
    ),
    oracle=lambda p, s: p["sep"].join(s.split(" ")[::-1] if p["mode"] == "order" else [w[::-1] for w in s.split(" ")]),
    inputs=lambda r, p: (" ".join(_words(r, r.randint(1, 5))),),
)


def _caesar(k: int, s: str) -> str:
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in s)


CAESAR = Family(
    "caesar",
    "strings",
    2,
    ("caesar", "shift_letters", "rotate_letters", "encrypt", "shift_text", "caesar_cipher"),
    (("s", "message", "text", "plain", "line"),),
    params=lambda r: {"k": r.randint(1, 25)},
    describe=lambda p: (
        f"Shift every lowercase letter of {{a}} {p['k']} places forward in the alphabet, wrapping "
        "from 'z' to 'a'; leave every other character unchanged. Return the new string."
    ),
    body=lambda p: (
        "    out = []\n    for ch in {a}:\n        if 'a' <= ch <= 'z':\n"
        f"            out.append(chr((ord(ch) - 97 + {p['k']}) % 26 + 97))\n"
        "        else:\n            out.append(ch)\n    return ''.join(out)\n"
    ),
    oracle=lambda p, s: _caesar(p["k"], s),
    inputs=lambda r, p: (" ".join(_words(r, r.randint(1, 3))) + r.choice(["", "!", " 9"]),),
)

EXTREME_WORD = Family(
    "extreme_word",
    "strings",
    1,
    ("pick_word", "extreme_word", "select_word", "choose_word", "word_by_length", "find_word"),
    (("s", "sentence", "text", "line", "phrase"),),
    params=lambda r: {"which": r.choice(["longest", "shortest"]), "sep": r.choice([" ", ",", ";"])},
    describe=lambda p: (
        f"Return the {p['which']} word of the string {{a}}, where words are separated by {p['sep']!r} "
        "(skip empty words); on a tie, the first such word. With no word, return ''."
    ),
    body=lambda p: (
        f"    best = ''\n    for w in {{a}}.split({p['sep']!r}):\n"
        f"        if w and (best == '' or len(w) {'>' if p['which'] == 'longest' else '<'} len(best)):\n"
        "            best = w\n    return best\n"
    ),
    oracle=lambda p, s: (max if p["which"] == "longest" else min)(
        [w for w in s.split(p["sep"]) if w], key=len, default=""
    ),
    inputs=lambda r, p: (p["sep"].join(_words(r, r.randint(0, 6))),),
)

RUN_LENGTH = Family(
    "run_length",
    "strings",
    2,
    ("run_length", "compress", "encode_runs", "rle", "pack_runs", "squeeze"),
    (("s", "text", "word", "line", "chars"),),
    params=lambda r: {"count_first": r.choice([False, True]), "sep": r.choice(["", "-", " "])},
    describe=lambda p: (
        "Run-length encode the string {a}: each maximal run of one character becomes "
        + (
            "the run's length followed by the character"
            if p["count_first"]
            else "the character followed by the run's length"
        )
        + f", the runs' codes joined by {p['sep']!r} (e.g. 'aab' -> "
        + repr(p["sep"].join(["2a", "1b"] if p["count_first"] else ["a2", "b1"]))
        + "). Return the encoding."
    ),
    body=lambda p: (
        "    parts = []\n    i = 0\n    while i < len({a}):\n        j = i\n"
        "        while j < len({a}) and {a}[j] == {a}[i]:\n            j += 1\n"
        + (
            "        parts.append(str(j - i) + {a}[i])\n"
            if p["count_first"]
            else "        parts.append({a}[i] + str(j - i))\n"
        )
        + f"        i = j\n    return {p['sep']!r}.join(parts)\n"
    ),
    oracle=lambda p, s: p["sep"].join((f"{len(g)}{g[0]}" if p["count_first"] else f"{g[0]}{len(g)}") for g in _runs(s)),
    inputs=lambda r, p: ("".join(r.choice("aab") * r.randint(1, 3) for _ in range(r.randint(0, 5))),),
)


def _runs(s: str) -> list[str]:
    out: list[str] = []
    for c in s:
        if out and out[-1][0] == c:
            out[-1] += c
        else:
            out.append(c)
    return out


# ------------------------------------------------------------------------------------------------ lists

OPS = {">": "greater than", "<": "less than", ">=": "at least", "<=": "at most"}
COMPARE = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}

FILTER_THRESHOLD = Family(
    "filter_threshold",
    "lists",
    1,
    ("keep_some", "filter_values", "select_numbers"),
    (("nums", "values", "xs"),),
    params=lambda r: {"op": r.choice(sorted(OPS)), "k": r.randint(-5, 25)},
    describe=lambda p: (
        f"Return a list of the numbers in {{a}} that are {OPS[p['op']]} {p['k']}, in their original order."
    ),
    body=lambda p: f"    return [x for x in {{a}} if x {p['op']} {p['k']}]\n",
    oracle=lambda p, xs: [x for x in xs if COMPARE[p["op"]](x, p["k"])],
    inputs=lambda r, p: (_ints(r, r.randint(0, 8)),),
)

RUNNING = Family(
    "running",
    "lists",
    1,
    ("running", "prefix_scan", "accumulate", "scan", "running_total", "cumulative"),
    (("nums", "values", "xs", "items", "numbers"),),
    params=lambda r: {"op": r.choice(["sum", "max", "min", "product"])},
    describe=lambda p: f"Return the list whose i-th item is the {p['op']} of the first i + 1 numbers of {{a}}.",
    body=lambda p: (
        "    out = []\n    for x in {a}:\n"
        + {
            "sum": "        out.append(x if not out else out[-1] + x)\n",
            "max": "        out.append(x if not out else max(out[-1], x))\n",
            "min": "        out.append(x if not out else min(out[-1], x))\n",
            "product": "        out.append(x if not out else out[-1] * x)\n",
        }[p["op"]]
        + "    return out\n"
    ),
    oracle=lambda p, xs: _scan(p["op"], xs),
    inputs=lambda r, p: (_ints(r, r.randint(0, 7), -5, 9),),
)


def _scan(op: str, xs: list) -> list:
    f = {"sum": lambda a, b: a + b, "max": max, "min": min, "product": lambda a, b: a * b}[op]
    out: list = []
    for x in xs:
        out.append(x if not out else f(out[-1], x))
    return out


CHUNKS = Family(
    "chunks",
    "lists",
    2,
    ("chunks", "split_into", "batch", "chunk", "group_into", "partition"),
    (("items", "xs", "values", "seq", "data"),),
    params=lambda r: {"k": r.randint(2, 6), "drop": r.choice([False, True])},
    describe=lambda p: (
        f"Split the list {{a}} into consecutive chunks of {p['k']} items and return the list of chunks"
        + ("; drop a last chunk that is shorter." if p["drop"] else "; the last chunk may be shorter.")
    ),
    body=lambda p: (
        f"    out = [{{a}}[i:i + {p['k']}] for i in range(0, len({{a}}), {p['k']})]\n"
        + (f"    return [c for c in out if len(c) == {p['k']}]\n" if p["drop"] else "    return out\n")
    ),
    oracle=lambda p, xs: [
        c for c in (xs[i : i + p["k"]] for i in range(0, len(xs), p["k"])) if not p["drop"] or len(c) == p["k"]
    ],
    inputs=lambda r, p: (_ints(r, r.randint(0, 11), 0, 9),),
)

ROTATE = Family(
    "rotate",
    "lists",
    1,
    ("rotate", "shift_list", "cycle"),
    (("items", "xs", "seq"),),
    params=lambda r: {"k": r.randint(1, 9), "left": r.choice([True, False])},
    describe=lambda p: (
        f"Return a new list: {{a}} rotated {p['k']} places to the {'left' if p['left'] else 'right'} "
        "(the rotation wraps around; an empty list stays empty)."
    ),
    body=lambda p: (
        "    if not {a}:\n        return []\n"
        + f"    k = {p['k']} % len({{a}})\n"
        + ("    return {a}[k:] + {a}[:k]\n" if p["left"] else "    return {a}[len({a}) - k:] + {a}[:len({a}) - k]\n")
    ),
    oracle=lambda p, xs: (
        []
        if not xs
        else (
            xs[p["k"] % len(xs) :] + xs[: p["k"] % len(xs)]
            if p["left"]
            else xs[len(xs) - p["k"] % len(xs) :] + xs[: len(xs) - p["k"] % len(xs)]
        )
    ),
    inputs=lambda r, p: (_ints(r, r.randint(0, 7), 0, 20),),
)

DEDUPE = Family(
    "dedupe",
    "lists",
    1,
    ("dedupe", "unique_items", "distinct", "remove_repeats", "drop_duplicates", "unique_values"),
    (("items", "xs", "values", "seq", "data"),),
    params=lambda r: {"keep": r.choice(["first", "last"]), "ret": r.choice(["list", "tuple"])},
    describe=lambda p: (
        f"Return, as a {p['ret']}, the items of {{a}} without repeats, keeping only the {p['keep']} "
        "occurrence of each, in the order those occurrences appear."
    ),
    body=lambda p: (
        "    seen = set()\n    out = []\n"
        + ("    for x in {a}:\n" if p["keep"] == "first" else "    for x in reversed({a}):\n")
        + "        if x not in seen:\n            seen.add(x)\n            out.append(x)\n"
        + (f"    return {p['ret']}(out)\n" if p["keep"] == "first" else f"    return {p['ret']}(out[::-1])\n")
    ),
    oracle=lambda p, xs: (list if p["ret"] == "list" else tuple)(
        list(dict.fromkeys(xs)) if p["keep"] == "first" else list(dict.fromkeys(xs[::-1]))[::-1]
    ),
    inputs=lambda r, p: (_ints(r, r.randint(0, 9), 0, 5),),
)

# ------------------------------------------------------------------------------------------------ dicts

FREQUENCY = Family(
    "frequency",
    "dicts",
    2,
    ("frequency", "count_items", "histogram", "counts_of", "tally", "occurrences"),
    (("s", "text", "line", "sentence", "words"),),
    params=lambda r: {"unit": r.choice(["letter", "word"]), "min_count": r.randint(1, 3)},
    describe=lambda p: (
        f"Count each {p['unit']} of the string {{a}} "
        + ("(letters only, lowercased)" if p["unit"] == "letter" else "(words are separated by spaces)")
        + f" and return a dict from each {p['unit']} that occurs at least {p['min_count']} times to its count."
    ),
    body=lambda p: (
        "    counts = {{}}\n"
        + (
            "    for x in {a}.lower():\n        if not x.isalpha():\n            continue\n"
            if p["unit"] == "letter"
            else "    for x in {a}.split():\n"
        )
        + "        counts[x] = counts.get(x, 0) + 1\n"
        + f"    return {{{{k: v for k, v in counts.items() if v >= {p['min_count']}}}}}\n"
    ),
    oracle=lambda p, s: {
        k: v
        for k, v in Counter([c for c in s.lower() if c.isalpha()] if p["unit"] == "letter" else s.split()).items()
        if v >= p["min_count"]
    },
    inputs=lambda r, p: (_text(r, r.randint(1, 6)).replace("Hello", "hello hello"),),
)

GROUP_BY = Family(
    "group_by",
    "dicts",
    2,
    ("group_words", "bucket", "group_by_key", "group_strings", "buckets", "index_words"),
    (("words", "items", "strings", "names", "seq"),),
    params=lambda r: {"by": r.choice(["length", "first letter", "last letter"])},
    describe=lambda p: (
        f"Group the strings of the list {{a}} by their {p['by']}: return a dict from each {p['by']} to "
        "the list of strings that have it, in their original order."
    ),
    body=lambda p: (
        "    groups = {{}}\n    for w in {a}:\n"
        + f"        key = {({'length': 'len(w)', 'first letter': 'w[0]', 'last letter': 'w[-1]'})[p['by']]}\n"
        + "        groups.setdefault(key, []).append(w)\n    return groups\n"
    ),
    oracle=lambda p, ws: _group(
        ws, {"length": len, "first letter": lambda w: w[0], "last letter": lambda w: w[-1]}[p["by"]]
    ),
    inputs=lambda r, p: (_words(r, r.randint(0, 6), 1, 4),),
)


def _group(ws: list, key: Callable) -> dict:
    out: dict = {}
    for w in ws:
        out.setdefault(key(w), []).append(w)
    return out


INVERT = Family(
    "invert",
    "dicts",
    2,
    ("invert", "swap_pairs", "reverse_mapping", "inverse", "flip_dict", "by_value"),
    (("d", "mapping", "table", "pairs", "src"),),
    params=lambda r: {"clash": r.choice(["largest", "smallest", "list"])},
    describe=lambda p: (
        "Invert the dict {a} (string keys, integer values): return a dict from each value to "
        + (
            "the sorted list of keys that map to it."
            if p["clash"] == "list"
            else f"the {p['clash']} key (in string order) that maps to it."
        )
    ),
    body=lambda p: (
        "    out = {{}}\n    for k in sorted({a}):\n        v = {a}[k]\n"
        + {
            "list": "        out.setdefault(v, []).append(k)\n",
            "largest": "        out[v] = k\n",
            "smallest": "        if v not in out:\n            out[v] = k\n",
        }[p["clash"]]
        + "    return out\n"
    ),
    oracle=lambda p, d: _invert(p["clash"], d),
    inputs=lambda r, p: ({w: r.randint(0, 3) for w in _words(r, r.randint(0, 5), 1, 3)},),
)


def _invert(clash: str, d: dict) -> dict:
    out: dict = {}
    for k in sorted(d):
        if clash == "list":
            out.setdefault(d[k], []).append(k)
        elif clash == "largest" or d[k] not in out:
            out[d[k]] = k
    return out


TOP_K = Family(
    "top_k",
    "dicts",
    2,
    ("top_k", "most_common", "frequent_items", "top_values", "commonest", "leaders"),
    (("items", "xs", "values", "nums", "data"),),
    params=lambda r: {"k": r.randint(1, 4)},
    describe=lambda p: (
        f"Return the {p['k']} most frequent values of the list {{a}} (fewer if there are fewer distinct "
        "values), most frequent first; ties go to the smaller value first."
    ),
    body=lambda p: (
        "    counts = {{}}\n    for x in {a}:\n        counts[x] = counts.get(x, 0) + 1\n"
        f"    return sorted(counts, key=lambda x: (-counts[x], x))[:{p['k']}]\n"
    ),
    oracle=lambda p, xs: sorted(Counter(xs), key=lambda x: (-Counter(xs)[x], x))[: p["k"]],
    inputs=lambda r, p: (_ints(r, r.randint(0, 10), 0, 6),),
)

# ------------------------------------------------------------------------------------------------ arithmetic

DIGITS = Family(
    "digits",
    "arithmetic",
    1,
    ("digit_stat", "digits_of", "reduce_digits", "digit_summary", "fold_digits", "digit_op"),
    (("n", "number", "value", "num", "x"),),
    params=lambda r: {"op": r.choice(["sum", "product", "count", "max"])},
    describe=lambda p: f"Return the {p['op']} of the decimal digits of the integer {{a}} (ignore its sign).",
    body=lambda p: (
        "    ds = [int(c) for c in str(abs({a}))]\n"
        + {
            "sum": "    return sum(ds)\n",
            "count": "    return len(ds)\n",
            "max": "    return max(ds)\n",
            "product": "    out = 1\n    for d in ds:\n        out *= d\n    return out\n",
        }[p["op"]]
    ),
    oracle=lambda p, n: _digit_op(p["op"], [int(c) for c in str(abs(n))]),
    inputs=lambda r, p: (r.randint(-99999, 999999),),
)


def _digit_op(op: str, ds: list[int]) -> int:
    if op == "product":
        out = 1
        for d in ds:
            out *= d
        return out
    return {"sum": sum, "count": len, "max": max}[op](ds)


POLYNOMIAL = Family(
    "polynomial",
    "arithmetic",
    1,
    ("poly", "evaluate", "quadratic"),
    (("x", "t", "n"),),
    params=lambda r: {"a": r.randint(-4, 4), "b": r.randint(-9, 9), "c": r.randint(-9, 9)},
    describe=lambda p: f"Return {_poly(p, '{a}')} for the integer {{a}}.",
    body=lambda p: f"    return {p['a']} * {{a}} ** 2 + {p['b']} * {{a}} + {p['c']}\n",
    oracle=lambda p, x: p["a"] * x**2 + p["b"] * x + p["c"],
    inputs=lambda r, p: (r.randint(-12, 12),),
)


def _poly(p: dict, x: str) -> str:
    """The polynomial in words-free math notation, e.g. '3 * x**2 - x + 4' (zero terms dropped)."""
    terms = [(p["a"], f"{x}**2"), (p["b"], x), (p["c"], "")]
    out = ""
    for coef, var in terms:
        if coef == 0:
            continue
        mag = abs(coef)
        text = var if mag == 1 and var else (f"{mag} * {var}" if var else str(mag))
        out += (f" {'-' if coef < 0 else '+'} " if out else ("-" if coef < 0 else "")) + text
    return out or "0"


BASE = Family(
    "to_base",
    "arithmetic",
    2,
    ("to_base", "convert", "in_base", "base_string", "to_digits", "represent"),
    (("n", "number", "value", "num", "x"),),
    params=lambda r: {"base": r.randint(2, 9)},
    describe=lambda p: (
        f"Return the base-{p['base']} representation of the non-negative integer {{a}} as a string of "
        "digits, most significant first ('0' for 0)."
    ),
    body=lambda p: (
        "    if {a} == 0:\n        return '0'\n    out = ''\n    while {a} > 0:\n"
        f"        out = str({{a}} % {p['base']}) + out\n        {{a}} //= {p['base']}\n    return out\n"
    ),
    oracle=lambda p, n: _to_base(n, p["base"]),
    inputs=lambda r, p: (r.randint(0, 5000),),
)


def _to_base(n: int, b: int) -> str:
    out = ""
    while n > 0:
        out = str(n % b) + out
        n //= b
    return out or "0"


GCD_LCM = Family(
    "gcd_lcm",
    "arithmetic",
    2,
    ("combine", "gcd_or_lcm", "divisor_math", "pair_math", "number_link", "combine_ints"),
    (("a", "x", "m", "first"), ("b", "y", "k", "second")),
    params=lambda r: {"which": r.choice(["greatest common divisor", "least common multiple"])},
    describe=lambda p: f"Return the {p['which']} of the positive integers {{a}} and {{b}}, computed with a loop.",
    body=lambda p: (
        "    p, q = {a}, {b}\n    while q:\n        p, q = q, p % q\n"
        + ("    return p\n" if p["which"].startswith("greatest") else "    return {a} * {b} // p\n")
    ),
    oracle=lambda p, a, b: _gcd(a, b) if p["which"].startswith("greatest") else a * b // _gcd(a, b),
    inputs=lambda r, p: (r.randint(1, 120), r.randint(1, 120)),
)


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


# ------------------------------------------------------------------------------------------------ loops

COLLATZ = Family(
    "collatz",
    "loops",
    2,
    ("collatz", "steps_to_one", "hailstone", "hailstone_run", "orbit", "walk_to_one"),
    (("n", "start", "number", "seed", "value"),),
    params=lambda r: {"mul": r.choice([3, 5]), "what": r.choice(["steps", "peak"])},
    describe=lambda p: (
        f"Starting from the positive integer {{a}}, repeatedly replace it by half of it when it is even "
        f"and by {p['mul']} times it plus 1 when it is odd, until it is 1 or 100 replacements have been "
        "made. Return "
        + (
            "the number of replacements made."
            if p["what"] == "steps"
            else "the largest value seen (the start included)."
        )
    ),
    body=lambda p: (
        "    x = {a}\n    steps = 0\n    peak = x\n    while x != 1 and steps < 100:\n"
        f"        x = x // 2 if x % 2 == 0 else {p['mul']} * x + 1\n"
        "        steps += 1\n        peak = max(peak, x)\n"
        + ("    return steps\n" if p["what"] == "steps" else "    return peak\n")
    ),
    oracle=lambda p, n: _collatz(p["mul"], n)[0 if p["what"] == "steps" else 1],
    inputs=lambda r, p: (r.randint(1, 60),),
)


def _collatz(mul: int, x: int) -> tuple[int, int]:
    steps, peak = 0, x
    while x != 1 and steps < 100:
        x = x // 2 if x % 2 == 0 else mul * x + 1
        steps += 1
        peak = max(peak, x)
    return steps, peak


FIZZBUZZ = Family(
    "fizzbuzz",
    "loops",
    1,
    ("fizzbuzz", "label_numbers", "buzz_list"),
    (("n", "count"),),
    params=lambda r: {
        "x": r.randint(2, 5),
        "y": r.randint(6, 9),
        "w1": r.choice(["Fizz", "Ping"]),
        "w2": r.choice(["Buzz", "Pong"]),
    },
    describe=lambda p: (
        f"Return a list for the numbers 1 to {{a}}: '{p['w1']}{p['w2']}' for multiples of both "
        f"{p['x']} and {p['y']}, '{p['w1']}' for other multiples of {p['x']}, '{p['w2']}' for other "
        f"multiples of {p['y']}, and the number itself (an int) otherwise."
    ),
    body=lambda p: (
        "    out = []\n    for i in range(1, {a} + 1):\n"
        f"        if i % {p['x']} == 0 and i % {p['y']} == 0:\n            out.append('{p['w1']}{p['w2']}')\n"
        f"        elif i % {p['x']} == 0:\n            out.append('{p['w1']}')\n"
        f"        elif i % {p['y']} == 0:\n            out.append('{p['w2']}')\n"
        "        else:\n            out.append(i)\n    return out\n"
    ),
    oracle=lambda p, n: [
        (p["w1"] + p["w2"])
        if i % p["x"] == 0 and i % p["y"] == 0
        else p["w1"]
        if i % p["x"] == 0
        else p["w2"]
        if i % p["y"] == 0
        else i
        for i in range(1, n + 1)
    ],
    inputs=lambda r, p: (r.randint(0, 16),),
)

# ------------------------------------------------------------------------------------------------ conditionals

GRADE = Family(
    "grade",
    "conditionals",
    1,
    ("grade", "letter_grade", "classify_score", "score_to_letter", "grade_of", "letter_for"),
    (("score", "points", "value", "result", "total"),),
    params=lambda r: {"top": r.choice([85, 88, 90, 92, 95]), "step": r.choice([5, 8, 10])},
    describe=lambda p: (
        f"Return 'A' if {{a}} >= {p['top']}, 'B' if {{a}} >= {p['top'] - p['step']}, 'C' if {{a}} >= "
        f"{p['top'] - 2 * p['step']}, and 'F' otherwise."
    ),
    body=lambda p: (
        f"    if {{a}} >= {p['top']}:\n        return 'A'\n"
        f"    if {{a}} >= {p['top'] - p['step']}:\n        return 'B'\n"
        f"    if {{a}} >= {p['top'] - 2 * p['step']}:\n        return 'C'\n    return 'F'\n"
    ),
    oracle=lambda p, s: (
        "A" if s >= p["top"] else "B" if s >= p["top"] - p["step"] else "C" if s >= p["top"] - 2 * p["step"] else "F"
    ),
    inputs=lambda r, p: (r.randint(40, 100),),
)

TRIANGLE = Family(
    "triangle",
    "conditionals",
    2,
    ("triangle_kind", "classify_triangle", "kind_of_triangle", "triangle_type", "what_triangle", "sides_kind"),
    (("a", "x", "p"), ("b", "y", "q"), ("c", "z", "r")),
    params=lambda r: {"strict": r.choice([True, False])},
    describe=lambda p: (
        "Classify the triangle with side lengths {a}, {b}, {c} (positive integers): return 'invalid' if "
        "the largest side is "
        + ("at least" if p["strict"] else "more than")
        + " the sum of the other two, else 'equilateral', 'isosceles' or 'scalene'."
    ),
    body=lambda p: (
        "    s = sorted([{a}, {b}, {c}])\n"
        + ("    if s[2] >= s[0] + s[1]:\n" if p["strict"] else "    if s[2] > s[0] + s[1]:\n")
        + "        return 'invalid'\n    if {a} == {b} == {c}:\n        return 'equilateral'\n"
        "    if {a} == {b} or {b} == {c} or {a} == {c}:\n        return 'isosceles'\n    return 'scalene'\n"
    ),
    oracle=lambda p, a, b, c: _triangle(p["strict"], a, b, c),
    inputs=lambda r, p: tuple(r.choice([r.randint(1, 6)] * 2 + [r.randint(1, 12)]) for _ in range(3)),
)


def _triangle(strict: bool, a: int, b: int, c: int) -> str:
    s = sorted([a, b, c])
    if (s[2] >= s[0] + s[1]) if strict else (s[2] > s[0] + s[1]):
        return "invalid"
    if a == b == c:
        return "equilateral"
    return "isosceles" if a == b or b == c or a == c else "scalene"


CLAMP = Family(
    "clamp",
    "conditionals",
    1,
    ("clamp", "bound", "limit"),
    (("x", "value"),),
    params=lambda r: (lambda lo: {"lo": lo, "hi": lo + r.randint(1, 30)})(r.randint(-20, 20)),
    describe=lambda p: (
        f"Return {{a}} limited to the range [{p['lo']}, {p['hi']}]: {p['lo']} if it is smaller, "
        f"{p['hi']} if it is larger, else {{a}} itself."
    ),
    body=lambda p: (
        f"    if {{a}} < {p['lo']}:\n        return {p['lo']}\n"
        f"    if {{a}} > {p['hi']}:\n        return {p['hi']}\n    return {{a}}\n"
    ),
    oracle=lambda p, x: min(max(x, p["lo"]), p["hi"]),
    inputs=lambda r, p: (r.randint(p["lo"] - 10, p["hi"] + 10),),
)

# ------------------------------------------------------------------------------------------------ recursion

LINEAR_RECURRENCE = Family(
    "recurrence",
    "recursion",
    3,
    ("seq", "recurrence", "term"),
    (("n", "k"),),
    params=lambda r: {"f0": r.randint(0, 3), "f1": r.randint(1, 4), "c": r.randint(1, 3)},
    describe=lambda p: (
        f"Return term {{a}} of the sequence with f(0) = {p['f0']}, f(1) = {p['f1']} and "
        f"f(n) = f(n - 1) + {p['c']} * f(n - 2), computed recursively."
    ),
    body=lambda p: (
        f"    if {{a}} == 0:\n        return {p['f0']}\n    if {{a}} == 1:\n        return {p['f1']}\n"
        "    return {entry}({a} - 1) + " + f"{p['c']} * {{entry}}({{a}} - 2)\n"
    ),
    oracle=lambda p, n: _recurrence(p, n),
    inputs=lambda r, p: (r.randint(0, 12),),
)


def _recurrence(p: dict, n: int) -> int:
    a, b = p["f0"], p["f1"]
    if n == 0:
        return a
    for _ in range(n - 1):
        a, b = b, b + p["c"] * a
    return b


def _nested(r: random.Random, depth: int) -> list:
    return [
        r.randint(0, 9) if depth == 0 or r.random() < 0.6 else _nested(r, depth - 1) for _ in range(r.randint(0, 3))
    ]


def _flatten(xs: list) -> list:
    out: list = []
    for x in xs:
        out.extend(_flatten(x) if isinstance(x, list) else [x])
    return out


def _depth(xs: list) -> int:
    return 1 + max((_depth(x) for x in xs if isinstance(x, list)), default=0)


NESTED = Family(
    "nested",
    "recursion",
    3,
    ("walk_nested", "nested_info", "deep", "nested_walk", "recurse_list", "tree_info"),
    (("xs", "tree", "items", "data", "nest", "lst"),),
    params=lambda r: {"what": r.choice(["flatten", "depth", "sum"])},
    describe=lambda p: (
        "{a} is a list whose items are integers or lists of the same kind. Return "
        + {
            "flatten": "the list of all its integers, left to right.",
            "depth": "its nesting depth (a list without inner lists has depth 1).",
            "sum": "the sum of all its integers.",
        }[p["what"]]
        + " Use recursion."
    ),
    body=lambda p: {
        "flatten": "    out = []\n    for x in {a}:\n        if isinstance(x, list):\n"
        "            out.extend({entry}(x))\n        else:\n            out.append(x)\n    return out\n",
        "depth": "    best = 0\n    for x in {a}:\n        if isinstance(x, list):\n"
        "            best = max(best, {entry}(x))\n    return 1 + best\n",
        "sum": "    total = 0\n    for x in {a}:\n"
        "        total += {entry}(x) if isinstance(x, list) else x\n    return total\n",
    }[p["what"]],
    oracle=lambda p, xs: {"flatten": _flatten, "depth": _depth, "sum": lambda v: sum(_flatten(v))}[p["what"]](xs),
    inputs=lambda r, p: (_nested(r, 3),),
)


def _no_repeat(n: int, bad: str) -> list[str]:
    out = [""]
    for _ in range(n):
        out = [s + c for s in out for c in "01" if not (s + c).endswith(bad)]
    return out


BINARY_STRINGS = Family(
    "binary_strings",
    "recursion",
    3,
    ("bit_strings", "binary_words", "strings_without", "bitstrings", "all_words", "binary_list"),
    (("n", "length", "size", "k", "width"),),
    params=lambda r: {"bad": r.choice(["11", "00", "101", "010"])},
    describe=lambda p: (
        f"Return, in increasing order, every string of {{a}} characters '0'/'1' that does not contain "
        f"'{p['bad']}'. Build them recursively."
    ),
    body=lambda p: (
        "    if {a} == 0:\n        return ['']\n    out = []\n    for s in {entry}({a} - 1):\n"
        f"        for c in '01':\n            if not (s + c).endswith('{p['bad']}'):\n"
        "                out.append(s + c)\n    return out\n"
    ),
    oracle=lambda p, n: _no_repeat(n, p["bad"]),
    inputs=lambda r, p: (r.randint(0, 5),),
)

# ------------------------------------------------------------------------------------------------ sorting / searching

SEARCH = Family(
    "search",
    "sorting",
    2,
    ("find_position", "search_sorted", "locate", "bsearch", "index_of", "find_index"),
    (("xs", "sorted_list", "arr", "nums"), ("target", "x", "key", "value")),
    params=lambda r: {"miss": r.choice(["-1", "insertion point"])},
    describe=lambda p: (
        "{a} is sorted in increasing order with distinct items. Using binary search, return the index "
        "of {b} in {a}; if it is absent, return "
        + ("-1." if p["miss"] == "-1" else "the index where it would be inserted to keep the order.")
    ),
    body=lambda p: (
        "    lo, hi = 0, len({a})\n    while lo < hi:\n        mid = (lo + hi) // 2\n"
        "        if {a}[mid] < {b}:\n            lo = mid + 1\n        else:\n            hi = mid\n"
        + ("    return lo if lo < len({a}) and {a}[lo] == {b} else -1\n" if p["miss"] == "-1" else "    return lo\n")
    ),
    oracle=lambda p, xs, t: xs.index(t) if t in xs else (-1 if p["miss"] == "-1" else sum(x < t for x in xs)),
    inputs=lambda r, p: (lambda xs: (xs, r.choice(xs + [r.randint(-5, 40)])))(
        sorted(set(_ints(r, r.randint(0, 9), -5, 40)))
    ),
)

SORT_BY = Family(
    "sort_by",
    "sorting",
    2,
    ("order_words", "sort_words", "arrange", "sort_strings", "ranked", "order_by"),
    (("words", "items", "names", "strings", "seq"),),
    params=lambda r: {"key": r.choice(["length", "last letter", "vowel count"]), "desc": r.choice([False, True])},
    describe=lambda p: (
        f"Return the strings of {{a}} sorted by {p['key']}, "
        + ("largest" if p["desc"] else "smallest")
        + " first; strings with equal "
        + p["key"]
        + " are in alphabetical order."
    ),
    body=lambda p: (
        "    return sorted({a}, key=lambda w: ("
        + ("-" if p["desc"] else "")
        + {"length": "len(w)", "last letter": "ord(w[-1])", "vowel count": "sum(c in 'aeiou' for c in w)"}[p["key"]]
        + ", w))\n"
    ),
    oracle=lambda p, ws: sorted(
        ws,
        key=lambda w: (
            (-1 if p["desc"] else 1)
            * {"length": len(w), "last letter": ord(w[-1]), "vowel count": sum(c in "aeiou" for c in w)}[p["key"]],
            w,
        ),
    ),
    inputs=lambda r, p: (_words(r, r.randint(0, 6), 1, 5),),
)

KTH = Family(
    "kth",
    "sorting",
    2,
    ("kth_value", "order_statistic", "pick_kth", "kth_distinct", "nth_value", "select_kth"),
    (("nums", "values", "xs", "data", "items"),),
    params=lambda r: {"k": r.randint(1, 4), "largest": r.choice([False, True])},
    describe=lambda p: (
        f"Return the {p['k']}{['st', 'nd', 'rd', 'th'][p['k'] - 1]} "
        f"{'largest' if p['largest'] else 'smallest'} distinct value of {{a}}, or None if it has fewer "
        f"than {p['k']} distinct values."
    ),
    body=lambda p: (
        f"    vals = sorted(set({{a}}){', reverse=True' if p['largest'] else ''})\n"
        f"    return vals[{p['k'] - 1}] if len(vals) >= {p['k']} else None\n"
    ),
    oracle=lambda p, xs: (lambda v: v[p["k"] - 1] if len(v) >= p["k"] else None)(sorted(set(xs), reverse=p["largest"])),
    inputs=lambda r, p: (_ints(r, r.randint(0, 8), 0, 12),),
)

MERGE = Family(
    "merge",
    "sorting",
    2,
    ("merge", "merge_sorted", "combine_sorted", "merge_lists", "join_sorted", "sorted_merge"),
    (("xs", "left", "a", "first"), ("ys", "right", "b", "second")),
    params=lambda r: {"dedupe": r.choice([False, True])},
    describe=lambda p: (
        "{a} and {b} are sorted lists. Merge them into one sorted list with a two-pointer walk "
        "(do not call sort)" + ("; keep only one copy of each value." if p["dedupe"] else ".")
    ),
    body=lambda p: (
        "    i = j = 0\n    out = []\n    while i < len({a}) or j < len({b}):\n"
        "        if j == len({b}) or (i < len({a}) and {a}[i] <= {b}[j]):\n"
        "            x = {a}[i]\n            i += 1\n        else:\n            x = {b}[j]\n            j += 1\n"
        + (
            "        if not out or out[-1] != x:\n            out.append(x)\n"
            if p["dedupe"]
            else "        out.append(x)\n"
        )
        + "    return out\n"
    ),
    oracle=lambda p, xs, ys: sorted(set(xs + ys)) if p["dedupe"] else sorted(xs + ys),
    inputs=lambda r, p: (sorted(_ints(r, r.randint(0, 5), 0, 15)), sorted(_ints(r, r.randint(0, 5), 0, 15))),
)

# ------------------------------------------------------------------------------------------------ small classes
# A class family's tests drive an instance through a list of method calls (`run_ops` in the task's setup code) and
# compare the list of return values.

RUN_OPS_SETUP = (
    "def run_ops(cls, init, ops):\n    obj = cls(*init)\n    out = []\n"
    "    for name, *args in ops:\n        out.append(getattr(obj, name)(*args))\n    return out\n"
)


def _stack_ops(r: random.Random, p: dict) -> tuple:
    ops: list = []
    for _ in range(r.randint(1, 8)):
        kind = r.choice(["push", "push", "pop", "peek", "size"])
        ops.append(("push", r.randint(0, 9)) if kind == "push" else (kind,))
    return ((), ops)


def _stack_oracle(p: dict, init: tuple, ops: list) -> list:
    items: list = []
    out: list = []
    for name, *args in ops:
        if name == "push":
            items.append(args[0])
            out.append(None)
        elif name == "pop":
            out.append((items.pop() if p["lifo"] else items.pop(0)) if items else p["empty"])
        elif name == "peek":
            out.append((items[-1] if p["lifo"] else items[0]) if items else p["empty"])
        else:
            out.append(len(items))
    return out


STACK = Family(
    "container",
    "classes",
    3,
    ("Stack", "Store", "Buffer", "Box", "Pile", "Holder"),
    (),
    params=lambda r: {"lifo": r.choice([True, False]), "empty": r.choice([None, -1, 0])},
    describe=lambda p: (
        "A "
        + ("last-in first-out stack" if p["lifo"] else "first-in first-out queue")
        + ". push(x) adds x and returns None; pop() removes and returns the "
        + ("newest" if p["lifo"] else "oldest")
        + f" item ({p['empty']!r} when empty); peek() returns "
        f"it without removing it ({p['empty']!r} when empty); size() returns the number of items."
    ),
    body=lambda p: (
        "    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n"
        f"    def pop(self):\n        if not self.items:\n            return {p['empty']!r}\n"
        + ("        return self.items.pop()\n\n" if p["lifo"] else "        return self.items.pop(0)\n\n")
        + f"    def peek(self):\n        if not self.items:\n            return {p['empty']!r}\n"
        + ("        return self.items[-1]\n\n" if p["lifo"] else "        return self.items[0]\n\n")
        + "    def size(self):\n        return len(self.items)\n"
    ),
    oracle=_stack_oracle,
    inputs=_stack_ops,
    kind="class",
)


def _account_ops(r: random.Random, p: dict) -> tuple:
    ops = [(r.choice(["deposit", "withdraw", "withdraw", "balance"]), r.randint(1, 60)) for _ in range(r.randint(1, 7))]
    return ((r.randint(0, 50),), [(n, a) if n != "balance" else (n,) for n, a in ops])


def _account_oracle(p: dict, init: tuple, ops: list) -> list:
    bal, out = init[0], []
    for name, *args in ops:
        if name == "deposit":
            bal += args[0]
            out.append(bal)
        elif name == "withdraw":
            ok = bal - args[0] - p["fee"] >= -p["overdraft"]
            bal -= args[0] + p["fee"] if ok else 0
            out.append(ok)
        else:
            out.append(bal)
    return out


ACCOUNT = Family(
    "account",
    "classes",
    3,
    ("Account", "Wallet", "Ledger", "Purse", "Bank", "Till"),
    (),
    params=lambda r: {"overdraft": r.choice([0, 10, 25, 50]), "fee": r.choice([0, 1, 2])},
    describe=lambda p: (
        "A bank account created with a starting balance: Account(balance). deposit(amount) adds amount "
        "and returns the new balance; withdraw(amount) subtracts amount plus a fee of "
        f"{p['fee']} and returns True if the balance stays at least -{p['overdraft']}, else changes "
        "nothing and returns False; balance() returns the balance."
    ),
    body=lambda p: (
        "    def __init__(self, balance):\n        self.money = balance\n\n"
        "    def deposit(self, amount):\n        self.money += amount\n        return self.money\n\n"
        f"    def withdraw(self, amount):\n        if self.money - amount - {p['fee']} < -{p['overdraft']}:\n"
        f"            return False\n        self.money -= amount + {p['fee']}\n        return True\n\n"
        "    def balance(self):\n        return self.money\n"
    ),
    oracle=_account_oracle,
    inputs=_account_ops,
    kind="class",
)

FAMILIES: tuple[Family, ...] = (
    COUNT_CHARS,
    REVERSE_WORDS,
    CAESAR,
    EXTREME_WORD,
    RUN_LENGTH,
    FILTER_THRESHOLD,
    RUNNING,
    CHUNKS,
    ROTATE,
    DEDUPE,
    FREQUENCY,
    GROUP_BY,
    INVERT,
    TOP_K,
    DIGITS,
    POLYNOMIAL,
    BASE,
    GCD_LCM,
    COLLATZ,
    FIZZBUZZ,
    GRADE,
    TRIANGLE,
    CLAMP,
    LINEAR_RECURRENCE,
    NESTED,
    BINARY_STRINGS,
    SEARCH,
    SORT_BY,
    KTH,
    MERGE,
    STACK,
    ACCOUNT,
)
BY_NAME = {f.name: f for f in FAMILIES}
