"""An incremental Python parser with a flat per-token cost, for SynCode's mask store.

It answers what syncode 0.4.16's `PythonIncrementalParser.get_acceptable_next_terminals`
answers (the same `ParseResult`: accept sequences, remainder, remainder state,
indentation constraint), on syncode's compiled LALR tables and lexer, but keeps
everything that does not change when text is appended:

- Lexing restarts at the last lexer token that ends before the first changed
  character (up to `RELEX_TOKENS` back when that run starts with a number or a dot)
  instead of re-lexing the whole program. The lexer state at each token start
  (line counter, the indenter's indentation stack and bracket depth, where the
  token's post-lexed tokens begin) is stored, so a restart resumes exactly.
  Why that is enough: a lexer token that ends before the change can only be
  re-lexed differently when a longer terminal swallows it together with the text
  after it. Any token can grow by what is appended right after it (`de` -> `def`,
  `*` -> `**`, `f` -> `f"..."`); swallowing a whole further token needs a number
  or a dot first, at most 3 tokens into 1 (`1e+` -> FLOAT `1e+5`, `1_` -> `1_0`,
  `..` + `.` -> `...`); everything longer (strings,
  comments, line continuations) fails to lex while unfinished, so it is the
  lexer's unlexed remainder, which is always re-lexed. `tests/grammar/test_grammar_parser.py`
  checks the incremental lexer against a full re-lex on every prefix of real code
  and on random token sequences.
- The LALR parser is driven on its state stack only (no parse tree, no value
  stack), and the stack after every post-lexed token is kept, so a step resumes at
  the first changed token. The set of terminals a stack accepts depends only on
  the stack; it is computed once per distinct stack and cached for the grammar.

Cost per call: the re-lexed tail (a few tokens) plus the re-parsed tail, whatever
the program length (one `str` comparison of the common prefix is the only
length-dependent part, and it runs in C).
"""

from __future__ import annotations

import copy
import re

from densecode.grammar_targets import START_CONTEXT, TargetRules

RELEX_TOKENS = 3
# Terminals that a longer terminal can start with and run past the token after them.
_MERGE_STARTS = frozenset({"DEC_NUMBER", "HEX_NUMBER", "OCT_NUMBER", "BIN_NUMBER", "FLOAT_NUMBER", "IMAG_NUMBER",
                           "DOT"})
_ACCEPTS_CACHE_LIMIT = 200_000
_OPEN_BRACKETS = frozenset({"LPAR", "LSQB", "LBRACE"})
_CLOSE_BRACKETS = frozenset({"RPAR", "RSQB", "RBRACE"})
# Text that lexes as several tokens now but may still become one number (digits, fraction,
# exponent, imaginary suffix: `1e`, `1e+`, `1_`, `1.5e-`) or an ellipsis (`..`).
_GROWING = re.compile(r"\.\.|"
                      r"(\d[\d_]*(\.[\d_]*)?|\.\d[\d_]*)([eE]([-+]([\d_]+[jJ]?)?|[\d_]+[jJ]?)?|[jJ])?")
# Soft keywords (a contextual lexer's job): the lexer emits NAME for every name, and the
# parser reads a NAME as each of these terminals (densecode/grammars/python.lark), keeping
# every reading its LALR tables accept. PATTERN_NAME is a name in a match pattern, any but `_`.
_NAME_READINGS = {"match": ("NAME", "MATCH", "PATTERN_NAME"), "case": ("NAME", "CASE", "PATTERN_NAME"),
                  "_": ("NAME", "UNDERSCORE")}
_PLAIN_NAME_READINGS = ("NAME", "PATTERN_NAME")


class ParseFailed(Exception):
    """A token before the last one is rejected: the text is not a viable Python prefix."""


class _LexEntry:
    """One lexer token and the lexer/indenter state just before it."""

    __slots__ = ("char_pos", "column", "end_pos", "indent_level", "line", "line_start_pos", "paren_level",
                 "post_start", "token")

    def __init__(self, token, char_pos, line, column, line_start_pos, indent_level, paren_level, post_start):
        self.token = token
        self.end_pos = token.end_pos
        self.char_pos, self.line, self.column, self.line_start_pos = char_pos, line, column, line_start_pos
        self.indent_level = indent_level
        self.paren_level = paren_level
        self.post_start = post_start


class _ParseSnapshot:
    """Parser state after some number of post-lexed tokens.

    `stacks`: one LALR state stack per reading of the soft keywords so far (almost
    always one); `finals`: the terminals the last parsed token was read as; `context`:
    what `TargetRules.step` tracks (which statement, where its current target began).
    """

    __slots__ = ("context", "cur_ac", "dedent_queue", "finals", "indent_level", "last_parsed", "next_ac", "stacks")

    def __init__(self, stacks, cur_ac, next_ac, indent_level, dedent_queue, last_parsed, finals=(),
                 context=START_CONTEXT):
        self.stacks = stacks
        self.context = context  # densecode.grammar_targets: the statement and target being written
        self.finals = finals
        self.cur_ac = cur_ac
        self.next_ac = next_ac
        self.indent_level = indent_level
        self.dedent_queue = dedent_queue
        self.last_parsed = last_parsed


class IncrementalPythonParser:
    """`get_acceptable_next_terminals(code)` for one row; reuse it as the row's code grows."""

    def __init__(self, base_parser, ignore_whitespace: bool = False):
        from syncode.larkm.lexer import LexerState, LineCounter, Token

        self.base_parser = base_parser
        self.indenter = base_parser.lexer_conf.postlex
        self.tab_len = self.indenter.tab_len
        interactive = base_parser.parse_interactive("")
        self._lexer = interactive.lexer_thread.lexer.lexer  # PostLexConnector -> BasicLexer
        # The lexer compiles its terminals' regexes on first use (~30 ms, once per grammar): here, with the
        # grammar's other setup, rather than inside the first row's first token.
        _ = self._lexer.scanner
        conf = interactive.parser_state.parse_conf
        self._states = conf.states
        self._start_state = conf.start_state
        self._end_state = conf.end_state
        self._ignore = base_parser.lexer_conf.ignore
        self._ignore_whitespace = ignore_whitespace
        self._Token, self._LexerState, self._LineCounter = Token, LexerState, LineCounter
        self._Shift = _shift_action()
        self._accepts_cache = base_parser.__dict__.setdefault("_densecode_stack_accepts", {})
        self._action_groups = base_parser.__dict__.setdefault("_densecode_action_groups", {})
        self._sequences_cache = base_parser.__dict__.setdefault("_densecode_accept_sequences", {})
        self._targets = base_parser.__dict__.get("_densecode_target_rules")
        if self._targets is None:
            self._targets = base_parser.__dict__["_densecode_target_rules"] = TargetRules(base_parser)
        self.last_parsed = None
        self.next_ac_terminals: set = set()
        self.version = 0  # calls so far: a lazily built mask reads `post` only while it is unchanged
        self.reset()

    def reset(self) -> None:
        self.text = ""
        self.entries: list[_LexEntry] = []
        self.post: list = []  # post-lexed tokens (with _NL/_INDENT/_DEDENT)
        self.lexer_pos = 0
        self.lexing_incomplete = False
        self.paren_level = 0
        self.indent_level = [0]  # the indenter's stack after the last token
        start = (self._start_state,)
        self.snapshots: list[_ParseSnapshot] = [
            _ParseSnapshot((start,), frozenset(), self._accepts(start), (0,), (), None)]
        self.fed: list = []  # post tokens the snapshots were computed from
        self._post_kept = 0

    # ------------------------------------------------------------ lexing

    def _lex(self, code: str) -> None:
        old = self.text
        if code.startswith(old):
            same = len(old)
        else:
            same = _common_prefix_length(old, code)
        whole = len(self.entries)  # lexer tokens that end inside the unchanged prefix
        while whole and self.entries[whole - 1].end_pos > same:
            whole -= 1
        # Re-lex the last whole token; reach further back (up to RELEX_TOKENS) only from a
        # number or a dot, the only tokens a longer terminal can merge with what follows.
        keep = max(0, whole - 1)
        for i in range(max(0, whole - RELEX_TOKENS), whole - 1):
            if self.entries[i].token.type in _MERGE_STARTS:
                keep = i
                break
        indenter = self.indenter
        line_ctr = self._LineCounter("\n")
        if keep < len(self.entries):
            first = self.entries[keep]
            line_ctr.char_pos, line_ctr.line = first.char_pos, first.line
            line_ctr.column, line_ctr.line_start_pos = first.column, first.line_start_pos
            indent_level, paren_level = list(first.indent_level), first.paren_level
            del self.post[first.post_start:]
            del self.entries[keep:]
            self.lexer_pos = self.entries[-1].end_pos if self.entries else 0
        elif not self.entries:
            indent_level, paren_level = [0], 0
            self.post.clear()
            self.lexer_pos = 0
        else:  # nothing to re-lex (cannot happen with RELEX_TOKENS >= 1; kept for safety)
            last = self.entries[-1]
            line_ctr.char_pos = last.end_pos
            line_ctr.line, line_ctr.column = last.token.end_line, last.token.end_column
            line_ctr.line_start_pos = last.end_pos - last.token.end_column + 1
            indent_level, paren_level = list(self.indent_level), self.paren_level
        self._post_kept = len(self.post)
        state = self._LexerState(code, line_ctr)
        indenter.indent_level, indenter.paren_level = indent_level, paren_level
        lexer, nl_type = self._lexer, indenter.NL_type
        open_types, close_types = indenter.OPEN_PAREN_types, indenter.CLOSE_PAREN_types
        self.lexing_incomplete = False
        self.text = code  # entries stay consistent with `code` even when lexing stops early
        from syncode.larkm.exceptions import UnexpectedCharacters

        try:
            while line_ctr.char_pos < len(code):
                before = (line_ctr.char_pos, line_ctr.line, line_ctr.column, line_ctr.line_start_pos,
                          tuple(indenter.indent_level), indenter.paren_level, len(self.post))
                token = lexer.next_token(state)
                self.lexer_pos = line_ctr.char_pos
                # The token starts after any ignored text it skipped: store the state at its start.
                skipped = token.start_pos - before[0]
                if skipped:
                    before = (token.start_pos, token.line, token.column, token.start_pos - token.column + 1,
                              *before[4:])
                self.entries.append(_LexEntry(token, *before))
                if token.type == nl_type:
                    self.post.extend(indenter._handle_NL(token))
                else:
                    self.post.append(token)
                if token.type in open_types:
                    indenter.paren_level += 1
                elif token.type in close_types:
                    indenter.paren_level -= 1
                    if indenter.paren_level < 0:  # syncode asserts here
                        raise ParseFailed(f"{token!r} closes a bracket that was never opened")
        except UnexpectedCharacters:
            self.lexing_incomplete = True
        except EOFError:
            pass
        finally:
            self.indent_level = list(indenter.indent_level)
            self.paren_level = indenter.paren_level

    # ------------------------------------------------------------ LALR on the state stack

    def _feed(self, stack: list, ttype: str) -> None:
        """syncode/lark's `ParserState.feed_token`, without values (KeyError = rejected)."""
        states, end_state = self._states, self._end_state
        is_end = ttype == "$END"
        while True:
            action, arg = states[stack[-1]][ttype]
            if action is self._Shift:
                stack.append(arg)
                return
            size = len(arg.expansion)
            if size:
                del stack[-size:]
            stack.append(states[stack[-1]][arg.origin.name][1])
            if is_end and stack[-1] == end_state:
                return

    def _feed_readings(self, stacks: list, token) -> tuple[list, frozenset]:
        """Feed `token` to every reading: (the surviving stacks, the terminals it was read as).

        A NAME may be read as a soft keyword or a pattern name too (`_NAME_READINGS`);
        readings that reach the same stack merge. KeyError when no reading accepts it.
        """
        ttype = token.type
        types = _NAME_READINGS.get(token.value, _PLAIN_NAME_READINGS) if ttype == "NAME" else (ttype,)
        states = self._states
        if len(stacks) == 1:
            stack = stacks[0]
            row = states[stack[-1]]
            viable = [t for t in types if t in row]
            if len(viable) <= 1:  # the usual case: one reading, fed in place
                chosen = viable[0] if viable else ttype
                work = list(stack)
                self._feed(work, chosen)
                return [work], frozenset((chosen,))
        out, finals, seen = [], set(), set()
        for stack in stacks:
            row = states[stack[-1]]
            for t in types:
                if t not in row:
                    continue
                work = list(stack)
                try:
                    self._feed(work, t)
                except KeyError:
                    continue
                finals.add(t)
                key = tuple(work)
                if key not in seen:
                    seen.add(key)
                    out.append(work)
        if not out:
            raise KeyError(ttype)
        return out, frozenset(finals)

    def _growing_number_start(self, post: list, failed: int, code: str) -> int | None:
        """Index of a number whose text runs, over several tokens, to the end of the code and
        can still become one number token (so the failure at `failed` says nothing yet)."""
        for k in range(max(0, len(post) - RELEX_TOKENS), min(failed, len(post) - 2) + 1):
            if post[k].type in _MERGE_STARTS and not self.snapshots[k].dedent_queue and \
                    _GROWING.fullmatch(code, post[k].start_pos) is not None and \
                    all(t.type not in ("_NL", "_INDENT", "_DEDENT") for t in post[k + 1:]):
                return k
        return None

    def _for_target_ok(self, post: list, index: int, code: str, end_pos: int | None = None) -> bool:
        """Python's verdict on the target of the `for` whose `in` may be post[index] (or come at `end_pos`).

        The grammar lets any expression be a `for` target; Python only names, attributes,
        subscripts, starred targets and tuples/lists of them (`for len(x) in` is "cannot assign
        to function call"). At the first `in` after a `for` at the same bracket depth, the
        text between them is checked by CPython's parser (cached), as a `for` statement's
        target or a comprehension's; any other `in` is a comparison and is not checked.
        """
        depth = 0
        for j in range(index - 1, -1, -1):
            ttype = post[j].type
            if ttype in _CLOSE_BRACKETS:
                depth += 1
            elif ttype in _OPEN_BRACKETS:
                depth -= 1
                if depth < 0:
                    return True
            elif depth == 0 and ttype in ("_NL", "_INDENT", "_DEDENT", "IN"):
                return True  # a new statement, or the `for`'s own `in` came earlier: a comparison
            elif depth == 0 and ttype == "FOR":
                break
        else:
            return True
        before = j - 1
        if before >= 0 and post[before].type == "ASYNC":
            before -= 1
        statement = before < 0 or post[before].type in ("_NL", "_INDENT", "_DEDENT")
        text = code[post[j].end_pos:post[index].start_pos if end_pos is None else end_pos]
        return self._targets.text_ok("for" if statement else "comprehension", text)

    def _accepts_all(self, stacks) -> frozenset:
        """The terminals some reading accepts."""
        if len(stacks) == 1:
            return self._accepts(tuple(stacks[0]))
        return frozenset().union(*(self._accepts(tuple(stack)) for stack in stacks))

    def _can_feed(self, stack: tuple, ttype: str) -> bool:
        """Would `_feed(list(stack), ttype)` succeed? (Reductions simulated without copying the stack.)"""
        states, shift, is_end = self._states, self._Shift, ttype == "$END"
        depth, extra = len(stack), []  # the stack is stack[:depth] + extra
        while True:
            entry = states[extra[-1] if extra else stack[depth - 1]].get(ttype)
            if entry is None:
                return False
            action, arg = entry
            if action is shift:
                return True
            size = len(arg.expansion)
            if size >= len(extra):
                depth -= size - len(extra)
                extra.clear()
            else:
                del extra[len(extra) - size:]
            extra.append(states[extra[-1] if extra else stack[depth - 1]][arg.origin.name][1])
            if is_end and extra[-1] == self._end_state:
                return True

    def _accepts(self, stack: tuple) -> frozenset:
        found = self._accepts_cache.get(stack)
        if found is None:
            found = self._accepts_uncached(stack)
            if len(self._accepts_cache) > _ACCEPTS_CACHE_LIMIT:
                self._accepts_cache.clear()
            self._accepts_cache[stack] = found
        return found

    def _accepts_uncached(self, stack: tuple) -> frozenset:
        """The terminals `_can_feed` accepts on this stack, with each reduction simulated once for all the terminals
        that call for it (a state reduces by one rule on most of its lookaheads) instead of once per terminal: the
        terminals are split by their action at each state they reach, and a group shares its stack from then on."""
        states, end_state, groups_of = self._states, self._end_state, self._action_groups
        accepted = set()
        # (depth, extra, terminals or None = all of the state's): the stack is stack[:depth] + extra (_can_feed)
        work = [(len(stack), (), None)]
        while work:
            depth, extra, terminals = work.pop()
            state = extra[-1] if extra else stack[depth - 1]
            groups = groups_of.get(state)
            if groups is None:
                groups = self._group_actions(state)
            shifts, reductions = groups
            accepted.update(shifts if terminals is None else terminals & shifts)
            for rule, on in reductions:
                group = on if terminals is None else terminals & on
                if not group:
                    continue
                size, d, ex = len(rule.expansion), depth, list(extra)
                if size >= len(ex):
                    d -= size - len(ex)
                    ex.clear()
                else:
                    del ex[len(ex) - size:]
                ex.append(states[ex[-1] if ex else stack[d - 1]][rule.origin.name][1])
                if ex[-1] == end_state and "$END" in group:
                    accepted.add("$END")
                    group = group - {"$END"}
                if group:
                    work.append((d, tuple(ex), group))
        return frozenset(accepted)

    def _group_actions(self, state) -> tuple[frozenset, list]:
        """A state's terminals split by action, once per grammar: (those it shifts, [(rule, those it reduces by
        the rule)])."""
        shifts, by_rule = set(), {}
        for t, (action, rule) in self._states[state].items():
            if not t.isupper():
                continue
            if action is self._Shift:
                shifts.add(t)
            else:
                by_rule.setdefault(id(rule), (rule, set()))[1].add(t)
        groups = self._action_groups[state] = (frozenset(shifts), [(r, frozenset(ts)) for r, ts in by_rule.values()])
        return groups

    # ------------------------------------------------------------ the syncode answer

    def get_acceptable_next_terminals(self, code: str):
        from syncode.parse_result import IndentationConstraint, RemainderState

        self.version += 1
        self._lex(code)
        post = self.post
        # Resume after the longest run of post-lexed tokens that was parsed before.
        fed = self.fed
        limit = min(len(fed), len(post))
        same = min(self._post_kept, limit)  # post tokens before the re-lexed tail are unchanged
        while same < limit and fed[same].type == post[same].type and fed[same] == post[same]:
            same += 1
        del self.snapshots[same + 1:]
        del fed[same:]
        snap = self.snapshots[same]
        stacks = [list(stack) for stack in snap.stacks]
        finals = snap.finals
        context = snap.context
        targets = self._targets
        cur_ac, next_ac = snap.cur_ac, snap.next_ac
        indent_level = list(snap.indent_level)
        dedent_queue = list(snap.dedent_queue)
        last_parsed = snap.last_parsed
        parse_incomplete = False
        growing_from = None  # start of a number still being typed in pieces (`1e` of `1e3j`)
        # A target Python rejects (`for len(x) in`, `f(x) =`, `del f()` + line break): the kind of
        # target, whose terminals (`in`, `=`, ...) are then refused (densecode.grammar_targets).
        bad_target = None
        pos = same
        while pos < len(post):
            token = post[pos]
            pos += 1
            if token.type == "_INDENT":
                indent = token.count(" ") + token.count("\t") * self.tab_len
                if indent > indent_level[-1]:
                    indent_level.append(indent)
                else:
                    while indent < indent_level[-1]:
                        indent_level.pop()
            elif token.type == "_DEDENT":  # fed once code follows on the next line
                dedent_queue.append(token)
                fed.append(token)
                context = START_CONTEXT
                self.snapshots.append(_ParseSnapshot(tuple(map(tuple, stacks)), cur_ac, next_ac,
                                                     tuple(indent_level), tuple(dedent_queue), last_parsed, finals,
                                                     context))
                continue
            else:
                last_parsed = token
            try:
                if token.type != "_INDENT":
                    while dedent_queue:  # syncode shoots queued dedents before the next code token
                        indent_level.pop()
                        stacks, _ = self._feed_readings(stacks, dedent_queue.pop())
                        cur_ac, next_ac = next_ac, self._accepts_all(stacks)
                ttype = token.type
                if ttype == "IN" and not self._for_target_ok(post, pos - 1, code):
                    bad_target = "for"
                    raise KeyError("IN")
                maybe_match = False  # a failed annotation check that a `match` statement may survive
                if ttype in targets.enders:
                    role = targets.role(context, ttype, pos - 1)
                    if role is not None and not targets.segment_ok(role, post, context[2], pos - 1, code):
                        if role == "annotation" and context[4]:
                            maybe_match = True
                        else:
                            bad_target = role
                            raise KeyError(ttype)
                stacks, read_as = self._feed_readings(stacks, token)
                if maybe_match:
                    # `match (x):` is a match statement's first line, not an annotation of a call:
                    # keep the readings in which the colon ends a match subject (only a line break follows).
                    stacks = [stack for stack in stacks if not self._can_feed(tuple(stack), "NAME")]
                    if not stacks:
                        bad_target = "annotation"
                        raise KeyError(ttype)
                context = targets.step(context, ttype, pos - 1, read_as)
                if token.type != "_INDENT":
                    finals = read_as
            except KeyError:
                start = self._growing_number_start(post, pos - 1, code)
                if start is not None:
                    # The failing token is inside a number still being typed in pieces (`1e` `+`
                    # of `1e+5`, or `1e` where only `1e3j` fits): like syncode's unfinished last
                    # token, the text from the number's start is the remainder.
                    growing_from = post[start].start_pos
                    parse_incomplete = True
                    cur_ac, next_ac = self.snapshots[start].next_ac, frozenset()
                    break
                if token != post[-1]:  # syncode's test (by token value): only the last token may fail
                    raise ParseFailed(f"unexpected {token.type} {token!r}") from None
                if token is post[-1] and code[token.end_pos:token.end_pos + 1] not in ("", "'", '"') and \
                        token.type not in ("_NL", "_INDENT", "_DEDENT"):
                    # Whitespace, a comment or a line continuation after the refused token (`f(x) = `,
                    # `2 an\\`): it is finished, so it cannot grow into a terminal that fits (`==`, `and`).
                    # (A quote right after it may still make it a string prefix: `"a" r"b"`.)
                    raise ParseFailed(f"unexpected {token.type} {token!r}") from None
                parse_incomplete = True
                cur_ac, next_ac = next_ac, frozenset()
                break
            cur_ac, next_ac = next_ac, self._accepts_all(stacks)
            fed.append(token)
            self.snapshots.append(_ParseSnapshot(tuple(map(tuple, stacks)), cur_ac, next_ac, tuple(indent_level),
                                                 tuple(dedent_queue), last_parsed, finals, context))

        # syncode's _get_remainder
        final_terminals = (None,)
        if growing_from is not None:
            # A number that fails where only another kind of number fits (`case 1 + 1e` wants an
            # imaginary number) may still become one token with what follows it (`1e3j`): like an
            # unfinished last token, the text from its start is the remainder.
            remainder_state, remainder = RemainderState.INCOMPLETE, code[growing_from:]
        elif self.lexing_incomplete:
            remainder = code[self.lexer_pos:]
            if self._ignore_whitespace:
                remainder = remainder.lstrip(" ")
            if remainder == "":
                remainder_state = RemainderState.COMPLETE
            else:
                remainder_state = RemainderState.INCOMPLETE
                cur_ac, next_ac = next_ac, frozenset()
        elif parse_incomplete:
            remainder_state = RemainderState.INCOMPLETE
            remainder, final_terminals = last_parsed.value, (last_parsed.type,)
        elif last_parsed is not None:
            if self.lexer_pos < len(code):
                remainder_state, remainder = RemainderState.COMPLETE, ""
            else:
                # The terminals the last token was read as (a NAME may be a soft keyword too).
                remainder, final_terminals = last_parsed.value, finals or (last_parsed.type,)
                remainder_state = RemainderState.MAYBE_COMPLETE
        else:
            remainder_state, remainder = RemainderState.COMPLETE, ""

        self.last_parsed = last_parsed
        cur_ac, next_ac = set(cur_ac), set(next_ac)
        if bad_target and remainder_state == RemainderState.INCOMPLETE:
            cur_ac -= targets.refused[bad_target]  # the refused `in` / `=` / ... is no viable prefix here
        next_ac_indents = None
        if remainder_state in (RemainderState.MAYBE_COMPLETE, RemainderState.COMPLETE) and \
                last_parsed is not None and last_parsed.type == "_NL":
            last_indent_str = last_parsed.value.split("\n")[-1]
            last_indent = last_indent_str.count(" ") + last_indent_str.count("\t") * self.tab_len
            indents = [indent - last_indent for indent in indent_level if indent >= last_indent]
            if "_INDENT" in next_ac:
                next_ac_indents = IndentationConstraint(greater_than_indent_val=indents[-1])
            elif "_INDENT" in cur_ac:
                next_ac_indents = IndentationConstraint(greater_than_indent_val=indents[-1] - 1)
            else:
                next_ac_indents = IndentationConstraint(accept_indents=indents)
            cur_ac.add("_NL")
            next_ac.add("_NL")
            # Dedents waiting in the queue may close blocks now (syncode's test_parser25).
            for stack in stacks:
                work = list(stack)
                queue = list(dedent_queue)
                level_next = self._accepts(tuple(work))
                while queue and "_DEDENT" in level_next:
                    self._feed(work, queue.pop().type)
                    level_next = self._accepts(tuple(work))
                    next_ac |= level_next
        self.next_ac_terminals = next_ac
        # A token check needs only the first terminals of the accept sequences; the sequences
        # themselves (slow to build: thousands of objects) are built when a mask reads them.
        if remainder_state == RemainderState.COMPLETE:
            firsts = set(next_ac)
        elif remainder_state == RemainderState.INCOMPLETE or next_ac or len(final_terminals) > 1:
            firsts = set(cur_ac)
        else:  # syncode pairs the final terminal with a next one, and there is none
            firsts = cur_ac - set(final_terminals)
        firsts.update(self._ignore)

        # Where the target being written starts (its text is read only if a mask is built), and for
        # a last token that may still grow into another terminal (`+` -> `+=`), where the target before it starts.
        target_start = post[context[2]].start_pos if 0 <= context[2] < len(fed) else None
        before_last = None
        if remainder_state == RemainderState.MAYBE_COMPLETE and fed and fed[-1] is last_parsed:
            previous = self.snapshots[len(fed) - 1].context
            if 0 <= previous[2] < len(fed) - 1:
                before_last = (previous, post[previous[2]].start_pos, last_parsed.start_pos)
        version = self.version

        def sequences():
            current, following = cur_ac, next_ac
            if remainder_state != RemainderState.INCOMPLETE:
                # `=`, `+=`, `:`, ... after a target Python rejects: no mask token may end the target there.
                if target_start is not None:
                    following = following - targets.blocked_next(context, code[target_start:])
                if before_last is not None:
                    previous, start, end = before_last
                    current = current - (targets.blocked_next(previous, code[start:end]) - set(final_terminals))
                if "IN" in following and self.version == version and \
                        not self._for_target_ok(post, len(post), code, len(code)):
                    following = following - {"IN"}
            # a soft keyword read two ways: what either reading accepts
            return set().union(*(self._accept_sequences(remainder_state, current, following, final)[0]
                                 for final in final_terminals))

        result = _lazy_result_class()(None, remainder, remainder_state, next_ac_indents,
                                      function_end="$END" in next_ac or "EOF" in next_ac)
        result.build_sequences = sequences
        result.first_terminals = frozenset(firsts)  # what `is_valid_prefix` tests
        return result

    def _accept_sequences(self, remainder_state, cur_ac: set, next_ac: set, final_terminal):
        """syncode's `ParseResult.from_accept_terminals` sequences, cached per input (they repeat)."""
        key = (remainder_state, frozenset(cur_ac), frozenset(next_ac), final_terminal)
        cache = self._sequences_cache
        found = cache.get(key)
        if found is None:
            from syncode.parse_result import ParseResult

            r = ParseResult.from_accept_terminals(cur_ac, next_ac, "", remainder_state, final_terminal=final_terminal,
                                                  ignore_terminals=self._ignore)
            if len(cache) > _ACCEPTS_CACHE_LIMIT:
                cache.clear()
            found = cache[key] = (frozenset(r.accept_sequences), frozenset(seq[0] for seq in r.accept_sequences))
        return found


def _common_prefix_length(a: str, b: str) -> int:
    """Length of the common prefix of a and b (binary search on C-speed slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


_LAZY_RESULT = None


def _lazy_result_class():
    """syncode's ParseResult whose `accept_sequences` are built on first read."""
    global _LAZY_RESULT
    if _LAZY_RESULT is None:
        from syncode.parse_result import ParseResult

        class LazyParseResult(ParseResult):
            build_sequences = None

            @property
            def accept_sequences(self):
                if self._sequences is None and self.build_sequences is not None:
                    self._sequences = self.build_sequences()
                return self._sequences

            @accept_sequences.setter
            def accept_sequences(self, value):
                self._sequences = value

        _LAZY_RESULT = LazyParseResult
    return _LAZY_RESULT


def _shift_action():
    from syncode.larkm.parsers.lalr_analysis import Shift

    return Shift


__all__ = ["RELEX_TOKENS", "IncrementalPythonParser", "ParseFailed", "copy"]
