"""SynCode in the decoding loop: Python grammar verdicts (`check`) or masks (`constrain`).

Built on syncode 0.4.16's `SyncodeLogitsProcessor(Grammar, tokenizer,
mode="grammar_mask", parse_output_only=True)`, used as a provider of objects
(its LALR parser, its DFA mask store, its byte tokenizer); densecode drives them
itself, one incremental parser per batch row, and handles what syncode does not:

- Grammar gaps: syncode's python.lark rejects valid Python (docstrings inside
  functions, escaped quotes in strings, walrus, `except*`, positional-only `/`,
  binary/imaginary/underscored numbers, `rb''`). densecode passes a corrected copy,
  `densecode/grammars/python.lark` (keeping the grammar name "python" so syncode's
  Python indenter and terminal simplifications still apply).
- EOS: syncode always rejects it for Python. Here EOS is allowed exactly when the
  code so far is complete per Python's own parser (`ast.parse`).
- Parser failures: syncode logs "Parsing failed! Falling back to unconstrained
  decoding" and silently stops constraining the whole batch. Here a failing row is
  counted (`Generation.grammar_fallbacks`), decodes unconstrained with verdicts
  None from there on, and the other rows keep their grammar.
- Per-token cost growing with length: syncode deep-copies the partial parse tree
  and the lexer-token list several times per step (and once per candidate terminal
  in `accepts()`). `FastPythonParser` keeps no tree (no callbacks) and copies parser
  states and token lists shallowly, so a step costs a re-lex plus a few table lookups.
- Mask-store cache collisions and syncode's logging: densecode/grammar_syncode.py
  (where the processor is built and cached per tokenizer).

The parser sees the code prefix from the prompt, not only the completion: with
`code_prefix="auto"` the whole prompt when it parses as a Python prefix (completion
prompts such as `# Instruction: ...\\ndef task_program():\\n`), else the text after
the prompt's last opening code fence, else nothing.
"""

from __future__ import annotations

import ast
import copy
import logging
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

import torch

from densecode.errors import DensecodeError

# syncode's objects live in grammar_syncode; these names are also this module's (the import path users know).
from densecode.grammar_syncode import (  # noqa: F401
    CORRECTED_GRAMMAR,
    GRAMMAR_DIR,
    _cache_fsm_states,
    cache_root,
    clear_processor_cache,
    import_syncode,
    load_grammar,
    syncode_cache_dir,
    syncode_parse_failures,
    syncode_processor,
    tokenizer_fingerprint,
)

logger = logging.getLogger(__name__)

MODES = ("off", "check", "constrain")
# At a line start: blank lines, comments, whitespace (it may stay a blank line), and tokens
# that carry the line's indentation together with code (" return" for one-space indents);
# whether that indentation is legal is left to the parser check every sampled token gets.
_BLANK_OR_COMMENT = re.compile(r"[ \t]*(\r?\n[ \t]*)+|[ \t]*#[^\r\n]*|[ \t]+[^ \t\r\n].*|[ \t]+", re.DOTALL)
_WHITESPACE_WITH_NEWLINE = re.compile(r"[ \t]*(\r?\n[ \t]*)+")
_STRING_PREFIXES = {"r", "u", "b", "f", "br", "rb", "fr", "rf"}
_FENCES = ("```python\n", "```py\n", "```Python\n", "```\n")
# Parser states kept per row: the lookup only ever needs the last few lexer tokens,
# older ones just cost memory (a miss re-parses from the start, which is correct).
_MAX_STORED_STATES = 512



# ------------------------------------------------------------------ fast parser


def _fast_parser_class():
    import_syncode()
    from syncode.larkm.parsers.lalr_parser_state import ParserState
    from syncode.parsers.python_parser import PythonIncrementalParser

    class ShallowParserState(ParserState):
        """Copies share values: with no callbacks the value stack holds no tree to protect."""

        __slots__ = ()

        def __copy__(self):
            return type(self)(self.parse_conf, self.lexer, list(self.state_stack), list(self.value_stack))

    class FastPythonParser(PythonIncrementalParser):
        """syncode's incremental Python parser without per-step deep copies."""

        def _set_initial_parser_state(self):
            super()._set_initial_parser_state()
            state = self.interactive.parser_state
            conf = copy.copy(state.parse_conf)
            conf.callbacks = {}  # build no parse tree: only acceptance matters here
            self.interactive.parser_state = ShallowParserState(conf, state.lexer, state.state_stack,
                                                               state.value_stack)
            self.next_ac_terminals = self._accepts(self.interactive)

        def _accepts(self, interactive):
            # The terminals an LALR parser accepts depend only on its state stack; syncode
            # recomputes them by trial-feeding every terminal to a parser copy, each step.
            key = tuple(interactive.parser_state.state_stack)
            cache = self.base_parser.__dict__.setdefault("_densecode_accepts", {})
            found = cache.get(key)
            if found is None:
                if len(cache) > 200_000:
                    cache.clear()
                found = cache[key] = frozenset(interactive.accepts())
            return set(found)

        def _store_parser_state(self, pos, lexer_tokens, parser_state, accepts, indent_levels=None):
            cur_ac_terminals = self.next_ac_terminals
            key = self._get_hash(lexer_tokens[:pos + 1])
            store = self.cur_pos_to_parser_state
            store[key] = (tuple(self.parsed_lexer_tokens), parser_state.copy(), cur_ac_terminals, accepts,
                          indent_levels, tuple(self.dedent_queue))
            if len(store) > _MAX_STORED_STATES:
                del store[next(iter(store))]
            self.cur_ac_terminals = set(cur_ac_terminals)
            self.next_ac_terminals = set(accepts)

        def _restore_parser_state(self, key):
            tokens, parser_state, cur_ac, next_ac, indent_levels, dedent_queue = self.cur_pos_to_parser_state[key]
            self.interactive.parser_state = parser_state.copy()
            self.parsed_lexer_tokens = list(tokens)
            self.dedent_queue = list(dedent_queue)
            self.cur_ac_terminals = set(cur_ac)
            self.next_ac_terminals = set(next_ac)
            if indent_levels is not None:
                self.indent_level = list(indent_levels)

    return FastPythonParser


PARSERS = ("incremental", "fast", "syncode")


def new_row_parser(processor, fast: bool | str = True):
    """A fresh incremental parser sharing `processor`'s compiled LALR tables.

    `fast`: "incremental" (densecode.grammar_parser: flat cost per token), "fast"
    (syncode's parser without its deep copies: re-lexes the whole code each step),
    "syncode" (as shipped). True/False mean "incremental"/"syncode".
    """
    kind = {True: "incremental", False: "syncode"}.get(fast, fast)
    if kind not in PARSERS:
        raise DensecodeError(f"grammar parser must be one of {', '.join(PARSERS)}; got {fast!r}")
    engine = processor.grammar_engine
    base = engine.inc_parser.base_parser
    if kind == "incremental":
        from densecode.grammar_parser import IncrementalPythonParser

        return IncrementalPythonParser(base, ignore_whitespace=engine._ignore_whitespace)
    if kind == "syncode":
        from syncode.parsers.python_parser import PythonIncrementalParser

        parser = PythonIncrementalParser(base, base.lexer_conf.postlex, ignore_whitespace=engine._ignore_whitespace)
    else:
        parser = _fast_parser_class()(base, base.lexer_conf.postlex, ignore_whitespace=engine._ignore_whitespace)
    parser.reset()
    return parser


def _last_parsed_token(parser):
    last = getattr(parser, "last_parsed", None)
    if last is not None or not hasattr(parser, "parsed_lexer_tokens"):
        return last
    return parser.parsed_lexer_tokens[-1] if parser.parsed_lexer_tokens else None


def _paren_level(parser) -> int:
    if hasattr(parser, "paren_level"):
        return parser.paren_level
    return getattr(parser.base_parser.lexer_conf.postlex, "paren_level", 0)


def split_utf8(data: bytes) -> tuple[str, bytes]:
    """(longest valid UTF-8 prefix as text, the bytes after it): syncode's `_bytes_to_string`,
    without its byte-by-byte retry loop (quadratic on a long tail)."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as exc:
        return data[:exc.start].decode("utf-8"), data[exc.start:]


def code_is_complete(code: str) -> bool:
    """Python's own verdict: does `code` parse as a whole module?"""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning "invalid decimal literal"
            ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    return True


# ------------------------------------------------------------------ per-row state


class _RowState:
    __slots__ = ("checked", "data", "data_ids", "failed", "fallbacks", "had_error", "ids", "mask", "parser", "prefix")

    def __init__(self, parser, prefix: str):
        self.parser = parser
        self.prefix = prefix
        self.ids: list[int] = []
        self.data = b""  # the completion's bytes so far (kept, not re-decoded each step)
        self.data_ids = 0  # how many of `ids` `data` holds
        self.failed = False
        self.fallbacks = 0
        self.mask: torch.Tensor | None = None  # accept mask for the next token (None: unchecked)
        self.had_error = False
        self.checked: dict[int, bool] = {}


CONSTRAIN_BY = ("check_first", "mask")



class GrammarProcessor:
    """Per-row SynCode verdicts/masks for densecode's decoding loop.

    `begin(prompts)` once per batch, then per step `process(alive, logits)` before
    sampling, `reject(alive, tokens)` (constrain) and `observe(alive, tokens)` after;
    `end()` returns fallbacks per row. `alive` lists the batch rows (indices into
    `prompts`) that are still decoding.

    constrain_by (constrain mode): "check_first" samples first and computes syncode's
    mask only for rows whose sampled token the parser rejects (`masks`); "mask"
    masks every row's logits every step (`process`), SynCode's own way.
    """

    def __init__(self, tokenizer, mode: str = "check", *, code_prefix: str = "auto",
                 grammar_file: str | Path | None = None, corrected_grammar: bool = True,
                 fast_parser: bool | str = True, indent: bool = True, syncode_fixes: bool = True,
                 constrain_by: str = "check_first", stats: dict | None = None,
                 eos_ids: list[int] | set[int] | None = None):
        if mode not in ("check", "constrain"):
            raise DensecodeError(f"grammar mode must be check or constrain here; got {mode!r}")
        if code_prefix not in ("auto", "prompt", "none"):
            raise DensecodeError(f"code_prefix must be auto, prompt or none; got {code_prefix!r}")
        if constrain_by not in CONSTRAIN_BY:
            raise DensecodeError(f"constrain_by must be one of {', '.join(CONSTRAIN_BY)}; got {constrain_by!r}")
        self.tokenizer = tokenizer
        self.mode = mode
        self.code_prefix = code_prefix
        self.fast_parser = fast_parser
        self.constrain_by = constrain_by
        # Optional: densecode.generation adds the CPU seconds its grammar work takes under stats["cpu_s"].
        self.stats = stats
        # False = syncode's behaviour as shipped (for before/after measurements).
        self.syncode_fixes = syncode_fixes
        self.processor = syncode_processor(tokenizer, load_grammar(grammar_file, corrected=corrected_grammar), indent)
        engine = self.processor.grammar_engine
        self.mask_store = engine.dfa_mask_store
        _cache_fsm_states(self.mask_store._fsms)
        self.byte_tokenizer = self.processor.byte_tokenizer
        # Every id that ends a response (a chat model's end-of-turn token besides its EOS: the sampler's
        # eos_token_ids); the tokenizer's EOS alone when the caller does not say.
        self.eos_ids = sorted(set(eos_ids) if eos_ids else {i for i in [tokenizer.eos_token_id] if i is not None})
        self.rows: list[_RowState] = []
        # Shared by every GrammarProcessor of this (tokenizer, grammar): a training run makes
        # one per rollout, and these only depend on the tokenizer and the grammar.
        shared = self.processor.__dict__.setdefault("_densecode_shared_caches", ({}, {}))
        self._token_bytes: dict[int, bytes] = shared[0]
        self._fsm_terminals: dict[bytes, frozenset] = shared[1]
        if mode == "constrain" and syncode_fixes:
            # Per-tokenizer token sets the masks add (each lexes the whole vocabulary once):
            # built with the processor, not inside the first generation that needs a mask.
            self._spanning()
            self._harmless("line_start")
            self._harmless("in_brackets")

    @property
    def masks_every_step(self) -> bool:
        return self.mode == "constrain" and self.constrain_by == "mask"

    # -- prefix and parsing

    def parse(self, parser, code: str, remainder: bytes = b""):
        """syncode's ParseResult for `code` (raises when the parser fails).

        One fix on top of syncode: a string prefix typed before its quote (`r"`,
        `f'`, `b"`) is lexed by syncode as a NAME followed by an unlexable quote, so
        the string terminal is never offered. Here the prefix joins the remainder
        and the accepted terminals are those at the prefix's start.
        """
        from syncode.parse_result import ParseResult, RemainderState

        result = parser.get_acceptable_next_terminals(code)
        last = _last_parsed_token(parser)
        if (self.syncode_fixes and result.remainder_state == RemainderState.INCOMPLETE
                and result.remainder[:1] in ("'", '"')
                and last is not None and last.type == "NAME" and last.lower() in _STRING_PREFIXES
                and code.endswith(last + result.remainder)):
            start = len(code) - len(result.remainder) - len(last)
            before = parser.get_acceptable_next_terminals(code[:start])
            text = str(last) + result.remainder
            if before.remainder_state == RemainderState.COMPLETE:
                result = ParseResult(before.accept_sequences, text, RemainderState.INCOMPLETE)
            else:  # code[:start] ends in a complete token, e.g. "(": what may follow it
                result = ParseResult.from_accept_terminals(
                    set(parser.next_ac_terminals), set(), text, RemainderState.INCOMPLETE,
                    ignore_terminals=parser.base_parser.lexer_conf.ignore)
        if remainder:
            result.remainder_state = RemainderState.INCOMPLETE
            result.remainder = result.remainder.encode("utf-8") + remainder
        else:
            result.remainder = result.remainder.encode("utf-8")
        return result

    def _is_valid_prefix(self, result) -> bool:
        """syncode's `mask_store.is_valid_prefix`, with the remainder's DFA terminals cached."""
        terminals = self._fsm_terminals.get(result.remainder)
        if terminals is None:
            terminals = frozenset(s.terminal for s in self.mask_store._fsms.compute_fsm_states(result.remainder))
            if len(self._fsm_terminals) > 100_000:
                self._fsm_terminals.clear()
            self._fsm_terminals[result.remainder] = terminals
        firsts = getattr(result, "first_terminals", None)
        if firsts is None:
            firsts = {seq[0] for seq in result.accept_sequences}
        return not terminals.isdisjoint(firsts)

    def _data(self, row: _RowState) -> bytes:
        if row.data_ids != len(row.ids):  # ids set from outside (tests, benchmarks)
            row.data = self.byte_tokenizer.decode(row.ids, skip_special_tokens=True)
            row.data_ids = len(row.ids)
        return row.data

    def token_is_valid(self, row: _RowState, token_id: int) -> bool:
        """syncode's own `is_valid` test of one token: is code + token a viable prefix?"""
        code, remainder = split_utf8(self._data(row) + self._bytes_of(token_id))
        code = row.prefix + code
        if self._viable(row, code, remainder):
            return True
        if self.syncode_fixes and not remainder:
            # Whitespace after the last line break can still become a blank line, whatever
            # its depth; syncode reads it as the next line's indentation and rejects a
            # deeper one (a whitespace-only line indented past its block, as in MBPP).
            head, newline, tail = code.rpartition("\n")
            if newline and tail and not tail.strip(" \t"):
                return self._viable(row, head + newline, b"")
        return False

    def _viable(self, row: _RowState, code: str, remainder: bytes) -> bool:
        try:
            result = self.parse(row.parser, code, remainder)
        except Exception:  # noqa: BLE001 - any syncode parser error means: not a viable prefix
            return False
        return self._is_valid_prefix(result)

    def _bytes_of(self, token_id: int) -> bytes:
        found = self._token_bytes.get(token_id)
        if found is None:
            found = self._token_bytes[token_id] = self.byte_tokenizer.decode([token_id], skip_special_tokens=True)
        return found

    def _choose_prefix(self, prompt: str) -> tuple[object, str]:
        candidates = []
        if self.code_prefix in ("auto", "prompt"):
            candidates.append(prompt)
        if self.code_prefix == "auto":
            cut = max((prompt.rfind(f) + len(f) for f in _FENCES if f in prompt), default=-1)
            if cut >= 0:
                candidates.append(prompt[cut:])
            candidates.append("")
        if self.code_prefix == "none":
            candidates.append("")
        for index, prefix in enumerate(candidates):
            parser = new_row_parser(self.processor, self.fast_parser)
            try:
                parser.get_acceptable_next_terminals(prefix)
                return parser, prefix
            except Exception:  # noqa: BLE001 - syncode's parser raises several types
                if self.code_prefix == "prompt" or index == len(candidates) - 1:
                    break
        return None, prompt

    def begin(self, prompts: list[str]) -> None:
        self.rows = []
        by_prompt: dict[str, tuple] = {}
        for prompt in prompts:
            if prompt not in by_prompt:
                by_prompt[prompt] = self._choose_prefix(prompt)
            parser, prefix = by_prompt[prompt]
            row = _RowState(new_row_parser(self.processor, self.fast_parser) if parser is not None else None, prefix)
            if parser is None:  # the prompt's code cannot be parsed at all
                row.failed, row.fallbacks = True, 1
            self.rows.append(row)

    def code(self, row: _RowState) -> tuple[str, bytes]:
        text, remainder = split_utf8(self._data(row))
        return row.prefix + text, remainder

    def _accept_mask(self, row: _RowState, vocab: int) -> torch.Tensor | None:
        """Which next tokens the grammar accepts for this row; None once its parser failed."""
        if row.failed:
            return None
        code, remainder = self.code(row)
        try:
            result = self.parse(row.parser, code, remainder)
        except Exception as exc:  # noqa: BLE001 - syncode's parser raising = syncode's "Parsing failed!"
            row.failed = True
            if not row.had_error:  # a failure after grammar-accepted tokens is a real fallback
                row.fallbacks += 1
                logger.debug("grammar parser failed (%s) on %r", type(exc).__name__, code[-200:])
            return None
        mask = self.mask_store.get_accept_mask(result)
        if self.syncode_fixes and not remainder:
            # syncode's masks miss tokens that are fine: blank lines, comments and
            # indentation+code tokens at the start of a line (its indentation mask wants
            # pure indentation there), and line breaks inside brackets (its lexer drops
            # those newlines).
            stripped = code.rstrip(" \t")
            if not stripped or stripped.endswith("\n"):
                mask = mask | self._harmless("line_start")
            elif _paren_level(row.parser) > 0:
                mask = mask | self._harmless("in_brackets")
        if self.syncode_fixes:
            # syncode's mask looks at most one terminal ahead of the remainder (none after
            # whitespace), so it blocks tokens that span two terminals (`("` after
            # `return `, `()`, `__(`) and line continuations. They stay candidates here;
            # the parser check every drawn token gets decides (docs/grammar.md).
            mask = mask | self._spanning()
        if mask.shape[0] < vocab:
            mask = torch.cat([mask, torch.zeros(vocab - mask.shape[0], dtype=torch.bool)])
        elif mask.shape[0] > vocab:
            mask = mask[:vocab]
        if self.eos_ids and self.syncode_fixes:
            mask[self.eos_ids] = self._eos_ok(row)
        if not bool(mask.any()):
            # A dead end: the mask store and the parser disagree and no token is
            # acceptable. syncode then stops masking; so does this row, counted.
            row.failed = True
            if not row.had_error:
                row.fallbacks += 1
                logger.debug("no acceptable token after %r (%r)", code[-200:], result)
            return None
        return mask

    def _eos_ok(self, row: _RowState) -> bool:
        """EOS is allowed exactly when the code so far parses as a whole module (`ast`)."""
        code, remainder = self.code(row)
        return not remainder and code_is_complete(code)

    def _spanning(self) -> torch.Tensor:
        """Tokens whose text is more than one lexer terminal, or holds a backslash (cached)."""
        cache = self.processor.__dict__.setdefault("_densecode_harmless", {})
        if "spanning" not in cache:
            from densecode.grammar_parser import IncrementalPythonParser, ParseFailed

            base = self.processor.grammar_engine.inc_parser.base_parser
            size = len(self.mask_store._vocab) if hasattr(self.mask_store, "_vocab") else len(self.tokenizer)
            flags = []
            parser = IncrementalPythonParser(base)
            for i in range(size):
                text = self.tokenizer.decode([i])
                parser.reset()
                try:
                    parser._lex(text)
                except ParseFailed:  # e.g. a lone closing bracket
                    flags.append(True)
                    continue
                terminals = sum(t.type not in ("_INDENT", "_DEDENT") for t in parser.post)
                terminals += bool(parser.lexing_incomplete and text[parser.lexer_pos:].strip(" "))
                flags.append(terminals >= 2 or "\\" in text)
            cache["spanning"] = torch.tensor(flags, dtype=torch.bool)
        return cache["spanning"]

    def _harmless(self, kind: str) -> torch.Tensor:
        """Tokens that cannot break code at a line start / inside brackets (cached)."""
        cache = self.processor.__dict__.setdefault("_densecode_harmless", {})
        if kind not in cache:
            size = len(self.mask_store._vocab) if hasattr(self.mask_store, "_vocab") else len(self.tokenizer)
            texts = [self.tokenizer.decode([i]) for i in range(size)]
            if kind == "line_start":
                pattern = _BLANK_OR_COMMENT
            else:
                pattern = _WHITESPACE_WITH_NEWLINE
            cache[kind] = torch.tensor([bool(pattern.fullmatch(t)) for t in texts], dtype=torch.bool)
        return cache[kind]

    # -- decoding-loop hooks

    def process(self, alive: list[int], logits: torch.Tensor) -> torch.Tensor:
        """constrain_by="mask": mask each live row's logits with syncode's accept mask (EOS per `ast`)."""
        if not self.masks_every_step:
            return logits
        vocab = logits.shape[-1]
        for b, r in enumerate(alive):
            row = self.rows[r]
            row.mask = self._accept_mask(row, vocab)
            row.checked = {}
            if row.mask is not None:
                logits[b] = logits[b].masked_fill(~row.mask.to(logits.device), float("-inf"))
        return logits

    def masks(self, alive: list[int], positions: list[int], vocab: int) -> list[torch.Tensor | None]:
        """check_first: syncode's accept mask for batch positions `positions` (None: row fell back)."""
        out = []
        for b in positions:
            row = self.rows[alive[b]]
            if row.mask is None:
                row.mask = self._accept_mask(row, vocab)
            out.append(row.mask)
        return out

    def _verify(self, row: _RowState, tok: int) -> bool | None:
        """The parser's verdict on appending `tok` (cached per step); None when unchecked."""
        if row.failed or row.had_error:
            return None
        if tok not in row.checked:
            if tok in self.eos_ids:
                if self.syncode_fixes or row.mask is None:
                    ok = self._eos_ok(row)
                else:
                    ok = bool(row.mask[tok])
            else:
                ok = self.token_is_valid(row, tok)
            row.checked[tok] = ok
        return row.checked[tok]

    def accepted(self, row_index: int, candidates: list[int]) -> list[bool]:
        """The parser's verdict on each candidate next token of row `row_index` (this step)."""
        row = self.rows[row_index]
        return [self._verify(row, tok) is not False for tok in candidates]

    def reject(self, alive: list[int], tokens: list[int]) -> list[int]:
        """constrain: batch positions whose sampled token the parser rejects.

        syncode's mask over-approximates (e.g. it lets "J" follow the keyword "in",
        a dead end); the sampler masks such a token and draws again.
        """
        return [b for b, (r, tok) in enumerate(zip(alive, tokens)) if self._verify(self.rows[r], tok) is False]

    def observe(self, alive: list[int], tokens: list[int]) -> list[bool | None]:
        """The verdict for each emitted token, then append it to the row's code.

        check: syncode's `is_valid` (is code + token a viable prefix?); after a row's
        first rejected token its code is no longer a valid prefix and later tokens
        get None. constrain: True unless the row fell back (None) or every resample
        was rejected (False).
        """
        verdicts = []
        for r, tok in zip(alive, tokens):
            row = self.rows[r]
            if self.mode == "constrain" and (row.failed or (self.masks_every_step and row.mask is None)):
                verdict = None
            else:
                verdict = self._verify(row, tok)
            if verdict is False:
                row.had_error = True
            verdicts.append(verdict)
            row.data = self._data(row) + self._bytes_of(tok)
            row.ids.append(tok)
            row.data_ids = len(row.ids)
            row.checked = {}
            row.mask = None
        return verdicts

    def end(self) -> list[int]:
        return [row.fallbacks for row in self.rows]


def check_token_ids(tokenizer, prefix: str, token_ids: Iterable[int], *, mode_processor: GrammarProcessor | None = None,
                    ) -> list[bool | None]:
    """Teacher-forced verdicts: was each token of `token_ids` accepted after `prefix`?

    The same verdict `check` mode records while sampling, for tokens produced
    elsewhere (e.g. by another generator or a dataset).
    """
    processor = mode_processor or GrammarProcessor(tokenizer, "check")
    processor.begin([prefix])
    return [processor.observe([0], [int(tok)])[0] for tok in token_ids]
