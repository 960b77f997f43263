"""`match` statements and the soft keywords `match`, `case`, `_` (densecode/grammars/python.lark).

Ground truth is CPython's own parser (`ast.parse`): the grammar's verdict on a complete
program must be ast.parse's, on hand-written edge cases and on programs generated at
random (valid ones, mutated ones, token soups); every prefix of a valid program must stay
a viable prefix; constrain's mask must allow every token of a valid program; and the
incremental parser must answer what a fresh parser answers on every prefix.
"""

import random

import pytest

from tests.grammar.helpers import grammar_accepts, python_accepts

# (program, valid?) pairs whose answer is not obvious; the expected verdicts are asserted
# against ast.parse too, so a Python that disagrees shows up as a failing test, not a silent pass.
EDGE_CASES = [
    ("match x:\n    case _.a:\n        pass\n", False),
    ("match x:\n    case _():\n        pass\n", False),
    ("match x:\n    case y as _:\n        pass\n", False),
    ("match x:\n    case {**_}:\n        pass\n", False),
    ("match x:\n    case [*_]:\n        pass\n", True),
    ("match x:\n    case C(_=1):\n        pass\n", True),
    ("match x:\n    case C(a, _=1): pass\n", False),  # `_` after a positional pattern is the wildcard
    ("match x:\n    case C(a, x=1, _=1): pass\n", True),
    ("match x:\n    case C(a=1, b): pass\n", False),
    ("match x:\n    case C(a.b=1): pass\n", False),
    ("match x:\n    case f'a': pass\n", True),
    ("match x:\n    case 'a' 'b': pass\n", True),
    ("match x:\n    case 1+2j: pass\n", True),
    ("match x:\n    case -1-2j: pass\n", True),
    ("match x:\n    case 1 + 1e3j: pass\n", True),
    ("match x:\n    case 1j+2j: pass\n", False),
    ("match x:\n    case 1+2: pass\n", False),
    ("match x:\n    case 1.5 + -2j: pass\n", False),
    ("match x:\n    case +1: pass\n", False),
    ("match x:\n    case -a: pass\n", False),
    ("match x:\n    case ...: pass\n", False),
    ("match x:\n    case not 1: pass\n", False),
    ("match x:\n    case *a: pass\n", False),
    ("match x:\n    case *a, b: pass\n", True),
    ("match x:\n    case a,: pass\n", True),
    ("match x:\n    case {a: 1}: pass\n", False),
    ("match x:\n    case {_: 1}: pass\n", False),
    ("match x:\n    case {a.b: 1, 'k': v, **rest}: pass\n", True),
    ("match x:\n    case {**r, 1: a}: pass\n", False),
    ("match x:\n    case {,}: pass\n", False),
    ("match x:\n    case C(,): pass\n", False),
    ("match x:\n    case (a as b) | c: pass\n", True),
    ("match x:\n    case a as b | c: pass\n", False),
    ("match x:\n    case a as b.c: pass\n", False),
    ("match x:\n    case 1 | 2 as z: pass\n", True),
    ("match x:\n    case a if b else c: pass\n", False),
    ("match x:\n    case 1 if b if c else d: pass\n", True),
    ("match x:\n    case 1 if y := 2: pass\n", True),
    ("match x:\n    case 1, 2 if z: pass\n", True),
    ("match x:\n    case match: pass\n    case case: pass\n", True),
    ("match match:\n    case case if case: pass\n", True),
    ("match *a, b:\n    case _: pass\n", True),
    ("match *a:\n    case _: pass\n", False),
    ("match y := f():\n    case _: pass\n", True),
    ("match lambda: 1:\n    case _: pass\n", True),
    ("match -x:\n    case 1: pass\n", True),
    ("match x: pass\n", False),
    ("match x:\n    pass\n", False),
    ("match x:\ncase 1: pass\n", False),
    ("match x:\n    case 1:\n    pass\n", False),
    ("match x:\n    case 1: pass\n    pass\n", False),
    ("match x:\n    case: pass\n", False),
    ("match:\n    case 1: pass\n", False),
    ("match x:\n    case 1: pass\nelse:\n    pass\n", False),
    ("match x:\n\n    # comment\n    case 1:\n        pass\n", True),
    ("if y:\n    match x:\n        case 1:\n            match z:\n                case 2: pass\n    y = 1\n", True),
    # the soft keywords as plain names
    ("match = re.match(p, s)\ncase = 2\n_ = 3\n", True),
    ("match(x)\nmatch[0]\nmatch.group(1)\nmatch -x\nmatch, case = case, match\n", True),
    ("def match(case, _): return case\nclass case: pass\nimport match\nfrom case import _\n", True),
    ("for _ in range(3):\n    print(match, case, _)\n", True),
    ("match x\n", False),
    ("match x y:\n    case 1: pass\n", False),
]

VALID_PROGRAMS = [
    ("def where(p):\n    match p:\n        case Point(x=0, y=0):\n            return 'origin'\n"
    "        case Point(x=0, y=y) if y > 0:\n            return f'y={y}'\n"
    "        case [1, *rest] | (2, *rest):\n            return rest\n"
    "        case {'k': [a, b], **kw}:\n            return a + b\n"
    "        case Color.RED as c:\n            return c\n"
    "        case -1 | 1.5 | 2j | 1 - 2j | 'a' 'b' | None | True:\n            pass\n"
    "        case _:\n            return None\n"),
    "import re\nmatch = re.match(r'a', 'a')\nif match:\n    case = match.group(0)\n    _ = [case for _ in range(2)]\n",
    "match command.split():\n    case [action]:\n        pass\n    case [action, obj]:\n        pass\n",
]


# ---------------------------------------------------------------- random programs

_LITERALS = ["1", "-1", "0x1F", "1.5", "-2.5", "2j", "-3j", "1+2j", "-1-2j", "1e3j", "'s'", "b'b'", "'a' 'b'",
             "f'f'", "None", "True", "False"]


def _pattern(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(_LITERALS)
    if kind == 1:
        return rng.choice(["x", "y", "rest", "match", "case"])  # capture
    if kind == 2:
        return "_"
    if kind == 3:
        return rng.choice(["Color.RED", "a.b.c", "mod.X"])  # value
    if kind == 4:
        return "(" + _pattern(rng, depth + 1) + ")"
    if kind == 5:
        items = [rng.choice([_pattern(rng, depth + 1), "*" + rng.choice(["r", "_"])]) for _ in range(rng.randrange(4))]
        open_, close = rng.choice([("[", "]"), ("(", ")")])
        trailing = items and (rng.random() < 0.3 or (open_ == "(" and len(items) == 1))
        return open_ + ", ".join(items) + ("," if trailing else "") + close
    if kind == 6:
        items = [f"{rng.choice(_LITERALS[:6] + ['Color.RED', 'None'])}: {_pattern(rng, depth + 1)}"
                 for _ in range(rng.randrange(3))]
        if rng.random() < 0.4:
            items.append("**" + rng.choice(["rest", "kw"]))
        return "{" + ", ".join(items) + ("," if items and rng.random() < 0.3 else "") + "}"
    if kind == 7:
        positional = [_pattern(rng, depth + 1) for _ in range(rng.randrange(3))]
        keywords = [f"{rng.choice(['x', 'y', '_', 'match'])}={_pattern(rng, depth + 1)}" for _ in range(rng.randrange(3))]
        return rng.choice(["Point", "a.B", "C"]) + "(" + ", ".join(positional + keywords) + ")"
    return " | ".join(_pattern(rng, depth + 1) for _ in range(2 + rng.randrange(2)))


def _match_program(rng):
    subject = rng.choice(["x", "x, y", "*a, b", "(x)", "[x]", "match", "-x", "f(x)", "y := f()", "x,"])
    lines = [f"match {subject}:"]
    for _ in range(1 + rng.randrange(3)):
        pattern = _pattern(rng)
        if rng.random() < 0.2:
            pattern += " as " + rng.choice(["z", "match", "case"])
        if rng.random() < 0.15:
            pattern += ", " + _pattern(rng)
        guard = rng.choice(["", "", " if x > 0", " if (z := 1)"])
        if rng.random() < 0.5:
            lines.append(f"    case {pattern}{guard}: pass")
        else:
            lines += [f"    case {pattern}{guard}:", "        y = match(x) + case[0]"]
    return "\n".join(lines) + "\n"


_MUTATIONS = [(" as z", " as _"), ("**rest", "**_"), ("Point(", "_("), ("Color.RED", "_.RED"), ("2j", "2"),
              ("1+2j", "1+2"), (":", ""), ("case ", "case *a"), ("x=", "x.y="), (", ", ", ,"), ("]", ""), ("(", ""),
              ("    case", "case"), ("'s'", "-'s'"), ("None", "..."), ("match ", "match *"), (" pass", "\n    pass"),
              ("-1", "+1"), ("{", "{x: "), ("| ", "| not "), (" if x > 0", " if x > 0 else 1"), ("x=", ""),
              ("match", "matc"), ("(x)", "(x"), (", ", " "), ("_", "__")]


def _mutated_program(rng):
    code = _match_program(rng)
    for _ in range(1 + rng.randrange(2)):
        old, new = rng.choice(_MUTATIONS)
        code = code.replace(old, new, 1)
    if rng.random() < 0.05:
        code += "else:\n    pass\n"
    return code


_PATTERN_SOUP = ["x", "_", "1", "-", "+", "2j", "(", ")", "[", "]", "{", "}", ",", ":", "|", "as", "*", "**", ".", "=",
                 "C", "'s'", "None", "if", "y", "match", "case"]
_STATEMENT_SOUP = ["match", "case", "_", "(", ")", "[", "]", "x", ":", "=", ".", "group", "1", ",", "*", "-", "if", "+"]


def _pattern_soup(rng):
    return "match x:\n    case " + " ".join(rng.choice(_PATTERN_SOUP) for _ in range(1 + rng.randrange(6))) + \
        ":\n        pass\n"


def _statement_soup(rng):
    body = rng.choice(["", "\n    case _: pass", "\n    pass"])
    return " ".join(rng.choice(_STATEMENT_SOUP) for _ in range(1 + rng.randrange(6))) + body + "\n"


GENERATORS = {"match programs": _match_program, "mutated": _mutated_program, "pattern soup": _pattern_soup,
              "statement soup": _statement_soup}


# ---------------------------------------------------------------- tests


def test_edge_cases_agree_with_python(engine):
    from densecode.grammar import new_row_parser

    proc, _ = engine
    parser = new_row_parser(proc, "incremental")
    for code, valid in EDGE_CASES:
        assert python_accepts(code) is valid, ("this Python disagrees with the test's expectation", code)
        assert grammar_accepts(parser, code) is valid, code


@pytest.mark.parametrize("kind", list(GENERATORS))
def test_generated_programs_agree_with_python(engine, kind):
    """A thousand random programs per kind: the grammar's verdict is ast.parse's, both ways."""
    from densecode.grammar import new_row_parser

    proc, _ = engine
    parser = new_row_parser(proc, "incremental")
    rng = random.Random(sorted(GENERATORS).index(kind))
    counts = {True: 0, False: 0}
    disagreements = []
    for _ in range(1000):
        code = GENERATORS[kind](rng)
        want = python_accepts(code)
        counts[want] += 1
        if grammar_accepts(parser, code) != want:
            disagreements.append((want, code))
    assert disagreements == []
    assert counts[True] >= 10, counts  # both verdicts exercised
    assert counts[False] >= 10 or kind == "match programs", counts


def test_valid_programs_are_viable_at_every_token_and_unmasked(engine):
    """check accepts every token of valid programs (soft keywords as names included),
    constrain's mask allows every token, and EOS is allowed at the end."""
    from densecode.grammar import GrammarProcessor

    _, tok = engine
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    vocab = len(tok)
    rng = random.Random(7)
    programs = VALID_PROGRAMS + [code for code, valid in EDGE_CASES if valid]
    while len(programs) < len(VALID_PROGRAMS) + 60:
        code = _match_program(rng)
        if python_accepts(code):
            programs.append(code)
    for code in programs:
        ids = tok(code)["input_ids"]
        checker.begin([""])
        row = checker.rows[0]
        for i, tok_id in enumerate(ids):
            mask = checker._accept_mask(row, vocab)
            assert mask is not None and bool(mask[tok_id]), (code, tok.decode(ids[:i]) + " >>" + tok.decode([tok_id]))
            assert checker.observe([0], [tok_id])[0] is True, (code, tok.decode(ids[:i + 1]))
        assert bool(checker._accept_mask(row, vocab)[tok.eos_token_id]), code


@pytest.mark.parametrize("code, bad_at", [
    ("match x:\n    case y as _:\n        pass\n", "_:"),
    ("match x:\n    case _.a:\n        pass\n", "."),
    ("match x:\n    case C(a=1, b):\n        pass\n", ")"),
    ("match x:\n    case 1 + 2:\n        pass\n", "2:"),
    ("match x:\n    pass\n", "pass"),
    ("match x: pass\n", "pass"),
    ("match x:\n    case 1: pass\n    y = 1\n", "y"),
])
def test_check_flags_malformed_match_statements(engine, code, bad_at):
    """check's first rejected token is at (or just after) the first character that makes the code invalid."""
    from densecode.grammar import GrammarProcessor, check_token_ids

    _, tok = engine
    assert not python_accepts(code)
    checker = GrammarProcessor(tok, "check", code_prefix="none")
    ids = tok(code)["input_ids"]
    verdicts = check_token_ids(tok, "", ids, mode_processor=checker)
    assert False in verdicts, code
    first = verdicts.index(False)
    accepted_text = tok.decode(ids[:first])
    cut = code.index(bad_at, code.index(":"))  # the offending spot, after the first colon
    assert cut <= len(accepted_text) + len(tok.decode(ids[first:first + 1])), (accepted_text, code)
    assert len(accepted_text) <= cut + len(bad_at), (accepted_text, code)


def test_incremental_parser_agrees_with_a_fresh_parser_on_every_prefix(engine, reused_parser_agrees):
    """Reused row parser (as decoding uses it) vs a new parser per prefix, with probes that backtrack."""

    proc, _ = engine
    rng = random.Random(3)
    programs = VALID_PROGRAMS[:2] + [_mutated_program(rng) for _ in range(3)]
    probes = ["(", "_", "match", " case", ":", "\n", "\n    ", "|", " as ", "=", ".", ",", "*", "x"]
    assert reused_parser_agrees(proc, programs, probes, rng) > 1000
