"""RoboEval (CodeBotler's benchmark) on the user's own checkout, judged as CodeBotler's evaluator judges.

    suite = load_roboeval("~/CodeBotler")                        # root, benchmark/ or benchmark/tasks
    prompts = roboeval_prompts(suite)                            # [{"key", "task", "prompt_index", "instruction", "prompt"}]
    report = evaluate_roboeval(suite, {p["key"]: [program, ...] for p in prompts})
    print(format_report(report))

Semantics (`codebotler`, the default, or `fixed`): `semantics.py`; the
world: `world.py`; the checks' trace language: `rtl.py`; files and paths:
`loader.py`; prompt protocol: `prompts.py`; running and the report:
`evaluate.py`. docs/roboeval.md describes both modes.
"""

from __future__ import annotations

from densecode.eval.roboeval.evaluate import TABLE, evaluate_roboeval, format_report, table_class, trace_from_stdout
from densecode.eval.roboeval.loader import RoboEvalSuite, RoboEvalTask, load_roboeval
from densecode.eval.roboeval.prompts import PROMPT_STYLES, build_prompt, resolve_style
from densecode.eval.roboeval.semantics import SEMANTICS, contain_words
from densecode.eval.roboeval.world import State


def roboeval_prompts(suite: RoboEvalSuite | list[RoboEvalTask], style: str = "instruction",
                     prefix: str | None = None) -> list[dict]:
    """One entry per (task, phrasing) with its prompt in `style` ("codebotler" needs the prompt-file text)."""
    tasks = suite.tasks if isinstance(suite, RoboEvalSuite) else suite
    return [
        {"key": t.key(i), "task": t.name, "prompt_index": i, "instruction": text,
         "prompt": build_prompt(style, prefix, text)}
        for t in tasks
        for i, text in enumerate(t.prompts)
    ]


__all__ = [
    "PROMPT_STYLES", "SEMANTICS", "TABLE", "RoboEvalSuite", "RoboEvalTask", "State", "contain_words",
    "evaluate_roboeval", "format_report", "load_roboeval", "resolve_style", "roboeval_prompts", "table_class",
    "trace_from_stdout",
]
