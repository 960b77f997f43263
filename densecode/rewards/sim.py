"""`sim`: simulator feedback through a `SimulatorBackend` (RoboSim or a custom gym sim).

The backend receives each sample's executable program (`program_of`: the prompt's
`def task_program():` prefix + the response) and its task, and returns a
`SimFeedback`: a score in [0, 1] that goes on every code token (reference: clean
runs / runs), or `fail_value` (reference -0.1) when the score is 0; plus
per-line penalties (1-based PROGRAM lines, e.g. the line that raised a robot-API
error) added to that line's tokens. Lines inside the prompt prefix reach no token,
except when the response has no code: then they land on its last token (the stop).
A response without code gets `fail_value` on its last token. `spread: split` divides
the score and each line penalty among their tokens instead (length-neutral sums).
The verdict is the backend's (SimFeedback.outcome / incorrect / ran_cleanly), plus
the penalised lines as located errors (a parse error the simulator reports is none).
"""

from __future__ import annotations

import numpy as np

from densecode.errors import DensecodeError
from densecode.rewards.base import (
    ComponentOutput,
    LocatedError,
    RewardComponent,
    SimFeedback,
    SimulatorBackend,
    check_spread,
    diag,
    is_parse_error,
    spread_over,
    spread_score,
)
from densecode.rewards.sample import Sample, program_of


class SimComponent(RewardComponent):
    name = "sim"

    def __init__(self, simulator: SimulatorBackend | None = None, fail_value: float = -0.1,
                 line_penalty_scale: float = 1.0, spread: str = "each") -> None:
        self.simulator = simulator
        self.spread = check_spread("sim", spread)
        self.fail_value = float(fail_value)
        self.line_penalty_scale = float(line_penalty_scale)

    def __call__(self, samples: list[Sample]) -> list[ComponentOutput]:
        if self.simulator is None:
            raise DensecodeError(
                "the sim reward needs a simulator backend: pass simulator= to build_assembler "
                "(e.g. robosim's RoboSimBackend) or set reward.weights.sim=0"
            )
        programs = [program_of(s) for s in samples]
        feedback = self.simulator.evaluate([p for p, _ in programs], [s.task for s in samples])
        if len(feedback) != len(samples):
            raise DensecodeError(f"simulator returned {len(feedback)} feedbacks for {len(samples)} programs")
        return [self._map(s, pm, fb) for s, (_, pm), fb in zip(samples, programs, feedback)]

    def metrics(self, outputs: list[ComponentOutput]) -> dict[str, float]:
        # sim_score counts a sample without this component (a multi-task batch's other tasks) as 0.
        out = {"rollout/sim_score": float(np.mean([o.info.get("sim_score", 0.0) for o in outputs]))}
        if all("runs" in o.info and "successes" in o.info for o in outputs):
            out["rollout/sim_success"] = float(np.mean([o.info["successes"] / max(o.info["runs"], 1) for o in outputs]))
        return out

    def _map(self, sample: Sample, pmap, fb: SimFeedback) -> ComponentOutput:
        values = np.zeros(sample.n_tokens, dtype=np.float32)
        numbers = {k: float(v) for k, v in fb.info.items() if isinstance(v, (int, float, bool))}
        if not fb.judged:  # the simulator failed on every run (its bug): no reward either way
            return ComponentOutput(values, [], numbers, ran_cleanly=fb.ran_cleanly)
        code = sample.code_token_mask()
        score = float(min(max(fb.score, 0.0), 1.0))
        base = score if score > 0 else self.fail_value
        if code.any():
            spread_score(values, code, base, self.spread)
        elif sample.n_tokens:
            values[-1] = self.fail_value
        records, errors = [], []
        for line, penalty, reason in fb.line_penalties:
            rng = pmap.line_to_response(int(line))
            if rng is None and not code.any() and sample.n_tokens:
                # No code at all (the model stopped at once): the program failed because of that stop.
                rng = sample.token_spans[-1]
                tokens = [sample.n_tokens - 1]
            elif rng is None:
                continue
            else:
                tokens = sample.tokens_in_range(*rng)
            if tokens:
                value = self.line_penalty_scale * float(penalty)
                spread_over(values, tokens, value, self.spread)
                records.append(diag("sim-line", rng, tokens, str(reason), value, line=int(line)))
                if value < 0 and not is_parse_error(f"sim-line {reason}"):
                    errors.append(LocatedError((min(tokens), max(tokens) + 1), str(reason)))
        info = {"sim_score": score, **numbers}
        return ComponentOutput(values, records, info, outcome=fb.outcome, incorrect=fb.incorrect, errors=errors,
                               ran_cleanly=fb.ran_cleanly)
