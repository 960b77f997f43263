"""Text similarity of a commit message to the reference: ROUGE-L F1 and chrF.

ROUGE-L follows Google's rouge-score package (`RougeScorer(["rougeL"])`, no stemmer): text lowercased, every run of
characters other than a-z and 0-9 is a separator, P = LCS / hypothesis words, R = LCS / reference words,
F1 = 2PR / (P + R). It is implemented here because the token reward needs the LCS itself (which hypothesis words
it matched), and rouge-score (last release 2022) pulls in nltk; the published example is checked in the tests.
chrF is sacrebleu's (`CHRF()`: character 6-grams, beta 2, whitespace removed), the maintained reference
implementation, checked against sacrebleu's published sentence-level examples in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from densecode.errors import DensecodeError


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # characters of the original string
    end: int


def words(text: str) -> list[Word]:
    """rouge-score's tokens with their character spans: lowercase a-z0-9 runs."""
    out: list[Word] = []
    start = None
    buf: list[str] = []
    for i, ch in enumerate(text):
        low = ch.lower()
        if len(low) == 1 and ("a" <= low <= "z" or "0" <= low <= "9"):
            if start is None:
                start = i
            buf.append(low)
        elif start is not None:
            out.append(Word("".join(buf), start, i))
            start, buf = None, []
    if start is not None:
        out.append(Word("".join(buf), start, len(text)))
    return out


@dataclass(frozen=True)
class RougeL:
    precision: float
    recall: float
    f1: float
    matched: tuple[int, ...]  # indices of the hypothesis words in the LCS


def lcs_match(hyp: list[str], ref: list[str]) -> list[int]:
    """Indices of `hyp` in one longest common subsequence with `ref` (the earliest-ending one, deterministic)."""
    n, m = len(hyp), len(ref)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = below[j + 1] + 1 if hyp[i] == ref[j] else max(below[j], row[j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if hyp[i] == ref[j]:
            out.append(i)
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def rouge_l(hypothesis: str, reference: str) -> RougeL:
    hyp = [w.text for w in words(hypothesis)]
    ref = [w.text for w in words(reference)]
    if not hyp or not ref:
        return RougeL(0.0, 0.0, 0.0, ())
    matched = lcs_match(hyp, ref)
    lcs = len(matched)
    p, r = lcs / len(hyp), lcs / len(ref)
    f1 = 2 * p * r / (p + r) if lcs else 0.0
    return RougeL(p, r, f1, tuple(matched))


_CHRF = {}


def chrf(hypothesis: str, reference: str, *, eps_smoothing: bool = False) -> float:
    """sacrebleu's sentence chrF in [0, 1]."""
    metric = _CHRF.get(eps_smoothing)
    if metric is None:
        try:
            from sacrebleu.metrics import CHRF
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise DensecodeError(f"the commitmsg domain needs sacrebleu (pip install 'sacrebleu>=2.4,<3'): {exc}") \
                from None
        metric = _CHRF[eps_smoothing] = CHRF(eps_smoothing=eps_smoothing)
    return float(metric.sentence_score(hypothesis, [reference]).score) / 100.0


def first_line(text: str) -> str:
    """The message a response gives: its first non-empty line, stripped."""
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""
