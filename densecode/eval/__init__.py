"""Benchmark evaluation: MBPP, MBPP+ (EvalPlus-style), RoboEval, densecode's robotics split and any domain.

One call: an `EvalSpec` (spec.py: what, which model, how to sample and judge) -> `runner.evaluate(spec)` (the
results) or `runner.run(spec)` (also writes results.json, report.md, chart.png). `densecode eval`, the Python
API (densecode.api) and the benchmarks use it. `densecode compare` is compare.py; the pieces they share are small
modules: `passk` (the unbiased pass@k estimator), `extract` (code out of chat responses), `mbpp` (data, prompts,
judging jobs), `report` (the run folder), `explain` (the reward explorer's page).
"""

from densecode.eval.spec import EvalSpec

__all__ = ["EvalSpec"]
