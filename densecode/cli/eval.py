"""`densecode eval`: score a model (or a `densecode train` run) on MBPP, MBPP+, RoboEval or any domain.

    densecode eval --benchmark mbppplus --model densecode-tiny --data ../shared/data/mbppplus/MbppPlus-v0.2.0.derived.jsonl --out runs/eval/tiny-mbppplus
    densecode eval --benchmark mbpp --canonical --split all --data ../shared/data/mbpp/mbpp.jsonl --out runs/eval/mbpp-canonical
    densecode eval --benchmark robotics --model runs/robotics --out runs/eval/robotics-ppo
    densecode eval --benchmark roboeval --data ~/CodeBotler/benchmark/tasks --model M --out runs/eval/roboeval
    densecode eval --domain warehouse --config my_sim.yaml --canonical        # any domain, plug-ins included

Writes results.json, report.md and chart.png into --out. `--model` takes a
model directory, a hub id, `densecode-tiny`, or a `densecode train` run
directory (its latest checkpoint is used). `--canonical` judges the dataset's
own reference solutions instead of a model: the check that the judge agrees
with the benchmark.

This module is the command line only: it parses the flags into an `EvalSpec` (densecode/eval/spec.py) and calls
the library, `densecode.eval.runner.run`, as `densecode.api.evaluate` does from Python.
"""

from __future__ import annotations

import sys

from densecode.config import add_config_arguments
from densecode.eval import mbpp as mbpp_mod
from densecode.eval.runner import CANONICAL_TIMEOUT_S, DEFAULT_TIMEOUT_S, MBPPPLUS_SECONDS_PER_INPUT
from densecode.eval.runner import run as run_eval
from densecode.eval.spec import BENCHMARKS, EvalSpec


def configure(parser) -> None:
    parser.add_argument("--benchmark", default=None, metavar="NAME",
                        help=f"{', '.join(BENCHMARKS)}, or any registered domain's name (its held-out split)")
    parser.add_argument("--domain", default=None,
                        help="evaluate this domain's held-out tasks (a registered name, 'package.module:Class', or the "
                             "domain of --config, e.g. a simulator plug-in); same as --benchmark NAME for a domain")
    add_config_arguments(parser)
    parser.add_argument("--model", default="densecode-tiny",
                        help="model dir, hub id, densecode-tiny, or a densecode train run/checkpoint dir")
    parser.add_argument("--data", default=None,
                        help="benchmark file (mbpp/mbppplus .jsonl), or your CodeBotler checkout for roboeval (its "
                             "root, benchmark/ or benchmark/tasks); default: the dataset hub")
    parser.add_argument("--split", default=None, choices=mbpp_mod.SPLIT_CHOICES,
                        help="MBPP task-id split (default test = 11-510; for MBPP+ the tasks with those MBPP ids, "
                             "default all 378, EvalPlus's set) or robotics split (test/validation/train)")
    parser.add_argument("--n", "--samples", dest="n", type=int, default=1,
                        help="samples per task (pass@k for k <= n; --samples 16 --temperature 1.0 gives the headroom "
                             "pass@1/4/16 that RL can sharpen towards)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--few-shot", type=int, default=0, help="examples before the problem (mbpp/mbppplus)")
    parser.add_argument("--prompt-style", default="auto", choices=("auto", "chat", "completion", "codebotler", "instruction"),
                        help="mbpp: auto = chat template when the tokenizer has one, else plain completion; "
                             "roboeval: codebotler (the checkout's code_generation/prompt_prefix.py + '# <task>') "
                             "or instruction (densecode's '# Instruction:' format); auto = codebotler when the "
                             "prompt file is found")
    parser.add_argument("--roboeval-semantics", default="codebotler", choices=("codebotler", "fixed"),
                        help="roboeval: judge exactly as CodeBotler's evaluator (default; the published numbers), "
                             "or with its accidents fixed (docs/roboeval.md)")
    parser.add_argument("--roboeval-subset", default=None, metavar="FOLDER",
                        help="roboeval: evaluate the task files of this subfolder of benchmark/tasks "
                             "(e.g. open_world_knowledge) instead of the top-level ones")
    parser.add_argument("--grammar", default="off", choices=("off", "check", "constrain"),
                        help="SynCode processor during generation")
    parser.add_argument("--grammar-code-prefix", default=None, choices=("auto", "prompt", "none"),
                        help="code the grammar sees before the completion (generation.grammar_code_prefix; a domain "
                             "eval reads it from the config)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N tasks")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds per program (default {DEFAULT_TIMEOUT_S:g}, {CANONICAL_TIMEOUT_S:g} with --canonical; "
                             f"MBPP+ allows at least {MBPPPLUS_SECONDS_PER_INPUT:g} s per input; robotics/RoboEval "
                             "default 1 s per world)")
    parser.add_argument("--workers", type=int, default=None, help="sandbox processes (default: CPU count)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    parser.add_argument("--canonical", action="store_true",
                        help="judge the benchmark's reference solutions instead of a model (judge agreement check)")
    parser.add_argument("--tasks", type=int, default=None,
                        help="robotics: number of held-out tasks (default 200, as densecode train evaluates)")
    parser.add_argument("--task-seed", type=int, default=12345,
                        help="robotics: generator seed of the held-out tasks (default 12345 = densecode train's eval set)")
    parser.add_argument("--out", default=None, help="output directory (default runs/eval/<benchmark>)")


def run(args) -> int:
    if not getattr(args, "argv", None):
        args.argv = sys.argv[2:] if len(sys.argv) > 2 and sys.argv[1] == "eval" else []
    results, paths = run_eval(EvalSpec.from_args(args))
    print()
    for key, value in results["scores"].items():
        print(f"{key:>32}: {value}")
    if results.get("breakdown"):
        print("  breakdown: " + ", ".join(f"{k} {v}" for k, v in results["breakdown"].items()))
    settings = results.get("settings") or {}
    if settings.get("roboeval_semantics"):
        print(f"  RoboEval judged with {settings['roboeval_semantics']} semantics; prompts: {settings['prompt_style']}"
              + (f" ({settings['prompt_file']})" if settings.get("prompt_file") else ""))
    print(f"wrote {paths['results']}, {paths['report']}, {paths['chart']}")
    return 0
