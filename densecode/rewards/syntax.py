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
Prose tokens get 0.

Sources: `python` (default) uses CPython's own parser, so valid Python is never
punished (SynCode's grammar rejects docstrings in functions, walrus, match, ...);
`grammar` reads the rollout's SynCode check-mode verdicts (`sample.grammar_verdicts`),
+1 per accepted code token up to the first rejected one.
"""

from __future__ import annotations

import ast
import warnings

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import ComponentOutput, RewardComponent, diag
from densecode.rewards.sample import ProgramMap, Sample, region_programs

# Messages CPython gives when the source simply stops too early.
_INCOMPLETE_MARKERS = (
    "unexpected eof",
    "was never closed",
    "unterminated triple-quoted string",
    "eof while scanning",
    "eof in multi-line",
)


def parse_error(program: str) -> tuple[int, str, bool] | None:
    """First syntax error of `program`: (char offset, message, incomplete_at_end) or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
            ast.parse(program)
        return None
    except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in source
        if not isinstance(exc, SyntaxError):
            return 0, str(exc), False
        pm = ProgramMap(program, [])
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        pos = pm.line_col_to_char(line, col)
        msg = exc.msg or "invalid syntax"
        low = msg.lower()
        at_end = pos >= len(program.rstrip())
        # A one-line string left open on the last line is cut off, not wrong.
        open_string = "unterminated string literal" in low and "\n" not in program[pos:].rstrip("\n")
        incomplete = open_string or any(m in low for m in _INCOMPLETE_MARKERS) or (
            at_end and ("expected an indented block" in low or "invalid syntax" in low or "expected" in low)
        )
        return pos, f"{type(exc).__name__}: {msg}", incomplete


class SyntaxComponent(RewardComponent):
    name = "syntax"

    def __init__(self, source: str = "python", valid_value: float = 1.0, error_value: float = -1.0,
                 after_error_value: float = 0.0) -> None:
        if source not in ("python", "grammar"):
            raise DensecodeError(f"reward.components.syntax.source must be 'python' or 'grammar'; got {source!r}")
        self.source = source
        self.valid_value = float(valid_value)
        self.error_value = float(error_value)
        self.after_error_value = float(after_error_value)

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        return [self._grammar(s) if self.source == "grammar" else self._python(s) for s in samples]

    def _fill_region(self, values: np.ndarray, region_tokens: list[int], error_token: int | None) -> None:
        for i in region_tokens:
            if error_token is None or i < error_token:
                values[i] = self.valid_value
            elif i == error_token:
                values[i] = self.error_value
            else:
                values[i] = self.after_error_value

    def _python(self, sample: Sample) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        diagnostics = []
        ok = True
        incomplete_any = False
        for (program, pmap), (rs, re_) in zip(region_programs(sample), sample.code_regions):
            region_tokens = sample.tokens_in_range(rs, re_) if re_ > rs else []
            err = parse_error(program)
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
        return ComponentOutput(values, diagnostics, {"syntax_ok": float(ok), "incomplete": float(incomplete_any),
                                                     "has_code": float(bool(sample.code_regions))})

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
        return ComponentOutput(values, diagnostics, {"syntax_ok": float(error_token is None),
                                                     "has_code": float(bool(sample.code_regions))})
