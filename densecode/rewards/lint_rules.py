"""What each Ruff rule densecode enables means for a program: compilable, runnable, safety or style.

Every rule the default selection enables (Ruff 0.17.6; `lint.DEFAULT_SELECT` minus
`DEFAULT_IGNORE`, stable rules only) is listed by hand below, by what a finding
says about the program, not by its code's prefix:
- compilable: CPython refuses to compile the program although `ast.parse` accepts
  it (`break` outside a loop, `await` outside an async function, `import *` inside
  a function, NUL bytes, ...): it can never run;
- runnable: it compiles, but the flagged line raises (NameError, TypeError from a
  bad format string or dunder return value, ...) or evidently computes something
  else than written (repeated dict keys, always-true asserts on tuples, `is` with
  literals, late-bound loop variables in closures);
- safety: security risks (Ruff's `S` rules, from bandit) and code that hides
  failures (bare `except`, `try`-`except`-`pass`, `return` in `finally`,
  invisible/bidirectional control characters, unchecked subprocesses);
- style: behaviour unchanged (naming, annotations, imports, idioms, complexity,
  pytest conventions, upgrades to newer syntax, unused names, `zip()` without
  `strict=`), including rules that flag a pattern only sometimes wrong without
  checking whether it is here: B006/B039 (a mutable default is a bug only when
  mutated; MBPP 630's `sub=[]` never is), B034 (`re.sub`'s count passed by position
  is legal and, in MBPP 220, meant).
A rule outside this table (a custom `select`) falls back to Ruff's own category
(`ruff rule --all`): correctness -> runnable, security -> safety, anything else -> style.

`python -m densecode.rewards.lint_rules` prints the rule-by-rule table of docs/rewards.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache

from densecode.errors import DensecodeError

CATEGORIES = ("compilable", "runnable", "safety", "style")

_TABLE = {
    "compilable": """
        E902 F404 F406 F407 F621 F622 F701 F702 F704 F706 F707 PLE0115 PLE0117 PLE0118 PLE1132 PLE1142
        PLE1700 PLE2514""",
    "runnable": """
        B002 B003 B005 B015 B016 B020 B022 B023 B029 B030 B031 B032 B035
        F402 F501 F502 F503 F505 F506 F507 F508 F509 F521 F524 F525 F601 F602 F631 F632 F633 F634 F821 F822
        F823 F901
        PLC0131 PLE0100 PLE0101 PLE0237 PLE0241 PLE0302 PLE0303 PLE0304 PLE0305 PLE0307 PLE0308 PLE0309
        PLE0604 PLE0605 PLE0643 PLE0704 PLE1205 PLE1206 PLE1300 PLE1307 PLE1310 PLE1507 PLE1519 PLE1520
        PLR0124 PLR0206 PLR1708 PLW0128 PLW0129 PLW0133 PLW0177 PLW0245 PLW0711 PLW1501 PLW1507 PLW1508
        PLW2101 PT010""",
    "safety": """
        S101 S102 S103 S104 S105 S106 S107 S108 S110 S112 S113 S201 S202 S301 S302 S303 S304 S305 S306 S307
        S308 S310 S311 S312 S313 S314 S315 S316 S317 S318 S319 S321 S323 S324 S501 S502 S503 S504 S505 S506
        S507 S508 S509 S601 S602 S603 S604 S605 S606 S607 S608 S609 S610 S611 S612 S701 S702 S704
        E722 B012 PLE2502 PLE2510 PLE2512 PLE2513 PLE2515 PLW1509 PLW1510""",
    "style": """
        ANN001 ANN002 ANN003 ANN201 ANN202 ANN204 ANN205 ANN206 ANN401
        B004 B006 B007 B008 B009 B010 B011 B013 B014 B017 B018 B019 B021 B024 B025 B026 B027 B028 B033 B034
        B039 B904 B905 B911 B912
        C400 C401 C402 C403 C404 C405 C406 C408 C409 C410 C411 C413 C414 C415 C416 C417 C418 C419 C420 C901
        E101 E401 E402 E701 E702 E703 E711 E712 E713 E714 E721 E731 E741 E742 E743
        F401 F403 F405 F504 F522 F523 F541 F722 F811 F841 F842
        I001 I002
        N801 N802 N803 N804 N805 N806 N807 N811 N812 N813 N814 N815 N816 N817 N818 N999
        PLC0105 PLC0132 PLC0205 PLC0206 PLC0207 PLC0208 PLC0414 PLC0415 PLC1802 PLC2401 PLC2403 PLC3002
        PLE0116
        PLR0133 PLR0402 PLR0911 PLR0912 PLR0913 PLR0915 PLR0917 PLR1704 PLR1711 PLR1714 PLR1716 PLR1722
        PLR1730 PLR1733 PLR1736 PLR2004 PLR2044 PLR5501
        PLW0108 PLW0120 PLW0127 PLW0131 PLW0211 PLW0406 PLW0602 PLW0603 PLW0604 PLW0642 PLW1641 PLW2901
        PLW3301
        PT001 PT002 PT003 PT006 PT007 PT008 PT009 PT011 PT012 PT013 PT014 PT015 PT016 PT017 PT018 PT019 PT020
        PT021 PT022 PT023 PT024 PT025 PT026 PT027 PT028 PT030 PT031
        TID251 TID252 TID253 TID254 TID255
        UP001 UP003 UP004 UP005 UP006 UP007 UP008 UP009 UP010 UP011 UP012 UP013 UP014 UP015 UP017 UP018 UP019
        UP020 UP021 UP022 UP023 UP024 UP025 UP026 UP028 UP029 UP030 UP031 UP032 UP033 UP034 UP035 UP036 UP037
        UP039 UP040 UP041 UP042 UP043 UP044 UP045 UP046 UP047 UP049 UP050
        W191 W291 W292 W293 W505 W605""",
}
RULE_CATEGORIES: dict[str, str] = {code: cat for cat, codes in _TABLE.items() for code in codes.split()}

# Ruff's own rule categories -> densecode's, for rules outside the table.
_RUFF_CATEGORY = {"correctness": "runnable", "security": "safety"}


@lru_cache(maxsize=1)
def ruff_binary() -> str:
    """The Ruff executable (the lint reward runs it; `ruff_rules` asks it for its rule table)."""
    try:
        from ruff.__main__ import find_ruff_bin

        return os.fsdecode(find_ruff_bin())
    except Exception as exc:  # noqa: BLE001 - any failure means no usable ruff
        raise DensecodeError(f"the lint reward needs Ruff: install it with `pip install ruff==0.17.6` ({exc})") from None


@lru_cache(maxsize=1)
def ruff_rules() -> dict[str, dict]:
    """Ruff's description of every rule it knows (`ruff rule --all`), by code."""
    out = subprocess.run([ruff_binary(), "rule", "--all", "--output-format", "json"], capture_output=True,
                         text=True, check=True, timeout=60)
    return {r["code"]: r for r in json.loads(out.stdout)}


def category_of(code: str) -> str:
    """densecode's category of Ruff rule `code` (the table; Ruff's own category for other rules)."""
    cat = RULE_CATEGORIES.get(code)
    if cat is not None:
        return cat
    try:
        ruff_cat = ruff_rules().get(code, {}).get("category")
    except Exception:  # noqa: BLE001 - no Ruff to ask: the mildest category
        ruff_cat = None
    return _RUFF_CATEGORY.get(ruff_cat, "style")


def markdown_table() -> str:
    """The rule-by-rule table: code, Ruff's name and category, densecode's category."""
    rules = ruff_rules()
    lines = ["| rule | name | Ruff's category | densecode category |", "|---|---|---|---|"]
    for code in sorted(RULE_CATEGORIES, key=lambda c: (CATEGORIES.index(RULE_CATEGORIES[c]), c)):
        r = rules.get(code, {})
        lines.append(f"| {code} | {r.get('name', '?')} | {r.get('category', '?')} | {RULE_CATEGORIES[code]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
