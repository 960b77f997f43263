"""Verdicts on a complete program that the grammar tests compare: Python's parser and the grammar's."""

import ast


def python_accepts(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def grammar_accepts(parser, code: str) -> bool:
    """The grammar's verdict on a complete program: it parses and may end here."""
    parser.reset()
    try:
        result = parser.get_acceptable_next_terminals(code)
    except Exception:  # noqa: BLE001 - ParseFailed, or syncode's lexer on a stray bracket
        return False
    return result.remainder_state.name != "INCOMPLETE" and "$END" in parser.next_ac_terminals
