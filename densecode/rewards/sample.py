"""The one sample type every reward component reads, and how to build it.

A `Sample` is one generated response plus everything needed to give each of its
tokens a reward: the token ids, each token's character span in the response, and
the code regions (character spans of the response that are code).

Token spans (`token_spans[i] = (start, end)`, characters of `response`):
a span covers every character at least one of whose UTF-8 bytes the token holds.
So when byte-level BPE splits a multi-byte character over several tokens, each of
those tokens gets the SAME shared span of that character (spans may overlap by one
character), and a diagnostic on that character reaches all of them. A token that
holds no bytes of the response (EOS, other special tokens) gets an empty span
`(k, k)` at the position where it sits.

Code regions (`code_regions`, character spans of the response):
- `completion`: the whole response is code (the prompt ends inside code, e.g. with
  `def task_program():\n`); `program_of` prepends the prompt's code prefix.
- `fenced`: every ```python / ```py / ``` block of a chat-style response (only the
  lines between the fences; an unclosed block runs to the end of the response).
- `auto`: the prompt opened a fence that the response continues → the response up
  to its first closing fence; else fenced blocks if the response has fences; else
  completion mode when the prompt ends inside code or the response itself reads as
  code; else no code at all (all prose).
- a chat task (`task["prompt_style"] == "chat"`, densecode/prompts.py) under `auto`:
  the answer's code as eval extracts it (`densecode.eval.extract.answer_code_span`):
  its first ```python block, else the whole response; resolved mode "fenced", so no
  prompt text is prepended to the program.
"""

from __future__ import annotations

import ast
import codecs
import itertools
import re
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from densecode.errors import DensecodeError

CODE_REGION_MODES = ("auto", "completion", "fenced")  # reward.code_regions
CHAT_REGIONS = "chat"  # what `auto` means for a chat task (region_mode_for)

# A fence line: optional indent, ``` and an info string (python, py, py3, or nothing).
_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*$", re.MULTILINE)
_CODE_LANGS = {"", "python", "py", "python3", "py3"}


@dataclass
class Sample:
    prompt: str
    response: str
    token_ids: list[int]
    token_spans: list[tuple[int, int]]
    code_regions: list[tuple[int, int]]
    task: dict = field(default_factory=dict)
    truncated: bool = False
    # Per-token SynCode check-mode verdicts from the rollout (True accepted, False
    # rejected, None not checked), the alternative source of the syntax reward.
    grammar_verdicts: list[bool | None] | None = None
    logprobs: np.ndarray | None = None
    ref_logprobs: np.ndarray | None = None
    # "completion" or "fenced": how code_regions were found (program_of needs it).
    region_mode: str = "completion"

    def __post_init__(self) -> None:
        if len(self.token_spans) != len(self.token_ids):
            raise DensecodeError(
                f"Sample has {len(self.token_ids)} token ids but {len(self.token_spans)} token spans; "
                "build samples with densecode.rewards.make_sample"
            )

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    def _span_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        cached = self.__dict__.get("_spans_np")
        if cached is None or cached[0].shape[0] != len(self.token_spans):
            arr = np.asarray(self.token_spans, dtype=np.int64).reshape(-1, 2)
            cached = (arr[:, 0].copy(), arr[:, 1].copy())
            self.__dict__["_spans_np"] = cached
        return cached

    def code_token_mask(self) -> np.ndarray:
        """True for each token whose span overlaps a code region."""
        starts, ends = self._span_arrays()
        mask = np.zeros(len(starts), dtype=bool)
        for rs, re_ in self.code_regions:
            mask |= (starts < re_) & (ends > rs) & (ends > starts)
        return mask

    def tokens_in_range(self, start: int, end: int) -> list[int]:
        """Indices of tokens whose (non-empty) spans overlap the response characters [start, end).

        An empty range names the character at `start`.
        """
        if end <= start:
            end = start + 1
        starts, ends = self._span_arrays()
        return np.flatnonzero((starts < end) & (ends > start) & (ends > starts)).tolist()

    def token_at(self, pos: int) -> int | None:
        """The token holding response character `pos` (or the first one after it)."""
        starts, ends = self._span_arrays()
        hit = np.flatnonzero((starts <= pos) & (ends > pos))
        if hit.size:
            return int(hit[0])
        after = np.flatnonzero((starts >= pos) & (ends > starts))
        return int(after[0]) if after.size else None


# ---------------------------------------------------------------- token spans


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode table (byte-level BPE's printable alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _is_byte_level(tokenizer: Any) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None) if backend is not None else None
    return decoder is not None and type(decoder).__name__ == "ByteLevel"


# Per tokenizer: token id -> its bytes (filled lazily; vocabularies do not change).
_BYTE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _token_bytes_byte_level(tokenizer: Any, token_ids: list[int]) -> list[bytes]:
    try:
        cache = _BYTE_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        cache = {}
    missing = [t for t in set(token_ids) if t not in cache]
    if missing:
        table = _unicode_to_byte()
        if "special" not in cache:
            cache["special"] = set(getattr(tokenizer, "all_special_ids", []) or [])
            try:
                cache["added"] = {v: k for k, v in tokenizer.get_added_vocab().items()}
            except Exception:  # noqa: BLE001 - tokenizers without added vocab
                cache["added"] = {}
        special, added = cache["special"], cache["added"]
        for tid, tok in zip(missing, tokenizer.convert_ids_to_tokens(missing)):
            if tid in special or tok is None:
                cache[tid] = b""
            elif tid in added:
                cache[tid] = added[tid].encode("utf-8")
            else:
                try:
                    cache[tid] = bytes(table[c] for c in tok)
                except KeyError:  # a token outside the byte alphabet: take it literally
                    cache[tid] = tok.encode("utf-8")
    return [cache[t] for t in token_ids]


def spans_from_token_bytes(pieces: list[bytes]) -> tuple[str, list[tuple[int, int]]]:
    """Decode byte pieces incrementally; return (text, shared-character spans).

    Invalid UTF-8 becomes U+FFFD exactly as `bytes.decode(errors="replace")` does.
    """
    try:  # fast path: no token splits a character
        texts = [p.decode("utf-8") for p in pieces]
    except UnicodeDecodeError:
        texts = None
    if texts is not None:
        ends = list(itertools.accumulate(len(t) for t in texts))
        return "".join(texts), list(zip([0] + ends[:-1], ends))
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    n_chars = 0
    spans: list[tuple[int, int]] = []
    for piece in pieces:
        start = n_chars  # if a partial character is pending, it completes at n_chars: shared
        text = decoder.decode(piece, final=False)
        parts.append(text)
        n_chars += len(text)
        pending = bool(decoder.getstate()[0])
        spans.append((start, n_chars + 1 if pending else n_chars))
    tail = decoder.decode(b"", final=True)
    parts.append(tail)
    n_chars += len(tail)
    spans = [(min(s, n_chars), min(e, n_chars)) for s, e in spans]
    return "".join(parts), spans


def _spans_generic(tokenizer: Any, token_ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """Prefix decoding for tokenizers that are not byte-level (SentencePiece etc.).

    c_i = characters of decode(ids[:i+1]) that are final; a prefix ending in U+FFFD
    that the full text does not have there holds a partial character (byte fallback),
    which belongs to this token and to the one completing it (the shared span, as in
    the byte-level path). O(n^2) decoding, fine for response lengths.
    """
    def dec(ids):
        return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    full = dec(token_ids)
    spans = []
    prev = 0
    for i in range(len(token_ids)):
        text = dec(token_ids[: i + 1])
        cur = len(text)
        while cur > prev and text[cur - 1] == "\ufffd" and (cur > len(full) or full[cur - 1] != "\ufffd"):
            cur -= 1
        pending = cur < len(text)
        cur = max(cur, prev)
        spans.append((prev, min(cur + 1, len(full)) if pending else cur))
        prev = cur
    return full, spans


def token_spans_for(tokenizer: Any, token_ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """(response text, per-token character spans) for `token_ids` under `tokenizer`."""
    token_ids = [int(t) for t in token_ids]
    if _is_byte_level(tokenizer):
        return spans_from_token_bytes(_token_bytes_byte_level(tokenizer, token_ids))
    return _spans_generic(tokenizer, token_ids)


# ---------------------------------------------------------------- code regions


def fenced_regions(text: str) -> list[tuple[int, int]]:
    """Character spans of the code inside ``` fences (python/py/bare); unclosed runs to the end."""
    regions = []
    fences = list(_FENCE_RE.finditer(text))
    i = 0
    while i < len(fences):
        opener = fences[i]
        lang = opener.group(1).lower()
        body_start = opener.end() + 1 if opener.end() < len(text) else opener.end()
        closer = fences[i + 1] if i + 1 < len(fences) else None
        body_end = closer.start() if closer is not None else len(text)
        if lang in _CODE_LANGS and body_end > body_start:
            regions.append((body_start, body_end))
        i += 2
    return regions


def prompt_open_fence(prompt: str) -> bool:
    """True when the prompt ends inside an unclosed ``` block (e.g. ends with ```python\\n)."""
    return len(_FENCE_RE.findall(prompt)) % 2 == 1


_CODE_START_RE = re.compile(
    r"^(def |async def |class |import |from \S+ import |@|if |for |while |with |try:|return |print\(|[A-Za-z_][A-Za-z0-9_]* *(=|\())"
)


def prompt_ends_in_code(prompt: str) -> bool:
    """Heuristic: the prompt's last non-blank line is code the response continues."""
    lines = [ln for ln in prompt.splitlines() if ln.strip()]
    if not lines:
        return False
    last = lines[-1]
    stripped = last.rstrip()
    if stripped.startswith(("def ", "async def ", "class ")) and stripped.endswith(":"):
        return True
    if prompt_open_fence(prompt):
        return True
    return bool(last[:1] in (" ", "\t") and stripped.endswith(":"))


def _reads_as_code(text: str) -> bool:
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if _CODE_START_RE.match(first.lstrip()) or first.lstrip().startswith("#"):
        return True
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return bool(text.strip()) and "\n" in text.strip()


def region_mode_for(task: dict | None, mode: str) -> str:
    """The region mode of one sample: `auto` on a chat task is "chat" (the answer's code, see the module docstring);
    a mode set explicitly in `reward.code_regions` stays as set."""
    from densecode.prompts import is_chat_task

    return CHAT_REGIONS if mode == "auto" and is_chat_task(task) else mode


def find_code_regions(prompt: str, response: str, mode: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """(code regions of `response`, resolved mode "completion" | "fenced"); mode "chat": a chat answer's code."""
    if mode == CHAT_REGIONS:
        from densecode.eval.extract import answer_code_span

        start, end = answer_code_span(response)
        return ([(start, end)] if end > start else []), "fenced"
    if mode not in CODE_REGION_MODES:
        raise DensecodeError(f"reward.code_regions must be one of {', '.join(CODE_REGION_MODES)}; got {mode!r}")
    if mode == "completion":
        return ([(0, len(response))] if response else []), "completion"
    if mode == "fenced":
        return fenced_regions(response), "fenced"
    if prompt_open_fence(prompt):
        close = _FENCE_RE.search(response)
        end = close.start() if close else len(response)
        return ([(0, end)] if end > 0 else []), "completion"
    if "```" in response:
        return fenced_regions(response), "fenced"
    if prompt_ends_in_code(prompt) or _reads_as_code(response):
        return ([(0, len(response))] if response else []), "completion"
    return [], "fenced"


def make_sample(
    prompt: str,
    response_token_ids: list[int],
    tokenizer: Any,
    task: dict | None = None,
    *,
    code_regions: str = "auto",
    truncated: bool = False,
    grammar_verdicts: list[bool | None] | None = None,
    logprobs: Any = None,
    ref_logprobs: Any = None,
) -> Sample:
    """Build a Sample: decode the ids, compute token spans, find the code regions."""
    ids = [int(t) for t in (response_token_ids.tolist() if hasattr(response_token_ids, "tolist") else response_token_ids)]
    response, spans = token_spans_for(tokenizer, ids)
    regions, resolved = find_code_regions(prompt, response, region_mode_for(task, code_regions))
    return Sample(
        prompt=prompt,
        response=response,
        token_ids=ids,
        token_spans=spans,
        code_regions=regions,
        task=dict(task or {}),
        truncated=truncated,
        grammar_verdicts=grammar_verdicts,
        logprobs=None if logprobs is None else np.asarray(logprobs, dtype=np.float32),
        ref_logprobs=None if ref_logprobs is None else np.asarray(ref_logprobs, dtype=np.float32),
        region_mode=resolved,
    )


# ---------------------------------------------------------------- programs


_TOP_DEF_RE = re.compile(r"^(async def |def |class )", re.MULTILINE)


def prompt_code_prefix(prompt: str) -> str:
    """The prompt's code that the response continues.

    The text after an unclosed ``` fence, else from the last top-level def/class line
    (with its decorators) to the end, else the last top-level code line onwards when
    the prompt ends with an indented block opener; empty when the prompt is prose.
    """
    if prompt_open_fence(prompt):
        last = list(_FENCE_RE.finditer(prompt))[-1]
        return prompt[last.end() + 1 :]
    matches = list(_TOP_DEF_RE.finditer(prompt))
    if not matches:
        return ""
    start = matches[-1].start()
    # Include decorators directly above the def.
    while start > 0:
        prev_start = prompt.rfind("\n", 0, start - 1) + 1
        if prompt[prev_start:start].startswith("@"):
            start = prev_start
        else:
            break
    return prompt[start:]


@dataclass
class ProgramMap:
    """Maps positions of the program text built by `program_of` back to the response.

    `segments`: (program_start, response_start, length) for every piece of response
    code in the program; program text outside them (the prompt prefix, the newlines
    joining blocks) maps to nothing.
    """

    program: str
    segments: list[tuple[int, int, int]]
    prefix_len: int = 0

    def to_response(self, pos: int) -> int | None:
        for p0, r0, n in self.segments:
            if p0 <= pos < p0 + n:
                return r0 + pos - p0
        return None

    def range_to_response(self, start: int, end: int) -> tuple[int, int] | None:
        """The response char range covered by program chars [start, end), clipped to response code."""
        lo = hi = None
        for p0, r0, n in self.segments:
            s, e = max(start, p0), min(max(end, start + 1), p0 + n)
            if s < e:
                lo = r0 + s - p0 if lo is None else lo
                hi = r0 + e - p0
        return None if lo is None else (lo, hi)

    @property
    def line_starts(self) -> list[int]:
        cached = self.__dict__.get("_line_starts")
        if cached is None:
            # Python and Ruff both end lines at \r\n, \r or \n.
            breaks = list(re.finditer("\r\n|\r|\n", self.program))
            cached = [0] + [m.end() for m in breaks]
            self.__dict__["_line_ends"] = [m.start() for m in breaks] + [len(self.program)]
            self.__dict__["_line_starts"] = cached
        return cached

    def line_range(self, line: int) -> tuple[int, int] | None:
        """Program char range of 1-based `line` (without its newline), or None."""
        starts = self.line_starts
        if line < 1 or line > len(starts):
            return None
        return starts[line - 1], self.__dict__["_line_ends"][line - 1]

    def line_to_response(self, line: int) -> tuple[int, int] | None:
        """Response char range of program line `line` (1-based); None inside the prefix."""
        rng = self.line_range(line)
        if rng is None:
            return None
        s, e = rng
        # Skip the indentation: the line's tokens are its code, not the leading spaces.
        text = self.program[s:e]
        s += len(text) - len(text.lstrip())
        if e <= s:
            return None
        return self.range_to_response(s, e)

    def line_col_to_char(self, line: int, col: int) -> int:
        """1-based line, 0-based column in characters -> program char offset."""
        starts = self.line_starts
        line = min(max(line, 1), len(starts))
        return min(starts[line - 1] + col, len(self.program))


def region_programs(sample: Sample) -> list[tuple[str, ProgramMap]]:
    """One (program, map) per code region; in completion mode the first gets the prompt prefix."""
    out = []
    prefix = prompt_code_prefix(sample.prompt) if sample.region_mode == "completion" else ""
    for k, (s, e) in enumerate(sample.code_regions):
        pre = prefix if k == 0 else ""
        text = pre + sample.response[s:e]
        out.append((text, ProgramMap(text, [(len(pre), s, e - s)], prefix_len=len(pre))))
    return out


def program_of(sample: Sample) -> tuple[str, ProgramMap]:
    """The executable program of a sample and the map of its positions back to the response.

    Completion mode: the prompt's code prefix + the response's code. Fenced mode:
    all code blocks joined with a newline, in order (a later block may use names an
    earlier one defined). No code: ("", empty map).
    """
    pieces = region_programs(sample)
    if sample.region_mode == "completion" and len(pieces) == 1:
        return pieces[0]
    text_parts: list[str] = []
    segments = []
    pos = 0
    for k, (s, e) in enumerate(sample.code_regions):
        if k:
            text_parts.append("\n")
            pos += 1
        body = sample.response[s:e]
        segments.append((pos, s, e - s))
        text_parts.append(body)
        pos += len(body)
        if not body.endswith("\n"):
            text_parts.append("\n")
            pos += 1
    text = "".join(text_parts)
    return text, ProgramMap(text, segments)


def text_sample(prompt: str, response: str, task: dict, code_regions: str = "auto") -> Sample:
    """A Sample of a response known only as text (one pseudo-token): what judging by text needs."""
    regions, mode = find_code_regions(prompt, response, region_mode_for(task, code_regions))
    ids, spans = ([0], [(0, len(response))]) if response else ([], [])
    return Sample(prompt=prompt, response=response, token_ids=ids, token_spans=spans, code_regions=regions,
                  task={k: v for k, v in task.items() if k != "prompt"}, region_mode=mode)
