"""RoboSim (import name `densecode_robosim`): a gymnasium simulator for robot programs, densecode's robotics task
suite, and the RoboEval loader.

Importing `densecode_robosim` registers the gymnasium ids `RoboSim-v0` (concrete worlds)
and `RoboSim-Dynamic-v0` (angelic worlds invented as the program queries them).
"""

import gymnasium as _gym

from densecode_robosim.tasks import STOP_STRINGS, RoboTask, format_prompt, generate_tasks
from densecode_robosim.world import API_NAMES, DynamicWorld, RobotError, World

for _id, _kwargs in (("RoboSim-v0", {}), ("RoboSim-Dynamic-v0", {"dynamic": True})):
    if _id not in _gym.registry:
        _gym.register(id=_id, entry_point="densecode_robosim.env:RoboSimEnv", kwargs=_kwargs)


def __getattr__(name):
    # heavier pieces load on first use (they import the sandbox)
    if name in ("RoboSimBackend",):
        from densecode_robosim.backend import RoboSimBackend

        return RoboSimBackend
    if name in ("evaluate", "summarize", "RoboOutcome"):
        from densecode_robosim import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'densecode_robosim' has no attribute {name!r}")


__all__ = [
    "API_NAMES", "STOP_STRINGS", "DynamicWorld", "RoboOutcome", "RoboSimBackend", "RoboTask", "RobotError",
    "World", "evaluate", "format_prompt", "generate_tasks", "summarize",
]
