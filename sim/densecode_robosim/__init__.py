"""RoboSim (import name `densecode_robosim`): a gymnasium simulator for robot programs and densecode's robotics
task suite. A pure gymnasium package: it imports nothing from densecode (densecode runs programs against it, in
its sandbox, from `densecode.simulators`).

Importing `densecode_robosim` registers the gymnasium ids `RoboSim-v0` (concrete worlds)
and `RoboSim-Dynamic-v0` (angelic worlds invented as the program queries them).
"""

import gymnasium as _gym

from densecode_robosim.tasks import STOP_STRINGS, RoboTask, format_prompt, generate_tasks
from densecode_robosim.world import API_NAMES, DynamicWorld, RobotError, World

for _id, _kwargs in (("RoboSim-v0", {}), ("RoboSim-Dynamic-v0", {"dynamic": True})):
    if _id not in _gym.registry:
        _gym.register(id=_id, entry_point="densecode_robosim.env:RoboSimEnv", kwargs=_kwargs)


__all__ = [
    "API_NAMES", "STOP_STRINGS", "DynamicWorld", "RoboTask", "RobotError", "World", "format_prompt", "generate_tasks",
]
