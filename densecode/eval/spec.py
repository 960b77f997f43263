"""What one evaluation is: `EvalSpec`, the single input of `densecode.eval.runner.evaluate` (the library call
behind `densecode eval`, `densecode.api.evaluate` and the benchmarks).

Every field has the default `densecode eval` has, so `EvalSpec(benchmark="mbpp", model="...")` from Python and
`densecode eval --benchmark mbpp --model ...` run the same evaluation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from densecode.errors import DensecodeError

log = logging.getLogger("densecode.eval")

BENCHMARKS = ("mbpp", "mbppplus", "roboeval", "robotics")
PromptStyle = Literal["auto", "chat", "completion", "codebotler", "instruction"]
GrammarMode = Literal["off", "check", "constrain"]


@dataclass
class EvalSpec:
    """One evaluation: what (benchmark / domain / config), which model, how to sample and judge, where to write."""

    benchmark: str | None = None  # mbpp, mbppplus, roboeval, robotics, or a registered domain's name
    domain: str | None = None  # a domain's held-out split (registered name, "package.module:Class")
    config: str | None = None  # a domain's config file or shipped name (a simulator plug-in)
    overrides: list[str] = field(default_factory=list)  # --set KEY=VALUE on that config
    model: str = "densecode-tiny"  # model dir, hub id, .gguf, densecode-tiny, or a densecode train run/checkpoint
    data: str | None = None  # the benchmark file (mbpp/mbppplus .jsonl) or a CodeBotler checkout (roboeval)
    split: str | None = None  # None: default_split (MBPP+: all; others: test)
    n: int = 1  # samples per task (pass@k for k <= n)
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 0.95
    max_new_tokens: int = 512
    few_shot: int = 0
    prompt_style: PromptStyle = "auto"
    roboeval_semantics: Literal["codebotler", "fixed"] = "codebotler"
    roboeval_subset: str | None = None
    grammar: GrammarMode = "off"
    grammar_code_prefix: Literal["auto", "prompt", "none"] | None = None
    limit: int | None = None  # only the first N tasks
    batch_size: int = 8
    seed: int = 0
    timeout: float | None = None  # seconds per program (None: the benchmark's default)
    workers: int | None = None  # sandbox processes (None: CPU count)
    device: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    canonical: bool = False  # judge the benchmark's reference solutions instead of a model
    tasks: int | None = None  # robotics / domains: number of held-out tasks
    task_seed: int = 12345  # robotics: generator seed of the held-out tasks (12345 = densecode train's eval set)
    out: str | None = None  # output directory (None: runs/eval/<benchmark>)
    argv: list[str] = field(default_factory=list)  # the command line, recorded in results.json

    @classmethod
    def from_args(cls, args) -> EvalSpec:
        """From `densecode eval`'s parsed arguments (their names are the fields')."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})

    def resolved(self) -> EvalSpec:
        """A copy with the split filled in (default_split), checked (`validate`)."""
        from dataclasses import replace

        spec = replace(self, overrides=list(self.overrides), argv=list(self.argv),
                       split=default_split(self.benchmark, self.split))
        spec.validate()
        return spec

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"runs/eval/{self.benchmark or self.domain or Path(self.config).stem}")

    def validate(self) -> None:
        """One DensecodeError naming the setting and the fix, for anything that cannot run."""
        if self.benchmark is None and self.domain is None and self.config is None:
            raise DensecodeError(f"name what to evaluate: --benchmark {{{','.join(BENCHMARKS)}}}, --domain NAME "
                                 "(any registered domain) or --config FILE (a domain's config, e.g. a simulator "
                                 "plug-in)")
        if self.benchmark is not None and self.domain is not None and self.benchmark != self.domain:
            raise DensecodeError("--benchmark and --domain name different things: pass one")
        if self.n < 1:
            raise DensecodeError(f"--n must be >= 1 (got {self.n})")
        if self.limit is not None and self.limit < 1:
            raise DensecodeError(f"--limit must be >= 1 (got {self.limit})")
        if self.max_new_tokens < 1:
            raise DensecodeError(f"--max-new-tokens must be >= 1 (got {self.max_new_tokens})")
        if self.temperature < 0:
            raise DensecodeError(f"--temperature must be >= 0 (got {self.temperature})")
        if self.few_shot < 0:
            raise DensecodeError(f"--few-shot must be >= 0 (got {self.few_shot})")
        if self.timeout is not None and self.timeout <= 0:
            raise DensecodeError(f"--timeout must be > 0 seconds (got {self.timeout})")
        if self.canonical and self.n != 1:
            raise DensecodeError("--canonical judges one reference per task: drop --n")
        if self.n > 1 and self.temperature == 0:
            log.warning("--n %d with --temperature 0: greedy samples are identical, so pass@k = pass@1; "
                        "use e.g. --temperature 0.8 for pass@k", self.n)
        if self.prompt_style in ("codebotler", "instruction") and self.benchmark != "roboeval":
            raise DensecodeError(f"--prompt-style {self.prompt_style} is a RoboEval prompt protocol; "
                                 f"for --benchmark {self.benchmark} use auto, chat or completion")
        if self.prompt_style in ("chat", "completion") and self.benchmark == "roboeval":
            raise DensecodeError(f"--prompt-style {self.prompt_style}: RoboEval prompts are codebotler or instruction")
        if self.roboeval_subset and self.benchmark != "roboeval":
            raise DensecodeError("--roboeval-subset applies to --benchmark roboeval only")
        if self.benchmark in ("mbpp", "mbppplus") and self.data is not None and not Path(self.data).exists():
            raise DensecodeError(f"--data {self.data}: no such file (pass the {self.benchmark} .jsonl file)")


def default_split(benchmark: str | None, split: str | None) -> str:
    """--split when not given: EvalPlus's whole set for MBPP+, the test split for everything else."""
    if split is not None:
        return split
    return "all" if benchmark == "mbppplus" else "test"
