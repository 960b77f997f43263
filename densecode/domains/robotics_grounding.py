"""`grounding` (robotics): a located penalty on a place or object name the program uses that the instruction never
mentions.

Why: RL's lost greedy successes on robotics are the same programs naming another room or object than the instruction
(`go_to("copy room")` where it says "break room"; docs/results.md, "What the greedy losses are"). The task's outcome
says only that the program failed; nothing points at the name. The names passed as string literals to the API calls
whose first argument is a place or an object (`go_to`, `pick`, `place`) come from the instruction in every
reference program (0 of 1,736 such literals in 1,000 training tasks do not: `python -m
densecode.domains.robotics_grounding --tasks 1000`). So a literal there that the instruction does not contain is an
error located on its own tokens: `value` on them, 0 elsewhere. Outcome credit reads it as a finding
(`algo.ppo.credit: outcome+local` puts β × value on those tokens only; `outcome+dense` its return-to-go).

Not judged: names built at run time (variables, f-strings, `get_all_rooms()`), `ask`'s person and options and `say`'s
text (free text the reference writes itself), code that does not parse (the syntax component's job).
"""

from __future__ import annotations

import argparse
import ast
import warnings

import numpy as np

from densecode.rewards.base import ComponentOutput, RewardComponent, check_spread, diag, spread_over
from densecode.rewards.sample import Sample, program_of

GROUNDED_CALLS = ("go_to", "pick", "place")


def ungrounded_literals(program: str, instruction: str,
                        calls: tuple[str, ...] = GROUNDED_CALLS) -> list[tuple[str, str, int, int, int, int]]:
    """(call, literal, line, start col, end line, end col) of each string literal first argument of `calls` that
    `instruction` does not contain (case-insensitive). Columns are characters (ast gives UTF-8 bytes)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = program.splitlines()
    text = instruction.lower()

    def char_col(line: int, byte_col: int) -> int:
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        return len(src.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls
                and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.strip().lower() not in text:
            found.append((node.func.id, arg.value, arg.lineno, char_col(arg.lineno, arg.col_offset),
                          arg.end_lineno or arg.lineno, char_col(arg.end_lineno or arg.lineno, arg.end_col_offset)))
    found.sort(key=lambda f: (f[2], f[3]))
    return found


class GroundingComponent(RewardComponent):
    """`value` on the tokens of each place/object literal the instruction does not mention (module docstring)."""

    name = "grounding"

    def __init__(self, value: float = -1.0, calls: list[str] | tuple[str, ...] = GROUNDED_CALLS,
                 spread: str = "split"):
        self.value = float(value)
        self.calls = tuple(calls)
        # split: a literal's tokens share `value` (a long name costs what a short one does); each: every token gets it.
        self.spread = check_spread("grounding", spread)

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        return [self._one(s) for s in samples]

    def _one(self, sample: Sample) -> ComponentOutput:
        out = ComponentOutput.zeros(sample)
        instruction = str(sample.task.get("instruction") or sample.prompt)
        program, pmap = program_of(sample)
        found = ungrounded_literals(program, instruction, self.calls) if program else []
        for call, literal, line, col, end_line, end_col in found:
            span = pmap.range_to_response(pmap.line_col_to_char(line, col), pmap.line_col_to_char(end_line, end_col))
            if span is None:  # in the prompt's code prefix, not the response
                continue
            tokens = sample.tokens_in_range(*span)
            if not tokens:
                continue
            spread_over(out.values, tokens, self.value, self.spread)
            out.diagnostics.append(diag("ungrounded_name", span, tokens,
                                        f"{call}({literal!r}): the instruction does not name it", self.value))
        out.info["ungrounded_names"] = float(len(out.diagnostics))
        out.values = out.values.astype(np.float32)
        return out


def count_rollouts(path: str) -> dict[str, int]:
    """In a run's rollouts.jsonl: responses with / without an ungrounded name, and how many of each succeeded."""
    import json

    import densecode_robosim as robosim

    counts = {"with": 0, "with_success": 0, "without": 0, "without_success": 0}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            found = ungrounded_literals(robosim.tasks.program_from_body(r["response"]), r["task"]["instruction"])
            outcomes = [v.get("outcome") for v in (r.get("verdicts") or {}).values()
                        if isinstance(v, dict) and v.get("outcome") is not None]
            sim = (r.get("info") or {}).get("sim") or {}
            if not outcomes and sim.get("runs"):  # rollouts written before the verdicts were: the sim's counts
                outcomes = [float(sim.get("successes", 0.0)) / float(sim["runs"])]
            key = "with" if found else "without"
            counts[key] += 1
            counts[f"{key}_success"] += int(bool(outcomes) and min(outcomes) >= 1.0)
    return counts


def main(argv: list[str] | None = None) -> int:
    """The rule's check on the reference programs (how many of their place/object literals the instruction lacks),
    or with --rollouts, how often a run's sampled programs hold such a name and how many of those succeed."""
    import densecode_robosim as robosim

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--split", default="train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rollouts", default=None, metavar="FILE", help="a run's rollouts.jsonl instead")
    args = parser.parse_args(argv)
    if args.rollouts:
        c = count_rollouts(args.rollouts)
        print(f"{args.rollouts}: {c['with']} of {c['with'] + c['without']} responses name a place/object the "
              f"instruction does not ({c['with_success']} of them succeeded); {c['without']} do not "
              f"({c['without_success']} succeeded)")
        return 0
    total = missing = 0
    for task in robosim.generate_tasks(split=args.split, n=args.tasks, seed=args.seed):
        program = robosim.tasks.program_from_body(task.reference)
        tree = ast.parse(program)
        total += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id in GROUNDED_CALLS and n.args and isinstance(n.args[0], ast.Constant)
                     and isinstance(n.args[0].value, str))
        missing += len(ungrounded_literals(program, task.instruction))
    print(f"{args.tasks} {args.split} tasks: {total} place/object literals in the reference programs "
          f"({', '.join(GROUNDED_CALLS)}), {missing} not named by the instruction")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
