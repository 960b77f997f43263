"""The robotics domain: RoboSim's generated robot-instruction tasks, scored by running the program in RoboSim.

Prompt: `# Instruction: <instruction>\ndef task_program():\n`; the response is the function's indented body and the
executable program is the prompt's code prefix + response (the embedded model is trained on exactly this format).
Chat prompts (`tasks.prompt_style`) ask for the whole `task_program()` with the robot API listed; the program is then
the answer's code block.
Reward recipe (the dense-reward paper's reference weights; docs/rewards.md): lint 0.1, syntax 0.1, sim 0.8, kl 0.9, the robot API known to the linter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from densecode_robosim.tasks import STOP_STRINGS as STOP
from densecode_robosim.world import API_NAMES as ROBOT_API
from densecode_robosim.world import API_PARAMS

from densecode.domains.base import Domain, DomainOptions
from densecode.domains.registry import register_domain
from densecode.errors import DensecodeError
from densecode.simulators.runner import OUTCOMES


def program_chat_instruction(api: dict[str, list[str] | tuple[str, ...]]) -> str:
    """The chat request of a robot-program task: write all of `task_program()` with these API functions."""
    calls = ", ".join(f"{name}({', '.join(params)})" for name, params in api.items())
    return ("Write the Python function `task_program()` that carries out the instruction in the comment below. "
            f"The robot is driven only through these functions, which are already defined: {calls}. "
            "Reply with the complete function in one ```python code block.")


@dataclass
class RoboSimOptions:
    """RoboSimBackend's scoring options (None = the backend's own default)."""

    mode: str | None = None  # auto | concrete | dynamic (dynamic = the reference's angelic-world scoring)
    n_runs: int | None = None  # dynamic worlds per program
    clean_credit: float | None = None  # score of a clean run that fails its checks
    check_credit: float | None = None  # ... plus this times the share of checks passed
    error_penalty: float | None = None  # put on the line that raised a robot/Python error
    timeout_s: float | None = None  # wall seconds per world run
    max_calls: int | None = None  # robot API calls per run before it is stopped as a timeout
    seed: int | None = None  # seed of the dynamic worlds' draws


@dataclass
class RoboticsOptions(DomainOptions):
    sim: RoboSimOptions = field(default_factory=RoboSimOptions)


@register_domain
class RoboticsDomain(Domain):
    name = "robotics"
    description = "robot programs for RoboSim instructions, scored in the simulator"
    Options = RoboticsOptions
    default_weights: ClassVar[dict[str, float]] = {"lint": 0.1, "syntax": 0.1, "sim": 0.8, "kl": 0.9}
    # Off unless reward.weights.grounding is set: a place/object name the instruction does not mention, located.
    components: ClassVar[dict[str, str]] = {"grounding": "densecode.domains.robotics_grounding:GroundingComponent"}
    stop = STOP
    sampled_metric_names = ("success_rate", "executability", "parse_rate")
    chat_instruction = program_chat_instruction(API_PARAMS)

    def __init__(self, options: Any = None, **kwargs):
        super().__init__(options, **kwargs)
        import densecode_robosim.tasks as rtasks

        self._rtasks = rtasks
        self._backend = None

    # ------------------------------------------------------------------ tasks

    def format_prompt(self, instruction: str) -> str:
        return self._rtasks.format_prompt(instruction)

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:
        out = []
        for t in self._rtasks.generate_tasks(split, n, seed=seed):
            d = t if isinstance(t, dict) else (t.to_dict() if hasattr(t, "to_dict") else dict(vars(t)))
            d = dict(d)
            d["prompt"] = self.format_prompt(d["instruction"])
            out.append(d)
        return out

    def lint_builtins(self) -> list[str]:
        return list(ROBOT_API)

    # ------------------------------------------------------------------ rewards

    def simulator(self) -> Any:
        if self._backend is None:
            from densecode.simulators import RoboSimBackend

            sim = self.options.sim
            kwargs = {k: v for k, v in vars(sim).items() if v is not None}
            try:
                self._backend = RoboSimBackend(**kwargs)
            except (TypeError, ValueError) as exc:
                raise DensecodeError(f"tasks.sim: {exc}") from None
        return self._backend

    # ------------------------------------------------------------------ eval

    def canonical_response(self, task: dict) -> str | None:
        return task.get("reference")

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:
        from densecode.simulators import evaluate

        programs = [self.response_program(t, r) for t, r in zip(tasks, responses)]
        outcomes = evaluate(programs, tasks)
        return [{"task_id": o.task_id, "outcome": o.outcome, "score": float(o.outcome == "success"),
                 "error": o.error} for o in outcomes]

    def metrics(self, records: list[dict]) -> dict[str, float]:
        # Cumulative rates (each implies the one before), as RoboEval reports them; executability = ran with no
        # Python error and no robot-API error, the name the code domains share.
        n = len(records)
        counts = {name: sum(r["outcome"] == name for r in records) for name in OUTCOMES}
        rate = (lambda k: k / n) if n else (lambda k: 0.0)
        parses = n - counts["parse_error"]
        no_python = parses - counts["python_error"]
        no_robot = no_python - counts["robot_error"]
        out = {"n": float(n), "parses": rate(parses), "no_python_error": rate(no_python),
               "no_robot_error": rate(no_robot), "success": rate(counts["success"])}
        out["success_rate"] = out["success"]
        out["executability"] = out["no_robot_error"]
        out["parse_rate"] = out["parses"]
        return out
