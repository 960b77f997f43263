"""Targets: the grammar lets any expression be one, Python does not (`for len(x) in`, `f(x) = 1`).

densecode's parser asks CPython's parser about a target's text at the token that ends it
(densecode/grammar_targets.py): the `in` of a `for`, `=`, augmented assignment, an annotation's
`:`, what ends a `del` or `with ... as` target. Ground truth is `ast.parse` on complete programs
(hand-written edge cases and generated ones); every character prefix of a valid program stays
viable, and an invalid one is refused exactly where it can no longer become valid Python.
"""

import random

import pytest

from tests.grammar.helpers import grammar_accepts, python_accepts

CASES = [
    "for len(x) in y: pass\n", "for a.b in c: pass\n", "for a[0], *b in c: pass\n", "for (a, b) in c: pass\n",
    "x = [a for f(x) in y]\n", "x = [x for x in a in b]\n", "for x in lambda: y in z: pass\n",
    "for x in a if b in c else d: pass\n", "for (a in b) in c: pass\n", "x = [a in b for c in d]\n",
    "async def f():\n    async for len(x) in y: pass\n", "async def f():\n    async for x in y: pass\n",
    "x = [a for a in b if c in d]\n", "for x, in y: pass\n", "x = {k: v for k, v in d.items()}\n",
    "x = (1 for [a, b] in c)\n", "for a + b in c: pass\n", "for *a in c: pass\n", "f(a for len(b) in c)\n",
    "for i in range(3):\n    for j, k in enumerate(x): pass\n", "for x in y:\n    z = a in b\n",
    "for (x) in y: pass\n", "for x.y[0].z in w: pass\n", "for None in x: pass\n", "for 'a' in x: pass\n",
    "[x for x in y for f() in z]\n", "[x for x in y if a for b.c in z]\n",
]
_SOUP = ["x", "f", "(", ")", "[", "]", ".", "a", ",", "*", "1", "+", "in", "not", "lambda:", "if", "else", "'s'"]


def test_for_targets_agree_with_python(engine):
    from densecode.grammar import new_row_parser

    parser = new_row_parser(engine[0], "incremental")
    rng = random.Random(0)
    programs = list(CASES)
    for _ in range(600):
        target = " ".join(rng.choice(_SOUP) for _ in range(1 + rng.randrange(4)))
        iterable = rng.choice(["y", "a in b", "a if b else c", "lambda: z"])
        programs.append(rng.choice([f"for {target} in {iterable}: pass\n", f"z = [q for {target} in {iterable}]\n"]))
    wrong = [(code, python_accepts(code)) for code in programs if grammar_accepts(parser, code) != python_accepts(code)]
    assert wrong == []
    assert sum(map(python_accepts, programs)) >= 25  # both verdicts exercised


def test_check_refuses_the_in_after_a_bad_target(engine):
    from densecode.grammar import GrammarProcessor, check_token_ids

    _, tok = engine
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    for good, bad in [("for x.y", "for len(x)"), ("z = [q for a, b", "z = [q for f(a)")]:
        for code, ok in ((good, True), (bad, False)):
            ids = tok(code)["input_ids"]
            assert all(v is True for v in check_token_ids(tok, "", ids, mode_processor=checker)), code
            in_ids = tok(code + " in y")["input_ids"][len(ids):]
            verdicts = check_token_ids(tok, "", ids + in_ids, mode_processor=checker)[len(ids):]
            assert (verdicts[0] is True) is ok, (code, verdicts)


# Assignment-like targets. (program, valid per ast.parse): the expected verdicts are asserted
# against ast.parse too, so a Python that disagrees shows up as a failing test.
ASSIGN_CASES = [
    ("f(x) = 1\n", False), ("f(x): int\n", False), ("f(x) += 1\n", False), ("1 = x\n", False),
    ("a + b = 3\n", False), ("(a, f()) = 1, 2\n", False), ("[x, 1] = y\n", False), ("x.y() = 2\n", False),
    ("lambda: 1 = 2\n", False), ("del f()\n", False), ("with a as f(): pass\n", False), ("a = f() = 1\n", False),
    ("a = b = 1\n", True), ("x: int\n", True), ("x.a: int\n", True), ("x[0]: int\n", True), ("(x): int\n", True),
    ("f(): int\n", False), ("(a, b): int\n", False), ("(f() := 1)\n", False), ("(x := 1)\n", True),
    ("a, = x\n", True), ("[a, *b] = c\n", True), ("x: int = 1\n", True), ("obj.attr[0].b = 2\n", True),
    ("match = 1\n", True), ("case = 1\n", True), ("_ = 1\n", True), ("type = 1\n", True), ("match.x: int = 1\n", True),
    ("match x:\n    case 1:\n        y = 2\n", True), ("match (x):\n    case 1:\n        pass\n", True),
    ("match(x) = 1\n", False), ("match(x): int\n", False), ("match[x]: int = 1\n", True), ("match(x).y: int\n", True),
    ("match x:\n    case 1:\n        f() = 2\n", False), ("match x:\n    case a:\n        case = a\n", True),
    ("match x:\n    case {'a': 1, **rest}:\n        pass\n    case C(a=1, b=y) as z:\n        w = z\n", True),
    ("del a, f(), b\n", False), ("del a, (b, c), [d]\n", True), ("del x\n", True), ("del x,\n", True),
    ("del *x\n", False), ("del (a, *b)\n", False), ("del (a), [b]\n", True), ("del ()\n", True), ("del a.b, c[0]\n", True),
    ("del f().x\n", True), ("del f()[0]; y = 1\n", True), ("del f(); y = 1\n", False),
    ("with a as b, c as d.e: pass\n", True), ("with a as (b, c): pass\n", True), ("with a as [b, *c]: pass\n", True),
    ("with a as b, c as f(): pass\n", False), ("with a as b[0], c: pass\n", True), ("with a as (b): pass\n", True),
    ("async def f():\n    async with a as f(): pass\n", False), ("async def f():\n    async with a as b: pass\n", True),
    ("try:\n    pass\nexcept E as e:\n    pass\n", True), ("try:\n    pass\nexcept E as e.a:\n    pass\n", False),
    ("x = lambda a=1: a\n", True), ("x: lambda: 1 = 2\n", True), ("x = lambda: y = 1\n", False),
    ("f = lambda x, y=2: x + y\n", True), ("lambda x=1: x += 1\n", False),
    ("if x: a = 1\n", True), ("if x: f() = 1\n", False), ("if lambda: 1: a = 1\n", True),
    ("class A: x: int = 1\n", True), ("class A(B, metaclass=M): f(): int\n", False),
    ("x = 1; f() = 2\n", False), ("x = 1; y += 2\n", True), ("*a, b = c\n", True), ("*a = b\n", True),
    ("a, *b, *c = d\n", True), ("(a,) += 1\n", False), ("a += 1\n", True), ("(a) += 1\n", True), ("x.y += 1\n", True),
    ("x[0] //= 1\n", True), ("[a] += 1\n", False), ("*a += 1\n", False), ("a, b += 1\n", False), ("f() **= 2\n", False),
    ("__debug__ = 1\n", True), ("True = 1\n", False), ("None = 1\n", False), ("... = 1\n", False),
    ("x = [y := 1, y ** 2]\n", True), ("a[b := 1] = 2\n", True), ("(a := 1) = 2\n", False),
    ("x = [z for y in w if (z := y)]\n", True), ("[y := f(x) for x in z]\n", True),
    ("def f():\n    x = yield\n    (yield) = 1\n", False), ("def f():\n    x = yield y\n    return x\n", True),
    ("x = a if b else c\n", True), ("a if b else c = 1\n", False), ("not a = 1\n", False), ("-a = 1\n", False),
    ("print(x) == 1\n", True), ("f(x) == 1\n", True), ("f(x) <= 1\n", True), ("f(x) != 1\n", True),
    ("for x in y: a.b = 1\n", True), ("while x: f()[0] = 1\n", True), ("while x: f() = 1\n", False),
    ("x = y = z\n", True), ("x, y = y, x\n", True), ("(a, [b, *c]) = d\n", True), ("(a, [b, f()]) = d\n", False),
    ("x: int, y = 1\n", False), ("a.b.c: int = f()\n", True), ("a[1:2, ::3] = 4\n", True), ("a.b.c[1:2] = 3\n", True),
    ("def f(x=1, *a, y: int = 2): pass\n", True), ("f(a=1)\n", True), ("@dec(a=1)\ndef f(): pass\n", True),
    ("x = {a: b for a, b in c}\n", True), ("f'{x}' = 1\n", False), ("'a' 'b' = 1\n", False), ("x = *a, *b\n", True),
    ("a[0], b.c, *d = e\n", True), ("[[a, b], (c, *d)] = e\n", True), ("((a)), b = c\n", True), ("() = x\n", True),
    ("[] = x\n", True), ("x = 1 if y else 2\n", True), ("x = yield = 1\n", False), ("await x = 1\n", False),
    ("if x:\n    pass\nelse: f() = 1\n", False), ("if x:\n    pass\nelse: y = 1\n", True),
    ("a = (b\n     ) = 1\n", True), ("a = (f()\n     ) = 1\n", False), ("x \\\n = 1\n", True), ("f() \\\n = 1\n", False),
    ("import a as b, c as d\n", True), ("from a import (b as c, d)\n", True),
]
_NAMES = ["x", "y", "obj", "match", "case", "_", "type", "print"]


def _atom(rng):
    return rng.choice(_NAMES + _NAMES + ["1", "'s'", "None", "True", "...", "f'{x}'"])


def _expression(rng, depth):
    """(text, is_primary): a random expression (a small generator; wrapped in parentheses where needed)."""
    if depth <= 0 or rng.random() < 0.25:
        return _atom(rng), True

    def primary():
        text, is_primary = _expression(rng, depth - 1)
        return text if is_primary else f"({text})"

    def element():
        text, _ = _expression(rng, depth - 1)
        return ("*" + primary()) if rng.random() < 0.2 else text

    kind = rng.choice(["attr", "attr", "subscript", "subscript", "call", "paren", "tuple", "list", "binop", "unary",
                       "lambda", "ternary", "walrus", "compare", "await"])
    if kind == "attr":
        return f"{primary()}.{rng.choice(_NAMES)}", True
    if kind == "subscript":
        return f"{primary()}[{_expression(rng, depth - 1)[0]}]", True
    if kind == "call":
        return f"{primary()}({', '.join(_expression(rng, depth - 1)[0] for _ in range(rng.randrange(3)))})", True
    if kind == "paren":
        return f"({_expression(rng, depth - 1)[0]})", True
    if kind in ("tuple", "list"):
        items = [element() for _ in range(rng.randrange(4))]
        inner = ", ".join(items) + ("," if kind == "tuple" and len(items) == 1 else "")
        return (f"({inner})" if kind == "tuple" else f"[{inner}]"), True
    if kind == "binop":
        return f"{primary()} {rng.choice(['+', '*', '|', '//'])} {primary()}", False
    if kind == "unary":
        return f"{rng.choice(['-', 'not ', '~'])}{primary()}", False
    if kind == "lambda":
        return f"lambda: {primary()}", False
    if kind == "ternary":
        return f"{primary()} if {primary()} else {primary()}", False
    if kind == "walrus":
        return f"({rng.choice(_NAMES)} := {primary()})", True
    if kind == "compare":
        return f"{primary()} < {primary()}", False
    return f"await {primary()}", False


def _target(rng):
    """(text, is a bare tuple): a random target candidate, an expression or a bare tuple of them."""
    if rng.random() < 0.25:
        items = [("*" if rng.random() < 0.25 else "") + _expression(rng, 2)[0] for _ in range(1 + rng.randrange(3))]
        text = ", ".join(items)
        return text + ("," if len(items) == 1 and rng.random() < 0.5 else ""), True
    return _expression(rng, 3)[0], False


# (template, kind of target, the text that ends the target): {} is the target, @ marks where
# the ending text starts (removed from the program).
TEMPLATES = [
    ("{}@ = 1\n", "assign"), ("a = {}@ = 1\n", "assign"), ("{}@ += 1\n", "augassign"), ("{}@: int\n", "annotation"),
    ("{}@: int = 1\n", "annotation"), ("del {}@\n", "del"), ("del {}@, a\n", "del"), ("del a, {}@; b = 1\n", "del"),
    ("with a as {}@: pass\n", "with"), ("with a as b, c as {}@: pass\n", "with"), ("if a: {}@ = 1\n", "assign"),
    ("x = 1; {}@ //= 2\n", "augassign"), ("class A:\n    {}@: int\n", "annotation"), ("def f():\n    {}@ = 1\n", "assign"),
    ("for x in y:\n    del {}@\n", "del"), ("match z:\n    case 1:\n        {}@ = 1\n", "assign"),
    ("x = [1 for {}@ in y]\n", "for"), ("for {}@ in y: pass\n", "for"), ("{}@ = y = 1\n", "assign"),
    ("while a: {}@ += 1\n", "augassign"), ("x = lambda: 0; {}@ = 2\n", "assign"),
]
# The probe a template's target is checked with, standalone (the test's oracle for where to refuse).
_STANDALONE = {"assign": "{} = 1\n", "augassign": "{} += 1\n", "annotation": "{}: int\n", "del": "del {}\n",
               "with": "with a as {}: pass\n", "for": "for {} in y: pass\n"}


def _generated_programs(seed, count):
    """(program, first refused prefix length or None): random targets in the templates."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        template, role = rng.choice(TEMPLATES)
        target, bare = _target(rng)
        if not python_accepts(f"_ = {target}\n") and not python_accepts(f"_ = ({target})\n"):
            continue  # not even an expression: the generator's mistake, not a target question
        if role in ("with", "del") and bare:
            continue  # `del a, f()` has two targets; `with a as b, c:` two items
        cut = template.index("@")
        code = template.replace("@", "").format(target)
        end = cut - 2 + len(target)  # the target's end in `code`
        ender = code[end:].lstrip(" ")
        ender_end = len(code) - len(ender) + (2 if ender.startswith(("+=", "//=", "in")) else 1)
        if ender.startswith("//="):
            ender_end += 1
        if python_accepts(code):
            out.append((code, None))
        elif not python_accepts(_STANDALONE[role].format(target)):
            # Refused at the character that ends the target's ending token; a bare `=` may
            # still become `==` (when that makes a valid program), so then one character later.
            refused = ender_end
            if ender.startswith("=") and python_accepts(code[:ender_end] + "= 1\n"):
                refused += 1
            elif ender.startswith(":") and python_accepts(code[:ender_end] + "\n    case _: pass\n"):
                # `match (x):` / `match + y:` is a match statement's first line: refused after the colon
                refused = len(code) - len(code[ender_end:].lstrip(" ")) + 1
            out.append((code, refused))
    return out


def _prefix_verdicts(checker, code):
    """check's verdict on every character prefix of `code` (one row parser reused, as in decoding)."""
    checker.begin([""])
    row = checker.rows[0]
    return [checker._viable(row, code[:k], b"") for k in range(1, len(code) + 1)]


@pytest.mark.parametrize("code, valid", ASSIGN_CASES)
def test_assignment_cases_agree_with_python(engine, code, valid):
    from densecode.grammar import new_row_parser

    assert python_accepts(code) is valid, code  # the expectation itself is Python's
    assert grammar_accepts(new_row_parser(engine[0], "incremental"), code) is valid, code


def test_enough_assignment_cases():
    assert len(ASSIGN_CASES) >= 80
    assert sum(valid for _, valid in ASSIGN_CASES) >= 30 and sum(not valid for _, valid in ASSIGN_CASES) >= 30


def _check_generated(engine, monkeypatch, seed, count):
    from densecode.grammar import GrammarProcessor, new_row_parser
    from densecode.grammar_parser import IncrementalPythonParser
    from densecode.grammar_targets import TargetRules

    _, tok = engine
    parser = new_row_parser(engine[0], "incremental")
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    programs = _generated_programs(seed, count)

    def first_refused(code):
        verdicts = _prefix_verdicts(checker, code)
        return verdicts.index(False) + 1 if False in verdicts else None

    # Where the grammar alone (no target rules) refuses: `del a < b` is refused at `<` by the
    # grammar itself, before its target ends. The target rules must refuse at the target's end,
    # unless the grammar did earlier.
    with monkeypatch.context() as patch:
        patch.setattr(TargetRules, "role", lambda self, *args: None)
        patch.setattr(IncrementalPythonParser, "_for_target_ok", lambda self, *args: True)
        grammar_only = {code: first_refused(code) for code, refused in programs if refused is not None}
    wrong, late = [], []
    for code, refused in programs:
        if grammar_accepts(parser, code) != (refused is None):
            wrong.append(("verdict", code))
            continue
        first = first_refused(code)
        if refused is None:
            if first is not None:
                wrong.append(("false rejection", code[:first]))
            continue
        want = min(refused, grammar_only[code] or refused)
        if first == want:
            continue
        # One character late, where the grammar lets the ending text grow into another terminal:
        # `a, b:` may become the grammar's unparenthesized walrus `a, b := 1` (Python: only in
        # parentheses), `for a + b, in` may become `for a + b, int in`.
        ender = code[:want].rstrip()
        if first == want + 1 and want == refused and code[want] == " " and ender.endswith((":", "in")):
            late.append(code)
            continue
        wrong.append(("refused at", code[:first] if first else code, "want", code[:want]))
    assert wrong == []
    assert len(late) <= count // 20, late
    valid = sum(refused is None for _, refused in programs)
    assert valid >= count // 5 and count - valid >= count // 5, valid  # both verdicts exercised
    return programs


def test_generated_assignment_programs(engine, monkeypatch):
    """Complete verdicts equal ast.parse; valid programs are viable at every character; invalid ones are
    refused exactly at the token that ends the bad target (a bare `=` one character later: `==`)."""
    _check_generated(engine, monkeypatch, seed=1, count=400)


@pytest.mark.slow
def test_generated_assignment_programs_many(engine, monkeypatch):
    _check_generated(engine, monkeypatch, seed=2, count=3000)


@pytest.mark.parametrize("code, viable", [
    ("f(x) = 1\n", "f(x) ="), ("f(x) =  1\n", "f(x) ="), ("f(x) += 1\n", "f(x) +"), ("f(x): int\n", "f(x)"),
    ("1 = x\n", "1 ="), ("(a, f()) = 1, 2\n", "(a, f()) ="), ("x.y() = 2\n", "x.y() ="), ("a = f() = 1\n", "a = f() ="),
    ("del f()\n", "del f()"), ("del a, f(), b\n", "del a, f()"), ("with a as f(): pass\n", "with a as f()"),
    ("(a, b): int\n", "(a, b)"), ("[a] += 1\n", "[a] +"), ("if x: f() = 1\n", "if x: f() ="),
    ("x = 1; f()[0].y() = 2\n", "x = 1; f()[0].y() ="), ("for len(x) in y: pass\n", "for len(x) i"),
])
def test_check_and_constrain_refuse_the_token_that_ends_a_bad_target(engine, code, viable):
    """BPE tokens: check accepts every token up to the longest viable prefix (`f(x) =` may still become
    `f(x) == 1`) and rejects the token holding the next character; constrain refuses it too (its
    verdict), and its mask leaves it out unless it spans several terminals (those are left to the
    parser check, docs/grammar.md)."""
    from densecode.grammar import GrammarProcessor, check_token_ids

    _, tok = engine
    assert not python_accepts(code) and code.startswith(viable)
    cut = len(viable)  # the first character past the longest viable prefix
    ids = tok(code)["input_ids"]
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    verdicts = check_token_ids(tok, "", ids, mode_processor=checker)
    assert False in verdicts, code
    first = verdicts.index(False)
    before, through = tok.decode(ids[:first]), tok.decode(ids[:first + 1])
    assert len(before) <= cut < len(through), (code, before, through)
    constrainer = GrammarProcessor(tok, "constrain", code_prefix="none")
    constrainer.begin([""])
    for tok_id in ids[:first]:
        assert constrainer.observe([0], [tok_id])[0] is True
    assert constrainer.accepted(0, [ids[first]]) == [False]
    mask = constrainer._accept_mask(constrainer.rows[0], len(tok))
    if not bool(constrainer._spanning()[ids[first]]):
        assert not bool(mask[ids[first]]), (code, before, through)


def test_mask_leaves_out_what_would_end_a_bad_target(engine):
    """After `f(x)` the mask has no ` = ` / ` += ` / `:` token (` =` stays: `f(x) == 1`); after `x` it has them."""
    from densecode.grammar import GrammarProcessor

    _, tok = engine
    constrainer = GrammarProcessor(tok, "constrain", code_prefix="none")
    vocab = len(tok)
    spanning = constrainer._spanning()

    def allowed(code):
        constrainer.begin([""])
        row = constrainer.rows[0]
        row.ids, row.data, row.data_ids = [], code.encode(), 0
        mask = constrainer._accept_mask(row, vocab)
        return {tok.decode([i]) for i in range(vocab) if bool(mask[i]) and not bool(spanning[i])}

    enders = {text for text in (tok.decode([i]) for i in range(vocab)) if text.strip() in ("=", "+=", ":", "-=")}
    assert " =" in enders or "=" in enders
    good, bad = allowed("x"), allowed("f(x)")
    assert enders & good == enders - {t for t in enders if t.startswith(" ") and not t.strip()}
    assert enders & bad <= {" =", "="}, enders & bad
    assert allowed("del f()") & {"\n", ","} == set()
    assert {"\n", ","} & allowed("del f().x") == {"\n", ","} & {tok.decode([i]) for i in range(vocab)}


def test_incremental_parser_agrees_with_a_fresh_parser_on_assignments(engine, reused_parser_agrees):
    """The statement context is kept per snapshot: a reused row parser (with probes it must back out of)
    answers what a fresh parser answers on every prefix."""

    proc, _ = engine
    rng = random.Random(11)
    programs = ["a = f() = 1\nx.y: int = 2\ndel a, b[0]\nwith a as (b, c), d as e.f: pass\n",
                "if x: y += 1\nmatch (z):\n    case 1:\n        w = z\n", "x = lambda a=1: a; (b, [c, *d]) = e\n"]
    programs += [code for code, _ in _generated_programs(5, 6)]
    probes = ["=", " = 1", "(", ")", ":", "+=", ",", "\n", "del ", " as ", "f()", ".x", "lambda:", ";"]
    assert reused_parser_agrees(proc, programs, probes, rng) > 500

