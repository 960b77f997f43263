"""Benchmark evaluation: MBPP, MBPP+ (EvalPlus-style), RoboEval and densecode's robotics split.

`densecode eval` lives in `cli.py`, `densecode compare` in `compare.py`; the
pieces they share are small modules: `passk` (the unbiased pass@k estimator),
`extract` (code out of chat responses), `mbpp` (data, prompts, judging jobs)
and `report` (results.json, report.md, the PNG chart).
"""
