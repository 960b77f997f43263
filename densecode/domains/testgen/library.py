"""A library of small real functions (strings, lists, dicts, arithmetic, loops, branches, recursion, search), each a
template with variable names, function names and constants to vary, and an input sampler for its arguments.

Used by the testgen generator (functions to test) and the commitmsg generator (functions to edit). A rendered
function is plain source; `render(template, rng)` picks its names and constants. Levels: 1 = one branch or a
straight loop, 2 = a loop with a branch or two branches, 3 = nested branches, recursion or several paths.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Template:
    family: str
    level: int
    names: tuple[str, ...]  # function-name choices
    source: str  # str.format template: {fn}, {a}, {b}, {acc}, {item}, {k}, {m}
    args: tuple[str, ...]  # argument kinds, in order (see sample_args)
    k: tuple[int, ...] = (0,)  # choices for the constant {k}
    m: tuple[int, ...] = (0,)  # choices for the constant {m}
    arg_names: tuple[tuple[str, ...], ...] = (("xs", "values", "items", "nums"), ("n", "k", "limit"))
    tags: frozenset[str] = field(default_factory=frozenset)  # edit operators that apply (commitmsg)


ACCS = ("total", "result", "acc", "count", "out")
ITEMS = ("x", "v", "item", "e")

T = Template
TEMPLATES: tuple[Template, ...] = (
    T("count_above", 2, ("count_above", "num_greater", "count_larger"),
      "def {fn}({a}, {b}):\n    {acc} = 0\n    for {item} in {a}:\n        if {item} > {b}:\n            {acc} += 1\n"
      "    return {acc}\n", ("int_list", "int"), tags=frozenset({"loop_to_comprehension_count", "guard"})),
    T("sum_even", 2, ("sum_even", "even_total", "add_evens"),
      "def {fn}({a}):\n    {acc} = 0\n    for {item} in {a}:\n        if {item} % 2 == 0:\n            {acc} += {item}\n"
      "    return {acc}\n", ("int_list",), tags=frozenset({"loop_to_comprehension_sum", "guard"})),
    T("scale_list", 1, ("scale", "multiply_all", "scaled"),
      "def {fn}({a}, {b}):\n    {acc} = []\n    for {item} in {a}:\n        {acc}.append({item} * {b})\n"
      "    return {acc}\n", ("int_list", "small_int"), tags=frozenset({"loop_to_comprehension_list", "guard"})),
    T("filter_small", 2, ("keep_below", "filter_small", "below"),
      "def {fn}({a}, {b}):\n    {acc} = []\n    for {item} in {a}:\n        if {item} < {b}:\n"
      "            {acc}.append({item})\n    return {acc}\n", ("int_list", "int"),
      tags=frozenset({"loop_to_comprehension_filter", "guard"})),
    T("clamp", 2, ("clamp", "bound", "clip"),
      "def {fn}({a}, low={k}, high={m}):\n    if {a} < low:\n        return low\n    if {a} > high:\n        return high\n"
      "    return {a}\n", ("int",), k=(-5, -3, -1, 0), m=(3, 5, 8, 10), arg_names=(("x", "value", "n"),),
      tags=frozenset({"default"})),
    T("sign", 2, ("sign", "signum", "sign_of"),
      "def {fn}({a}):\n    if {a} > 0:\n        return 1\n    elif {a} < 0:\n        return -1\n    return 0\n",
      ("int",), arg_names=(("x", "value", "n"),)),
    T("fizzbuzz", 3, ("fizzbuzz", "fizz_buzz", "label"),
      "def {fn}({a}):\n    if {a} % {k} == 0 and {a} % {m} == 0:\n        return 'FizzBuzz'\n    if {a} % {k} == 0:\n"
      "        return 'Fizz'\n    if {a} % {m} == 0:\n        return 'Buzz'\n    return str({a})\n",
      ("pos_int",), k=(2, 3), m=(5, 7), arg_names=(("n", "i", "number"),), tags=frozenset({"constant"})),
    T("grade", 3, ("grade", "letter_grade", "to_grade"),
      "def {fn}({a}):\n    if {a} >= {k}:\n        return 'A'\n    elif {a} >= {m}:\n        return 'B'\n"
      "    elif {a} >= 50:\n        return 'C'\n    return 'F'\n", ("score",), k=(85, 90), m=(70, 75),
      arg_names=(("score", "points", "mark"),), tags=frozenset({"constant"})),
    T("max_of", 2, ("largest", "max_value", "find_max"),
      "def {fn}({a}):\n    if not {a}:\n        return None\n    {acc} = {a}[0]\n    for {item} in {a}[1:]:\n"
      "        if {item} > {acc}:\n            {acc} = {item}\n    return {acc}\n", ("int_list",)),
    T("index_of", 2, ("index_of", "find_index", "position"),
      "def {fn}({a}, {b}):\n    for i in range(len({a})):\n        if {a}[i] == {b}:\n            return i\n"
      "    return -1\n", ("int_list", "small_int"), tags=frozenset({"off_by_one"})),
    T("count_vowels", 2, ("count_vowels", "vowel_count", "num_vowels"),
      "def {fn}({a}):\n    {acc} = 0\n    for {item} in {a}:\n        if {item} in 'aeiou':\n            {acc} += 1\n"
      "    return {acc}\n", ("word",), arg_names=(("s", "text", "word"),),
      tags=frozenset({"loop_to_comprehension_count"})),
    T("reverse_words", 1, ("reverse_words", "flip_words", "words_backwards"),
      "def {fn}({a}):\n    {acc} = {a}.split()\n    {acc}.reverse()\n    return ' '.join({acc})\n", ("text",),
      arg_names=(("s", "text", "sentence"),)),
    T("is_palindrome", 2, ("is_palindrome", "palindrome", "reads_same"),
      "def {fn}({a}):\n    {acc} = {a}.lower()\n    i = 0\n    j = len({acc}) - 1\n    while i < j:\n"
      "        if {acc}[i] != {acc}[j]:\n            return False\n        i += 1\n        j -= 1\n    return True\n",
      ("palin",), arg_names=(("s", "text", "word"),), tags=frozenset({"off_by_one"})),
    T("factorial", 3, ("factorial", "fact", "product_to"),
      "def {fn}({a}):\n    if {a} <= 1:\n        return 1\n    return {a} * {fn}({a} - 1)\n", ("small_int",),
      arg_names=(("n", "k", "m"),)),
    T("fib", 3, ("fib", "fibonacci", "nth_fib"),
      "def {fn}({a}):\n    if {a} < 2:\n        return {a}\n    {acc}, {item} = 0, 1\n    for _ in range({a} - 1):\n"
      "        {acc}, {item} = {item}, {acc} + {item}\n    return {item}\n", ("small_int",),
      arg_names=(("n", "k", "m"),), tags=frozenset({"off_by_one"})),
    T("word_lengths", 1, ("word_lengths", "lengths", "length_map"),
      "def {fn}({a}):\n    {acc} = {{}}\n    for {item} in {a}.split():\n        {acc}[{item}] = len({item})\n"
      "    return {acc}\n", ("text",), arg_names=(("s", "text", "sentence"),)),
    T("char_freq", 2, ("char_freq", "letter_counts", "histogram"),
      "def {fn}({a}):\n    {acc} = {{}}\n    for {item} in {a}:\n        if {item} in {acc}:\n            {acc}[{item}] += 1\n"
      "        else:\n            {acc}[{item}] = 1\n    return {acc}\n", ("word",), arg_names=(("s", "text", "word"),)),
    T("running_sum", 1, ("running_sum", "prefix_sums", "cumulative"),
      "def {fn}({a}):\n    {acc} = []\n    s = 0\n    for {item} in {a}:\n        s += {item}\n        {acc}.append(s)\n"
      "    return {acc}\n", ("int_list",), tags=frozenset({"guard"})),
    T("binary_search", 3, ("binary_search", "bsearch", "search_sorted"),
      "def {fn}({a}, {b}):\n    lo, hi = 0, len({a}) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
      "        if {a}[mid] == {b}:\n            return mid\n        if {a}[mid] < {b}:\n            lo = mid + 1\n"
      "        else:\n            hi = mid - 1\n    return -1\n", ("sorted_list", "small_int"), tags=frozenset({"off_by_one"})),
    T("gcd", 2, ("gcd", "greatest_common_divisor", "common_factor"),
      "def {fn}({a}, {b}):\n    while {b}:\n        {a}, {b} = {b}, {a} % {b}\n    return {a}\n", ("pos_int", "pos_int"),
      arg_names=(("a", "x", "p"), ("b", "y", "q"))),
    T("is_prime", 3, ("is_prime", "prime", "check_prime"),
      "def {fn}({a}):\n    if {a} < 2:\n        return False\n    i = 2\n    while i * i <= {a}:\n        if {a} % i == 0:\n"
      "            return False\n        i += 1\n    return True\n", ("pos_int",), arg_names=(("n", "k", "number"),)),
    T("bubble_sort", 3, ("bubble_sort", "sort_list", "sorted_copy"),
      "def {fn}({a}):\n    {acc} = list({a})\n    for i in range(len({acc})):\n        for j in range(len({acc}) - 1 - i):\n"
      "            if {acc}[j] > {acc}[j + 1]:\n                {acc}[j], {acc}[j + 1] = {acc}[j + 1], {acc}[j]\n"
      "    return {acc}\n", ("int_list",), tags=frozenset({"off_by_one"})),
    T("dedupe", 2, ("dedupe", "unique", "remove_duplicates"),
      "def {fn}({a}):\n    seen = set()\n    {acc} = []\n    for {item} in {a}:\n        if {item} not in seen:\n"
      "            seen.add({item})\n            {acc}.append({item})\n    return {acc}\n", ("int_list",)),
    T("caesar", 2, ("shift_letters", "caesar", "rotate_text"),
      "def {fn}({a}, shift={k}):\n    {acc} = ''\n    for {item} in {a}:\n        if {item}.isalpha():\n"
      "            {acc} += chr((ord({item}) - 97 + shift) % 26 + 97)\n        else:\n            {acc} += {item}\n"
      "    return {acc}\n", ("text",), k=(1, 2, 3, 13), arg_names=(("s", "text", "message"),),
      tags=frozenset({"default"})),
    T("digit_sum", 1, ("digit_sum", "sum_digits", "digits_total"),
      "def {fn}({a}):\n    {acc} = 0\n    while {a} > 0:\n        {acc} += {a} % 10\n        {a} //= 10\n    return {acc}\n",
      ("pos_int",), arg_names=(("n", "k", "number"),)),
    T("pairs_sum", 3, ("has_pair_sum", "pair_with_sum", "two_sum_exists"),
      "def {fn}({a}, {b}):\n    for i in range(len({a})):\n        for j in range(i + 1, len({a})):\n"
      "            if {a}[i] + {a}[j] == {b}:\n                return True\n    return False\n", ("int_list", "int"),
      tags=frozenset({"off_by_one"})),
    T("bank_account", 3, ("Account", "Wallet", "Balance"),
      "class {fn}:\n    def __init__(self, start={k}):\n        self.amount = start\n\n    def deposit(self, {b}):\n"
      "        if {b} <= 0:\n            return False\n        self.amount += {b}\n        return True\n\n"
      "    def withdraw(self, {b}):\n        if {b} > self.amount:\n            return False\n"
      "        self.amount -= {b}\n        return True\n", (), k=(0, 10, 100), arg_names=(("x",), ("value", "amount_in", "n"))),
)


WORDS = ("apple", "kayak", "level", "tree", "sun", "moon", "noon", "data", "code", "bob", "ada", "zig")


def sample_arg(kind: str, rng: random.Random):
    if kind == "int":
        return rng.randint(-12, 12)
    if kind == "small_int":
        return rng.randint(0, 9)
    if kind == "pos_int":
        return rng.randint(0, 60)
    if kind == "score":
        return rng.randint(0, 100)
    if kind == "int_list":
        return [rng.randint(-9, 9) for _ in range(rng.randint(0, 6))]
    if kind == "sorted_list":
        return sorted(rng.sample(range(10), rng.randint(0, 6)))
    if kind == "word":
        return "".join(rng.choice("abeiou") for _ in range(rng.randint(0, 6)))
    if kind == "palin":
        w = rng.choice(WORDS)
        return w.upper() if rng.random() < 0.2 else w
    if kind == "text":
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
    raise ValueError(f"unknown argument kind {kind!r}")


@dataclass(frozen=True)
class Rendered:
    template: Template
    source: str
    entry: str  # function (or class) name
    params: dict


def render(t: Template, rng: random.Random) -> Rendered:
    names = [rng.choice(choices) for choices in t.arg_names]
    params = {"fn": rng.choice(t.names), "a": names[0], "b": names[1] if len(names) > 1 else "y",
              "acc": rng.choice(ACCS), "item": rng.choice(ITEMS), "k": rng.choice(t.k), "m": rng.choice(t.m)}
    if params["item"] == params["a"] or params["acc"] == params["a"]:
        params["item"], params["acc"] = "el", "res"
    return Rendered(t, t.source.format(**params), params["fn"], params)
