"""`syntax`: +1 per code token while the code is valid, -1 where it first breaks.

Per code region (each fenced block on its own; in completion mode the prompt's
code prefix is prepended so the response parses in context):
- valid, or merely incomplete at the end of a truncated response → +1 on every
  code token;
- invalid → +1 on the code tokens before the first error, `error_value` (-1) on the
  token holding the error position, `after_error_value` (default 0: status unknown)
  on the tokens after it;
- incomplete at the end of a response that was NOT truncated (the model stopped
  with a bracket/string/block still open) → the error sits on the region's last
  code token.
Prose tokens get 0. A response with no code at all (empty, whitespace, comments
or prose only) where code was asked for — the syntax reward only runs where it is —
gets `error_value` on its stop token (the last token, EOS when there is one) and 0
elsewhere; a truncated one gets 0 everywhere.

"Where it first breaks" (`locate="prefix"`, the default) is the first character
after which no continuation can parse: a binary search over prefix lengths with
CPython as the viability oracle (see `_viable`). `locate="cpython"` uses the
position CPython's SyntaxError reports instead, which for some errors is the start
of the offending construct, and for an unterminated string later in the source is
that string (tokenizer errors are reported ahead of earlier parser errors).

Sources: `python` (default) uses CPython's own parser, so valid Python is never
punished (SynCode's grammar rejects docstrings in functions, walrus, match, ...);
`grammar` reads the rollout's SynCode check-mode verdicts (`sample.grammar_verdicts`),
+1 per accepted code token up to the first rejected one.
"""

from __future__ import annotations

import ast
import codeop
import keyword
import warnings

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import (
    ComponentOutput,
    LocatedError,
    RewardComponent,
    check_spread,
    diag,
    spread_score,
)
from densecode.rewards.sample import (
    ProgramMap,
    Sample,
    region_programs,
)

# Messages CPython gives when the source simply stops too early.
_INCOMPLETE_MARKERS = (
    "unexpected eof",
    "was never closed",
    "unterminated triple-quoted string",
    "eof while scanning",
    "eof in multi-line",
)


def _first_error(program: str) -> tuple[int, str, str] | None:
    """CPython's first syntax error: (char offset, message, lower-case raw message) or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
            ast.parse(program)
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: NUL bytes in source
        if not isinstance(exc, SyntaxError):
            # Nested too deeply for CPython to build its tree (`1+1+...` a few thousand times):
            # it can never run; where it started to be too deep, the prefix search finds.
            msg = f"{type(exc).__name__}: {exc}"
            return 0, msg, msg.lower()
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        pos = ProgramMap(program, []).line_col_to_char(line, col)
        msg = exc.msg or "invalid syntax"
        return pos, f"{type(exc).__name__}: {msg}", msg.lower()


_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def parse_error(program: str) -> tuple[int, str, bool] | None:
    """First syntax error of `program`: (char offset, message, incomplete_at_end) or None.

    Incomplete = the text stops too early (open bracket/string/block at the end) but
    nothing before the end is wrong. "'(' was never closed" is CPython's verdict
    whenever a bracket stays open, even if a real error hides inside the brackets
    (`go_to('a'\n say('b')`): the bracket is closed at the end and the program
    re-parsed; an error that then shows up inside the original text is the real one.
    """
    err = _first_error(program)
    if err is None:
        return None
    pos, msg, low = err
    end = len(program.rstrip())
    if "was never closed" in low:
        probe = program
        for _ in range(32):
            opener = low.split("'")[1] if low.count("'") >= 2 else "("
            probe = probe + _CLOSERS.get(opener, ")")
            nxt = _first_error(probe)
            if nxt is None:
                return pos, msg, True
            p2, m2, l2 = nxt
            if "was never closed" in l2:
                low = l2
                continue
            if p2 < end:
                return p2, m2, False
            return pos, msg, True
        return pos, msg, True
    # A one-line string left open on the last line is cut off, not wrong.
    open_string = "unterminated string literal" in low and "\n" not in program[pos:].rstrip("\n")
    at_end = pos >= end
    incomplete = open_string or any(m in low for m in _INCOMPLETE_MARKERS) or (
        # At the end: a block opener waits for its body; anything else is cut off only if
        # no newline has ended the statement yet (`x = 1 +` is cut off, `x = 1 +\n` is wrong).
        at_end and ("expected an indented block" in low or "\n" not in program[pos:])
    )
    return pos, msg, incomplete


def region_has_code(text: str) -> bool:
    """True when `text` holds more than whitespace and comment lines."""
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def has_code(sample: Sample) -> bool:
    """Does the response hold any code (the prompt's own code prefix does not count)?"""
    return any(region_has_code(sample.response[s:e]) for s, e in sample.code_regions)


class SyntaxComponent(RewardComponent):
    name = "syntax"

    def __init__(self, source: str = "python", valid_value: float = 1.0, error_value: float = -1.0,
                 after_error_value: float = 0.0, locate: str = "prefix", spread: str = "each") -> None:
        if source not in ("python", "grammar"):
            raise DensecodeError(f"reward.components.syntax.source must be 'python' or 'grammar'; got {source!r}")
        if locate not in ("prefix", "cpython"):
            raise DensecodeError(f"reward.components.syntax.locate must be 'prefix' or 'cpython'; got {locate!r}")
        # prefix: the first character after which no continuation parses (binary search);
        # cpython: the position CPython's SyntaxError reports.
        self.locate = locate
        # split: valid_value / (code tokens) per accepted token, so a clean response sums to valid_value.
        self.spread = check_spread("syntax", spread)
        self.source = source
        self.valid_value = float(valid_value)
        self.error_value = float(error_value)
        self.after_error_value = float(after_error_value)

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        outs = []
        for s in samples:
            if not has_code(s):
                outs.append(self._no_code(s))
            else:
                outs.append(self._grammar(s) if self.source == "grammar" else self._python(s))
        return outs

    def metrics(self, outputs: list[ComponentOutput]) -> dict[str, float]:
        # A response with a penalised token (an empty output from a task without this component has none).
        return {"rollout/syntax_error_frac": float(np.mean([float(np.any(np.asarray(o.values) < 0)) for o in outputs]))}

    def _no_code(self, sample: Sample) -> ComponentOutput:
        """Code was asked for and none came (empty, whitespace, comments, prose): the stop is the error.

        The stop token (EOS, or the last token when the tokenizer adds none) is where the
        model chose to end without code; every other token gets 0 (whitespace and comments
        are not valid code worth +1). A length cut-off is no decision to stop: all 0.
        """
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        diagnostics = []
        stopped = bool(sample.n_tokens) and not sample.truncated
        if stopped:
            last = sample.n_tokens - 1
            values[last] = self.error_value
            diagnostics.append(diag("syntax-no-code", sample.token_spans[last], [last],
                                    "no code where code was asked for", self.error_value))
        return _verdict(ComponentOutput(values, diagnostics, {"syntax_ok": float(not stopped), "incomplete": 0.0,
                                                              "has_code": 0.0}), ok=not stopped)

    def _fill_region(self, values: np.ndarray, region_tokens: list[int], error_token: int | None) -> None:
        # Regions are disjoint and `values` starts at 0, so adding keeps what an earlier region put on the last
        # token. last: a region that parses is a verdict on the whole region, so its credit goes on the response's
        # last token (spread_score); a region with an error keeps the split credit up to the error.
        if self.spread == "last" and error_token is None and region_tokens:
            spread_score(values, region_tokens, self.valid_value, "last")
            return
        valid = self.valid_value if self.spread == "each" else self.valid_value / max(len(region_tokens), 1)
        for i in region_tokens:
            if error_token is None or i < error_token:
                values[i] += valid
            elif i == error_token:
                values[i] += self.error_value
            else:
                values[i] += self.after_error_value

    def _locate(self, program: str) -> tuple[int, str, bool] | None:
        """(error position, message, incomplete) of `program`, or None when it parses.

        prefix: incomplete iff the whole program is still a viable prefix (only its end
        is missing); otherwise the position is the first character after which no
        continuation parses. cpython: CPython's own verdict and reported position.
        """
        err = parse_error(program)
        if err is None or self.locate == "cpython":
            return err
        _, msg, _ = err
        if _viable(program):
            return len(program.rstrip()), msg, True
        return first_invalid_char(program), msg, False

    def _python(self, sample: Sample) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        diagnostics = []
        ok = True
        incomplete_any = False
        for (program, pmap), (rs, re_) in zip(region_programs(sample), sample.code_regions):
            region_tokens = sample.tokens_in_range(rs, re_) if re_ > rs else []
            err = self._locate(program)
            error_token = None
            if err is not None:
                pos, msg, incomplete = err
                if incomplete:
                    incomplete_any = True
                if incomplete and sample.truncated:
                    err = None
                else:
                    ok = False
                    rpos = pmap.to_response(pos)
                    if not region_tokens:
                        error_token = None
                    elif incomplete or (rpos is None and pos >= pmap.prefix_len):
                        # The code ran out: the last code token ended the program too early.
                        error_token = region_tokens[-1]
                    elif rpos is None:
                        # The prompt's own prefix is broken: the first code token is the earliest we can blame.
                        error_token = region_tokens[0]
                    else:
                        error_token = sample.token_at(rpos)
                        if error_token is None or error_token not in region_tokens:
                            error_token = region_tokens[-1] if region_tokens else None
                    if error_token is not None:
                        span = sample.token_spans[error_token]
                        diagnostics.append(diag("syntax-error" if not incomplete else "syntax-incomplete",
                                                span, [error_token], msg, self.error_value,
                                                program_offset=pos))
            self._fill_region(values, region_tokens, error_token)
        return _verdict(ComponentOutput(values, diagnostics, {"syntax_ok": float(ok), "incomplete": float(incomplete_any),
                                                              "has_code": 1.0}), ok=ok)

    def _grammar(self, sample: Sample) -> ComponentOutput:
        verdicts = sample.grammar_verdicts
        if verdicts is None:
            raise DensecodeError(
                "syntax source 'grammar' needs the rollout's SynCode verdicts (generation.grammar=check); "
                "this sample has none — set reward.components.syntax.source=python or enable grammar checking"
            )
        if len(verdicts) != sample.n_tokens:
            raise DensecodeError(f"sample has {sample.n_tokens} tokens but {len(verdicts)} grammar verdicts")
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        code = sample.code_token_mask()
        code_tokens = [i for i in range(sample.n_tokens) if code[i] and verdicts[i] is not None]
        error_token = next((i for i in code_tokens if verdicts[i] is False), None)
        self._fill_region(values, code_tokens, error_token)
        diagnostics = []
        if error_token is not None:
            diagnostics.append(diag("grammar-reject", sample.token_spans[error_token], [error_token],
                                    "SynCode rejected this token", self.error_value))
        return _verdict(ComponentOutput(values, diagnostics, {"syntax_ok": float(error_token is None), "has_code": 1.0}),
                        ok=error_token is None)


def _verdict(out: ComponentOutput, ok: bool) -> ComponentOutput:
    """The syntax verdict: parses or not (an incomplete program the length limit cut counts as parsing: the cut is
    no error), and every error located on a token."""
    out.parsed = ok
    out.incorrect = not ok
    out.errors = [LocatedError(tuple(d["tokens"]), d["message"]) for d in out.diagnostics
                  if d["tokens"] and d["value"] < 0]
    return out


_KEYWORDS = tuple(keyword.kwlist + keyword.softkwlist)
_OP_CHARS = "=<>!*/-+%&|^@:."  # a trailing one of these may still grow into a longer operator
_LONG_OPS = ("==", "!=", "<=", ">=", "<<", ">>", "**", "//", "->", ":=", "+=", "-=", "*=", "/=", "%=", "&=",
             "|=", "^=", "@=", "<<=", ">>=", "**=", "//=", "...")
_WORD_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_STRING_PREFIXES = {"r", "u", "b", "f", "br", "rb", "fr", "rf"}
_QUOTES = "'\""


def _open_string_replaced(text: str, pos: int) -> str | None:
    """`text` with the unterminated string literal starting at `pos` replaced by an empty one.

    CPython reports an unterminated string (a tokenizer error) ahead of any earlier
    parser error, so a prefix ending inside a string would hide a real error before
    it. A string is one atom to the parser: an empty literal of the same kind
    (prefix letters and quote style kept) parses wherever the open one could end.
    """
    k = pos
    while k < len(text) and text[k] not in _QUOTES:
        k += 1
    if k >= len(text) or k - pos > 2:
        return None
    quote = text[k] * 3 if text.startswith(text[k] * 3, k) else text[k]
    return text[:k] + quote * 2


# codeop's flags: the parser says "incomplete input" when its first pass (before the
# `invalid_*` rules that move the reported position back to the start of a construct)
# failed only because the source ended, i.e. it consumed every token before the end.
_INCOMPLETE_FLAGS = codeop.PyCF_ALLOW_INCOMPLETE_INPUT | codeop.PyCF_DONT_IMPLY_DEDENT | ast.PyCF_ONLY_AST


def _incomplete_input(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<prefix>", "exec", _INCOMPLETE_FLAGS)
    except SyntaxError as exc:
        return exc.msg == "incomplete input"
    except (ValueError, RecursionError, MemoryError):  # NUL bytes; nested too deeply to compile
        return False
    return True


def _viable_plain(text: str, depth: int = 0) -> bool:
    """Is `text`, as it stands, the start of some valid program (no growth of its last token)?"""
    # At the end of the source CPython implies a NEWLINE token, which ends the statement before
    # the parser reaches EOF (`y = a if b` -> "expected 'else'", reported at `a`). A line
    # continuation is a legal way to go on from any position in code; with it, a statement that
    # merely stops early fails only at EOF, which the parser reports as incomplete input.
    continued = text if text.endswith(("\n", "\\")) or not text else text + " \\\n"
    if _incomplete_input(continued) or (continued is not text and _incomplete_input(text)):
        return True
    err = _first_error(text)
    if err is None:
        return True
    pos, _, low = err
    if "unindent does not match" in low or "inconsistent use of tabs" in low:
        # The line's first token fixed its indentation: nothing after it can repair that.
        return False
    if "unterminated" in low and "string" in low and depth < 8:
        replaced = _open_string_replaced(text, pos)
        if replaced is not None:
            return _viable_plain(replaced, depth + 1)
    if "literal" in low and pos >= len(text.rstrip()) - 2 and text[-1:] in _WORD_CHARS and depth < 8:
        # `0x`, `1e`, `1_` at the end: a number literal still being written (a tokenizer error,
        # which would also hide an earlier error): one more digit decides.
        return _viable_plain(text + "1", depth + 1)
    verdict = parse_error(text)
    return verdict is None or verdict[2]


def _viable(prefix: str) -> bool:
    """Could `prefix` still be continued into valid Python?

    As it stands, or after its last lexical token grows: a word into a keyword
    (`[x f` -> `[x for`; CPython blames `x` there: "Perhaps you forgot a comma?"),
    a keyword into a name (`x = in` -> `x = int`), a word into a string prefix
    (`'a' r` -> `'a' r''`), an operator into a longer one (`if x =` -> `if x ==`).
    """
    if _viable_plain(prefix):
        return True
    if not prefix or prefix[-1].isspace():
        return False
    n = len(prefix)
    k = n
    while k > 0 and prefix[k - 1] in _WORD_CHARS:
        k -= 1
    if k < n:
        word = prefix[k:]
        if word.lower() in _STRING_PREFIXES and _viable_plain(prefix + "''"):
            return True
        if keyword.iskeyword(word) and _viable_plain(prefix + "_"):  # `x = in` -> `x = int`
            return True
        return any(_viable_plain(prefix + kw[len(word):]) for kw in _KEYWORDS
                   if kw.startswith(word) and kw != word)
    k = n
    while k > 0 and prefix[k - 1] in _OP_CHARS:
        k -= 1
    if k == n:
        return False
    op = prefix[k:]
    return any(_viable_plain(prefix[:k] + o) for o in _LONG_OPS if o.startswith(op) and o != op)


def first_invalid_char(program: str, lo: int = 0) -> int:
    """Index of the character at which `program` stops being a viable Python prefix.

    Binary search over prefix lengths with CPython as the oracle (~log2(n) parses,
    only for programs that have an error; viability is monotone: once no
    continuation parses, none of a longer prefix does either). More precise than
    the error position CPython reports, which for some errors is the start of the
    offending construct (`if x = 1:` reports `x`; `f('a' 'b'` without a comma
    reports the first string).
    """
    hi = len(program)  # program[:hi] is not viable
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _viable(program[:mid]):
            lo = mid
        else:
            hi = mid
    return hi - 1
