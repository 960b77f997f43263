"""Diversity-determined sampling temperature (MicroCoder-GRPO).

The paper found a staged low → high temperature (0.6 → 1.2 at ~step 140) beats
a fixed one and that continuous ramps destabilise training. The rule here:

* Stages: a non-decreasing list of temperatures, e.g. [0.6, 1.2], and the steps
  at which each later stage starts, e.g. [140]. The temperature is always one of
  the stage values: it jumps, it never ramps. Each scheduled switch applies once
  (a stage given back by a step down is not retaken by an already-passed switch).
* After every step the controller records the rollout diversity (distinct-4 ratio
  by default, see `densecode.rl.diversity`) and, when the algorithm passes it, the
  share of unparsable outputs, and keeps over the last `window` steps
      level    = mean of the diversity values,   trend = their least-squares slope,
      baseline = the level of the first full window at the current stage
  (and the same level/baseline for the unparsable share). With a full window:
  - Initial choice (`initial_levels`, off when empty; once, on the run's first
    full window): start at stage k = the number of `initial_levels` above the
    level, plus one when `initial_falling_slope` is set and trend < -it.
  - Step down one stage (chaos; off unless set) when level > `ceiling`, or the
    unparsable share's level is `unparsable_rise` or more above its baseline.
  - Raise one stage at once when level < `floor` (collapsed onto few outputs), or
    trend < -min_slope and baseline - level >= min_drop (diversity keeps falling).
  Per-step diversity is noisy (different prompts each step: distinct-4 moves by
  ±0.1 step to step on the embedded model), so "falling" needs both a negative
  trend and a real drop from where the stage started, not one bad step.
  After any stage change the history is cleared, so the new temperature gets a
  full window (and a new baseline) before it can be judged (no cascades).
  Every change is logged (logger "densecode.rl.temperature") and kept in
  `last_reason` / `changes`.
* The temperature chosen for step s is the one the step's samples are drawn
  with, and the trainer recomputes old/new logprobs with logits / T of the same
  T, so the importance ratio compares like with like.

Config: `algo.grpo.temperature_schedule` (densecode.config.TemperatureScheduleConfig);
`{stages: [T]}` is a fixed T.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "stages": [0.6, 1.2],
    "switch_steps": [140],
    "floor": 0.25,
    "window": 8,
    "min_slope": 0.0,
    "min_drop": 0.1,
    "metric": "distinct_4",
    "initial_levels": [],
    "initial_falling_slope": None,
    "ceiling": None,
    "unparsable_rise": None,
}


@dataclass
class TemperatureController:
    stages: list[float] = field(default_factory=lambda: list(DEFAULTS["stages"]))
    switch_steps: list[int] = field(default_factory=lambda: list(DEFAULTS["switch_steps"]))
    floor: float = DEFAULTS["floor"]
    window: int = DEFAULTS["window"]
    min_slope: float = DEFAULTS["min_slope"]
    min_drop: float = DEFAULTS["min_drop"]
    metric: str = DEFAULTS["metric"]
    initial_levels: list[float] = field(default_factory=list)
    initial_falling_slope: float | None = None
    ceiling: float | None = None
    unparsable_rise: float | None = None
    stage: int = 0
    last_reason: str = "start"
    history: deque = field(default_factory=deque)
    baseline: float | None = None
    unparsable: deque = field(default_factory=deque)
    unparsable_baseline: float | None = None
    switches_applied: int = 0  # scheduled switches already taken
    initial_done: bool = False
    changes: list[dict] = field(default_factory=list)  # {"stage", "temperature", "reason"} per change

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("temperature_schedule.stages must list at least one temperature")
        if len(self.switch_steps) != len(self.stages) - 1:
            raise ValueError(
                f"temperature_schedule: {len(self.stages)} stages need {len(self.stages) - 1} switch_steps, "
                f"got {self.switch_steps}"
            )
        if any(b < a for a, b in zip(self.stages, self.stages[1:])):
            raise ValueError(f"temperature_schedule.stages must not decrease: {self.stages}")
        if self.window < 2:
            raise ValueError("temperature_schedule.window must be >= 2 (a trend needs two points)")
        if len(self.initial_levels) > len(self.stages) - 1:
            raise ValueError(f"temperature_schedule.initial_levels: at most one level per later stage "
                             f"({len(self.stages) - 1}), got {self.initial_levels}")
        if any(b > a for a, b in zip(self.initial_levels, self.initial_levels[1:])):
            raise ValueError(f"temperature_schedule.initial_levels must not increase: {self.initial_levels}")
        if self.ceiling is not None and self.ceiling <= self.floor:
            raise ValueError(f"temperature_schedule.ceiling ({self.ceiling}) must be above floor ({self.floor})")

    @classmethod
    def from_config(cls, schedule: Mapping[str, Any]) -> TemperatureController:
        unknown = set(schedule) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"temperature_schedule: unknown keys {sorted(unknown)} (known: {sorted(DEFAULTS)})")
        merged = {**DEFAULTS, **schedule}
        if len(merged["stages"]) == 1:
            merged["switch_steps"] = []  # one stage: a fixed temperature, nothing to switch to
        opt = lambda v: None if v is None else float(v)
        return cls(
            stages=[float(t) for t in merged["stages"]],
            switch_steps=[int(s) for s in merged["switch_steps"]],
            floor=float(merged["floor"]),
            window=int(merged["window"]),
            min_slope=float(merged["min_slope"]),
            min_drop=float(merged["min_drop"]),
            metric=str(merged["metric"]),
            initial_levels=[float(v) for v in merged["initial_levels"]],
            initial_falling_slope=opt(merged["initial_falling_slope"]),
            ceiling=opt(merged["ceiling"]),
            unparsable_rise=opt(merged["unparsable_rise"]),
        )

    @property
    def temperature(self) -> float:
        return self.stages[self.stage]

    def level(self) -> float:
        return float(np.mean(self.history)) if self.history else float("nan")

    def trend(self) -> float:
        if len(self.history) < 2:
            return 0.0
        y = np.asarray(self.history, dtype=np.float64)
        x = np.arange(len(y), dtype=np.float64)
        return float(np.polyfit(x, y, 1)[0])

    def temperature_for_step(self, step: int) -> float:
        """The temperature to sample step `step` with (applies scheduled switches, each once)."""
        due = sum(1 for s in self.switch_steps if step >= s)
        if due > self.switches_applied:
            self.switches_applied = due
            if self.stage < len(self.stages) - 1:
                self._change(self.stage + 1, f"scheduled at step {step}")
        return self.temperature

    def update(self, diversity: float, unparsable: float | None = None) -> float:
        """Record a step's diversity (and unparsable share); change stage if the rules say so."""
        if diversity is None or not np.isfinite(diversity):
            return self.temperature
        self.history.append(float(diversity))
        if unparsable is not None and np.isfinite(unparsable):
            self.unparsable.append(float(unparsable))
        for values in (self.history, self.unparsable):
            while len(values) > self.window:
                values.popleft()
        if len(self.history) < self.window:
            return self.temperature
        level, trend = self.level(), self.trend()
        if self.baseline is None:
            self.baseline = level
        unparsable_level = float(np.mean(self.unparsable)) if len(self.unparsable) == self.window else None
        if unparsable_level is not None and self.unparsable_baseline is None:
            self.unparsable_baseline = unparsable_level
        last = len(self.stages) - 1
        if not self.initial_done:
            self.initial_done = True
            if self.initial_levels:
                stage = sum(1 for t in self.initial_levels if level < t)
                why = f"initial diversity level {level:.3f} (levels {self.initial_levels})"
                if self.initial_falling_slope is not None and trend < -self.initial_falling_slope:
                    stage += 1
                    why += f", falling {trend:+.4f}/step"
                if min(stage, last) != self.stage:
                    self._change(min(stage, last), why)
                return self.temperature
        if self.stage > 0:
            if self.ceiling is not None and level > self.ceiling:
                self._change(self.stage - 1, f"diversity level {level:.3f} > ceiling {self.ceiling} (chaotic)")
                return self.temperature
            if (self.unparsable_rise is not None and unparsable_level is not None
                    and unparsable_level - self.unparsable_baseline >= self.unparsable_rise):
                self._change(self.stage - 1, f"unparsable share {unparsable_level:.3f} rose from "
                                             f"{self.unparsable_baseline:.3f} (>= {self.unparsable_rise})")
                return self.temperature
        if self.stage < last:
            if level < self.floor:
                self._change(self.stage + 1, f"diversity level {level:.3f} < floor {self.floor}")
            elif trend < -self.min_slope and self.baseline - level >= self.min_drop:
                self._change(self.stage + 1, f"diversity falling ({trend:+.4f}/step over {self.window} steps, "
                                             f"level {level:.3f} vs {self.baseline:.3f} at stage start)")
        return self.temperature

    def _change(self, stage: int, reason: str) -> None:
        old = self.temperature
        self.stage = max(0, min(stage, len(self.stages) - 1))
        self.last_reason = reason
        self.changes.append({"stage": self.stage, "temperature": self.temperature, "reason": reason})
        logger.info("sampling temperature %.2f -> %.2f: %s", old, self.temperature, reason)
        self.history.clear()
        self.unparsable.clear()
        self.baseline = None
        self.unparsable_baseline = None

    def state(self) -> dict[str, float]:
        return {
            "temperature": self.temperature,
            "temperature_stage": float(self.stage),
            "diversity_level": self.level(),
            "diversity_trend": self.trend(),
        }

    def state_dict(self) -> dict:
        """JSON-able state for checkpoints."""
        return {"stage": self.stage, "history": list(self.history), "last_reason": self.last_reason,
                "baseline": self.baseline, "unparsable": list(self.unparsable),
                "unparsable_baseline": self.unparsable_baseline, "switches_applied": self.switches_applied,
                "initial_done": self.initial_done}

    def load_state_dict(self, state: dict) -> None:
        self.stage = int(state["stage"])
        self.history = deque(state.get("history", []))
        self.last_reason = state.get("last_reason", "resumed")
        self.baseline = state.get("baseline")
        self.unparsable = deque(state.get("unparsable", []))
        self.unparsable_baseline = state.get("unparsable_baseline")
        # Checkpoints from before these fields: every switch due by the saved stage was taken.
        self.switches_applied = int(state.get("switches_applied", self.stage))
        self.initial_done = bool(state.get("initial_done", True))
