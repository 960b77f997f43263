"""benchmarks/speed/syncode_overhead.py --prompts tasks: held-out prompts in the embedded model's own formats."""

import importlib


def test_task_prompts_are_robotics_then_codegen_held_out_prompts():
    bench = importlib.import_module("benchmarks.speed.syncode_overhead")
    prompts = bench.task_prompts(per_domain=2)
    assert len(prompts) == 4 and len(set(prompts)) == 4
    assert all("def task_program():" in p for p in prompts[:2])
    assert all(p.startswith("def ") and '"""' in p for p in prompts[2:])
    assert bench.task_prompts(per_domain=2) == prompts  # a fixed draw: runs compare
    assert bench.parse_args(["--prompts", "tasks"]).prompts == "tasks"
    assert bench.parse_args([]).prompts == "fixed"
