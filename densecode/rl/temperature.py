"""Diversity-determined sampling temperature (MicroCoder-GRPO).

The paper found a staged low → high temperature (0.6 → 1.2 at ~step 140) beats
a fixed one and that continuous ramps destabilise training. The rule here:

* Stages: a list of temperatures, e.g. [0.6, 1.2] (or [0.6, 1.2, 1.8]), and the
  steps at which each later stage starts, e.g. [140]. The temperature is always
  one of the stage values: it jumps, it never ramps, and it never goes down.
* Early raise: after every step the controller records the rollout diversity
  (distinct-4 ratio by default, see `densecode.rl.diversity`) and keeps
      level    = mean of the last `window` values,
      trend    = least-squares slope of the last `window` values (per step),
      baseline = the level of the first full window at the current stage.
  With a full window, it moves to the next stage at once when
      level < floor                                   (collapsed onto few outputs), or
      trend < -min_slope and baseline - level >= min_drop   (diversity keeps falling).
  Per-step diversity is noisy (different prompts each step: distinct-4 moves by
  ±0.1 step to step on the embedded model), so "falling" needs both a negative
  trend and a real drop from where the stage started, not one bad step.
  After any stage change the history is cleared, so the new temperature gets a
  full window (and a new baseline) before it can be judged (no cascade of raises).
* The temperature chosen for step s is the one the step's samples are drawn
  with, and the trainer recomputes old/new logprobs with logits / T of the same
  T, so the importance ratio compares like with like.

Config (`algo.temperature_schedule`, all optional):
  stages: [0.6, 1.2]   switch_steps: [140]   floor: 0.25   window: 8
  min_slope: 0.0       min_drop: 0.1         metric: distinct_4 (or edit_distance)
An empty mapping means MicroCoder's defaults above; `{stages: [T]}` is a fixed T.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULTS: dict[str, Any] = {
    "stages": [0.6, 1.2],
    "switch_steps": [140],
    "floor": 0.25,
    "window": 8,
    "min_slope": 0.0,
    "min_drop": 0.1,
    "metric": "distinct_4",
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
    stage: int = 0
    last_reason: str = "start"
    history: deque = field(default_factory=deque)
    baseline: float | None = None

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

    @classmethod
    def from_config(cls, schedule: Mapping[str, Any]) -> TemperatureController:
        unknown = set(schedule) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"algo.temperature_schedule: unknown keys {sorted(unknown)} (known: {sorted(DEFAULTS)})")
        merged = {**DEFAULTS, **schedule}
        if len(merged["stages"]) == 1:
            merged["switch_steps"] = []  # one stage: a fixed temperature, nothing to switch to
        return cls(
            stages=[float(t) for t in merged["stages"]],
            switch_steps=[int(s) for s in merged["switch_steps"]],
            floor=float(merged["floor"]),
            window=int(merged["window"]),
            min_slope=float(merged["min_slope"]),
            min_drop=float(merged["min_drop"]),
            metric=str(merged["metric"]),
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
        """The temperature to sample step `step` with (applies scheduled switches)."""
        scheduled = sum(1 for s in self.switch_steps if step >= s)
        if scheduled > self.stage:
            self._advance(scheduled, f"scheduled at step {step}")
        return self.temperature

    def update(self, diversity: float) -> float:
        """Record a step's diversity; raise early if level or trend says so. Returns the temperature."""
        if diversity is None or not np.isfinite(diversity):
            return self.temperature
        self.history.append(float(diversity))
        while len(self.history) > self.window:
            self.history.popleft()
        if len(self.history) == self.window:
            level, trend = self.level(), self.trend()
            if self.baseline is None:
                self.baseline = level
            if self.stage < len(self.stages) - 1:
                if level < self.floor:
                    self._advance(self.stage + 1, f"diversity level {level:.3f} < floor {self.floor}")
                elif trend < -self.min_slope and self.baseline - level >= self.min_drop:
                    self._advance(self.stage + 1, f"diversity falling ({trend:+.4f}/step over {self.window} steps, "
                                                  f"level {level:.3f} vs {self.baseline:.3f} at stage start)")
        return self.temperature

    def _advance(self, stage: int, reason: str) -> None:
        self.stage = min(stage, len(self.stages) - 1)
        self.last_reason = reason
        self.history.clear()
        self.baseline = None

    def state(self) -> dict[str, float]:
        return {
            "temperature": self.temperature,
            "temperature_stage": float(self.stage),
            "diversity_level": self.level(),
            "diversity_trend": self.trend(),
        }
