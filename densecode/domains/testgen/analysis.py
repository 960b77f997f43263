"""Line + branch coverage of a reference from traced lines/arcs, with coverage.py's own static analysis.

coverage.py's `PythonParser` gives the reference's statements, its possible arcs and each line's number of exits
(a line with more than one exit is a branch); the harness's tracer records lines and arcs the way coverage.py's
tracer does, and `translate_lines`/`translate_arcs` map a multi-line statement onto its first line as coverage.py's
reporter does. The numbers then follow coverage.py's definitions:
    line coverage   = executed statements / statements
    branch coverage = executed branch arcs / possible branch arcs   (1.0 when there is no branch)
    coverage        = (executed statements + executed branch arcs) / (statements + branch arcs)   (its "total")
with one change: statements the module ran while loading (`def` lines, imports, constants: the `baseline`) belong to
no test, so they are left out of both sides. With an empty baseline the numbers are coverage.py's own
(tests/domains/test_testgen.py checks both against coverage.py run on the same code).
"""

from __future__ import annotations

import hashlib
import warnings
from collections import OrderedDict
from dataclasses import dataclass

from densecode.errors import DensecodeError


@dataclass(frozen=True)
class CodeShape:
    statements: frozenset[int]
    branch_arcs: frozenset[tuple[int, int]]  # possible arcs out of lines with more than one exit
    parser: object  # coverage.parser.PythonParser (for translate_lines/arcs)

    def units(self, baseline: set[int]) -> tuple[frozenset[int], frozenset[tuple[int, int]]]:
        """The statements and branch arcs a test can cover (baseline statements and arcs from them left out)."""
        stmts = frozenset(s for s in self.statements if s not in baseline)
        arcs = frozenset(a for a in self.branch_arcs if a[0] in stmts)
        return stmts, arcs

    def covered(self, lines, arcs) -> tuple[set[int], set[tuple[int, int]]]:
        """Executed statements and executed branch arcs from raw traced lines and arcs."""
        lines_t = set(self.parser.translate_lines(set(lines))) & self.statements
        arcs_t = set(self.parser.translate_arcs({tuple(a) for a in arcs})) & self.branch_arcs
        return lines_t, arcs_t


_SHAPES: OrderedDict[str, CodeShape] = OrderedDict()


def code_shape(source: str) -> CodeShape:
    """coverage.py's static analysis of `source` (cached)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    hit = _SHAPES.get(key)
    if hit is not None:
        _SHAPES.move_to_end(key)
        return hit
    try:
        from coverage.parser import PythonParser
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise DensecodeError(f"the testgen domain needs coverage.py (pip install 'coverage>=7.6,<8'): {exc}") from None
    parser = PythonParser(text=source, filename="reference.py")
    with warnings.catch_warnings():  # e.g. MBPP's invalid escape sequences: the source's business, not ours
        warnings.simplefilter("ignore")
        parser.parse_source()
    exits = parser.exit_counts()
    branch_lines = {line for line, n in exits.items() if n > 1}
    branch_arcs = frozenset(a for a in parser.arcs() if a[0] in branch_lines)
    shape = CodeShape(frozenset(parser.statements), branch_arcs, parser)
    _SHAPES[key] = shape
    while len(_SHAPES) > 2048:
        _SHAPES.popitem(last=False)
    return shape


@dataclass
class Coverage:
    line: float
    branch: float
    total: float
    n_statements: int
    n_branches: int


def coverage_numbers(shape: CodeShape, baseline: set[int], lines: set[int], arcs: set[tuple[int, int]],
                     tested: bool = True) -> Coverage:
    """The numbers above; `tested=False` (no assert held) gives 0 everywhere, even for a function without branches."""
    stmts, barcs = shape.units(baseline)
    if not tested:
        return Coverage(0.0, 0.0, 0.0, len(stmts), len(barcs))
    hit_lines = lines & stmts
    hit_arcs = arcs & barcs
    line = len(hit_lines) / len(stmts) if stmts else 1.0
    branch = len(hit_arcs) / len(barcs) if barcs else 1.0
    denom = len(stmts) + len(barcs)
    total = (len(hit_lines) + len(hit_arcs)) / denom if denom else 1.0
    return Coverage(line, branch, total, len(stmts), len(barcs))
