"""The plug-in domain: robot-style programs driving any gymnasium environment named in a config.

A config whose `domain:` is not a registered name and whose `tasks:` names a `simulator` becomes this domain under its
own name (configs/warehouse.yaml: `domain: warehouse`). The env, its API binding (program function -> action, step
output -> return value), the task generator and the scoring are all options; densecode runs the programs in the
sandbox exactly as RoboSim's, with the same outcome classes and the same `sim` reward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from densecode.domains.base import Domain, DomainOptions
from densecode.domains.robotics import STOP, program_chat_instruction


@dataclass
class PluginOptions(DomainOptions):
    # The env: a registered gymnasium id or "package.module:EnvClass", and its constructor kwargs.
    simulator: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the env's constructor
    # Program function -> {action: template with "$param" placeholders, params: [...], result: "info.key"}.
    api: dict[str, dict] = field(default_factory=dict)
    error: str | None = None  # a step-output path whose truthy value means the call failed (a robot error)
    score: str | None = None  # how a run is scored (see densecode.simulators.binding)
    end_action: Any = None  # sent after the program returns when score is end_reward
    # Tasks: a generator "package.module:function" f(split, n, seed) -> list[dict], or a JSONL file.
    source: str | None = None
    path: str | None = None  # a JSONL of task dicts (relative to the config's folder) instead of `source`
    eval_fraction: float = 0.2  # with `path`: the share of rows (from the end) held out for eval
    runs: int = 1  # runs per program (seeds task seed + k)
    timeout_s: float = 1.0  # wall seconds per run of a program
    max_calls: int = 1000  # API calls per run before it is stopped as a timeout
    clean_credit: float = 0.25  # score of a clean run that does not finish the task


class PluginDomain(Domain):
    name = "plugin"
    description = "robot-style programs for a gymnasium simulator named in the config"
    Options = PluginOptions
    default_weights: ClassVar[dict[str, float]] = {"lint": 0.1, "syntax": 0.1, "sim": 0.8, "kl": 0.9}
    stop = STOP
    sampled_metric_names = ("success", "no_robot_error")

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        from densecode.simulators import PluginTasks

        # The prompt style is the domain's (Domain.style_tasks), not the simulator's task source's.
        raw = {k: v for k, v in vars(self.options).items() if v is not None and k != "prompt_style"}
        self._source = PluginTasks(raw, self.base_dir)

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        return self._source.tasks(split, n, seed)

    @property
    def chat_instruction(self) -> str:  # the config's API, as the program calls it
        return program_chat_instruction({name: list(spec.get("params") or []) for name, spec in self.options.api.items()})

    def prepare(self) -> None:
        # Draw from both splits training uses, so that a generator returning the wrong thing fails before the
        # model loads (each task is checked as it is drawn).
        self.tasks("train", 2, int(self.options.train_seed))
        self.tasks(self.options.eval_split, 2, int(self.options.eval_seed))

    def simulator(self) -> Any:
        return self._source.backend

    def lint_builtins(self) -> list[str]:
        return list(self.options.api)

    def canonical_response(self, task: dict) -> str | None:
        return task.get("reference")

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        from densecode.simulators.backend import reason
        from densecode.simulators.runner import SEVERITY

        programs = [self.response_program(t, r) for t, r in zip(tasks, responses)]
        records = []
        for t, runs in zip(tasks, self._source.backend.run(programs, tasks)):
            worst = min(runs, key=lambda r: SEVERITY[r.outcome])
            error = None
            if worst.error:
                line = f"line {worst.error['line']}: " if worst.error.get("line") else ""
                error = line + reason(worst.error)
            records.append({"task_id": t.get("task_id"), "outcome": worst.outcome,
                            "score": float(worst.outcome == "success"), "error": error})
        return records

    def metrics(self, records: list[dict]) -> dict[str, float]:
        # Cumulative rates as RoboSim's; a simulator_error (the env's bug) counts against none of the program's.
        n = max(len(records), 1)
        count = lambda *names: sum(r["outcome"] in names for r in records) / n
        return {
            "n": float(len(records)),
            "parses": 1.0 - count("parse_error"),
            "no_python_error": 1.0 - count("parse_error", "python_error"),
            "no_robot_error": 1.0 - count("parse_error", "python_error", "robot_error"),
            "success": count("success"),
            "simulator_error": count("simulator_error"),
        }
