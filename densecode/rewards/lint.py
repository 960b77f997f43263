"""`lint`: Ruff diagnostics mapped to the exact tokens that caused them.

Ruff runs ONCE per batch over a temporary directory holding one file per sample
(the sample's program: in completion mode the prompt's code prefix + response, so
the response is linted in context). Each diagnostic's range (Ruff: 1-based rows,
1-based columns counted in characters) becomes a character range of the program,
then a byte range (tree-sitter counts 0-based bytes), then the smallest enclosing
tree-sitter node, whose character range is mapped back to the response and to the
tokens overlapping it. A range whose smallest enclosing node is the whole module
(e.g. an import block) keeps Ruff's own range; an empty range (e.g. W292 at the end
of the file) names the character at its position.

Each diagnostic is worth `-weight(category)` on every token it reaches; a token's
value is the sum over diagnostics, floored at `token_floor`. Categories are
compilable / runnable / safety / style by what each rule means, rule by rule
(`lint_rules.RULE_CATEGORIES`; e.g. B905 `zip()` without `strict=` is style, E722
bare `except` is safety). Ruff's own syntax errors are left to the `syntax`
component (`skip_syntax_errors`).

Ranges are Ruff's, widened to the smallest enclosing tree-sitter node: F401 on
`import numpy as np` covers only `np` (Ruff's range is the alias), so the penalty
lands on the name that is unused, not on the whole import statement.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from functools import lru_cache

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import (
    ComponentOutput,
    RewardComponent,
    check_spread,
    diag,
    spread_over,
)
from densecode.rewards.lint_rules import (  # lint_rules owns the Ruff lookup
    category_of,
    ruff_binary,
)
from densecode.rewards.sample import ProgramMap, Sample, program_of

DEFAULT_SELECT = ["E", "F", "W", "I", "UP", "B", "S", "ANN", "C", "N", "PL", "PT", "TID"]
DEFAULT_IGNORE = ["E501", "D100", "D101", "D102", "D103"]
DEFAULT_CATEGORY_WEIGHTS = {"compilable": 1.0, "runnable": 1.0, "safety": 1.0, "style": 1.0}


@lru_cache(maxsize=1)
def _ts_parser():
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


class CharBytes:
    """Character <-> UTF-8 byte offsets of one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        if not self.ascii:
            lens = np.fromiter((len(c.encode("utf-8", "surrogatepass")) for c in text), dtype=np.int64, count=len(text))
            self.byte_at = np.concatenate([[0], np.cumsum(lens)])  # byte offset of char i

    def to_byte(self, char: int) -> int:
        return char if self.ascii else int(self.byte_at[min(max(char, 0), len(self.text))])

    def to_char(self, byte: int) -> int:
        if self.ascii:
            return byte
        return int(np.searchsorted(self.byte_at, byte, side="right") - 1)


def node_range(program: str, tree, start: int, end: int, cb: CharBytes | None = None) -> tuple[int, int, str]:
    """Char range and type of the smallest tree-sitter node enclosing program chars [start, end)."""
    if end <= start or tree is None:
        return start, end, "point"
    if not program[start:end].strip():
        # Whitespace diagnostics (W191 tabs, W291 trailing spaces) concern the whitespace
        # itself; its enclosing node would be a whole block.
        return start, end, "whitespace"
    cb = cb or CharBytes(program)
    node = tree.root_node.descendant_for_byte_range(cb.to_byte(start), cb.to_byte(end))
    if node is None or node.type in ("module", "block", "ERROR") or node.parent is None:
        return start, end, "ruff-range"
    return cb.to_char(node.start_byte), cb.to_char(node.end_byte), node.type


def run_ruff(programs: dict[str, str], select: list[str], ignore: list[str], builtins: list[str],
             target_version: str = "py311", line_length: int = 88, timeout: float = 120.0) -> dict[str, list[dict]]:
    """Lint `{name: source}` in one Ruff call; return `{name: [diagnostic json]}`."""
    results: dict[str, list[dict]] = {name: [] for name in programs}
    if not programs:
        return results
    # A tmpfs when there is one: creating hundreds of small files on an overlay disk
    # costs more than Ruff itself.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="densecode-lint-", dir=shm) as tmp:
        by_file = {}
        for name, text in programs.items():
            with open(os.path.join(tmp, f"{name}.py"), "w", encoding="utf-8", newline="", errors="surrogatepass") as fh:
                fh.write(text)
            by_file[f"{name}.py"] = name
        cmd = [ruff_binary(), "check", "--no-cache", "--isolated", "--exit-zero", "--output-format", "json",
               "--select", ",".join(select), "--target-version", target_version, "--line-length", str(line_length)]
        if ignore:
            cmd += ["--ignore", ",".join(ignore)]
        if builtins:
            cmd += ["--config", "builtins = " + json.dumps(sorted(set(builtins)))]
        cmd.append(tmp)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise DensecodeError(f"ruff failed (exit {proc.returncode}): {proc.stderr.strip()[:500]}; check reward.components.lint options")
        for d in json.loads(proc.stdout or "[]"):
            name = by_file.get(os.path.basename(d.get("filename", "")))
            if name is not None:
                results[name].append(d)
    return results


class LintComponent(RewardComponent):
    name = "lint"

    def __init__(self, select: list[str] | None = None, ignore: list[str] | None = None,
                 builtins: list[str] | None = None, category_weights: dict[str, float] | None = None,
                 token_floor: float = -3.0, skip_syntax_errors: bool = True, target_version: str = "py311",
                 line_length: int = 88, spread: str = "each") -> None:
        # split: a finding's value is divided among its node's tokens (a long node costs no more).
        self.spread = check_spread("lint", spread)
        self.select = list(select or DEFAULT_SELECT)
        self.ignore = list(DEFAULT_IGNORE if ignore is None else ignore)
        self.builtins = list(builtins or [])
        self.category_weights = {**DEFAULT_CATEGORY_WEIGHTS, **(category_weights or {})}
        unknown = set(self.category_weights) - set(DEFAULT_CATEGORY_WEIGHTS)
        if unknown:
            raise DensecodeError(f"reward.components.lint.category_weights: unknown categories {sorted(unknown)} "
                                 f"(use {', '.join(DEFAULT_CATEGORY_WEIGHTS)})")
        self.token_floor = float(token_floor)
        self.skip_syntax_errors = skip_syntax_errors
        self.target_version = target_version
        self.line_length = int(line_length)

    def metrics(self, outputs: list[ComponentOutput]) -> dict[str, float]:
        return {"rollout/lint_violations_per_sample": float(np.mean([len(o.diagnostics) for o in outputs]))}

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        programs: dict[str, tuple[int, str, ProgramMap]] = {}
        for i, s in enumerate(samples):
            text, pmap = program_of(s)
            if text.strip():
                programs[f"s{i:05d}"] = (i, text, pmap)
        builtins = self.builtins + [b for s in samples for b in s.task.get("builtins", [])]
        found = run_ruff({k: v[1] for k, v in programs.items()}, self.select, self.ignore, builtins,
                         self.target_version, self.line_length)
        outs = [ComponentOutput.zeros(s, n_violations=0.0, lint_clean=1.0) for s in samples]
        for key, (i, text, pmap) in programs.items():
            outs[i] = self._map(samples[i], text, pmap, found[key])
        return outs

    def _map(self, sample: Sample, program: str, pmap: ProgramMap, diagnostics: list[dict]) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float64)
        tree = _ts_parser().parse(program.encode("utf-8", "surrogatepass")) if diagnostics else None
        cb = CharBytes(program) if diagnostics else None
        records = []
        counts = {c: 0 for c in DEFAULT_CATEGORY_WEIGHTS}
        n_response = 0
        for d in diagnostics:
            code = d.get("code")
            if not code or code == "invalid-syntax" or d.get("name") == "invalid-syntax":
                # Ruff's syntax errors: the syntax component's to punish (counted twice otherwise).
                if self.skip_syntax_errors:
                    continue
                code = "invalid-syntax"
            loc, end = d.get("location") or {}, d.get("end_location") or {}
            start = pmap.line_col_to_char(loc.get("row", 1), loc.get("column", 1) - 1)
            stop = pmap.line_col_to_char(end.get("row", loc.get("row", 1)), end.get("column", 1) - 1)
            cat = category_of(code)
            n0, n1, node_type = node_range(program, tree, start, max(stop, start), cb)
            if n1 <= n0:  # an empty range names the character at its position (or the last one)
                n0 = min(n0, max(len(program) - 1, 0))
                n1 = n0 + 1
            rng = pmap.range_to_response(n0, n1)
            if rng is None:
                continue  # fired inside the prompt's prefix: no response token to blame
            tokens = sample.tokens_in_range(*rng)
            if not tokens:
                continue
            n_response += 1
            counts[cat] += 1
            value = -self.category_weights[cat]
            spread_over(values, tokens, value, self.spread)
            records.append(diag(code, rng, tokens, d.get("message", ""), value, category=cat, node=node_type,
                                row=loc.get("row"), col=loc.get("column")))
        np.maximum(values, self.token_floor, out=values)
        info = {"n_violations": float(n_response), "lint_clean": float(n_response == 0)}
        info.update({f"n_{c}": float(v) for c, v in counts.items()})
        return ComponentOutput(values.astype(np.float32), records, info)
