"""RoboSim: a gymnasium simulator for robot programs, densecode's robotics task
suite, and the RoboEval loader. Importing it registers `RoboSim-v0` and
`RoboSim-Dynamic-v0`."""

from robosim.tasks import STOP_STRINGS, RoboTask, format_prompt, generate_tasks
from robosim.world import API_NAMES, DynamicWorld, RobotError, World

__all__ = ["API_NAMES", "STOP_STRINGS", "DynamicWorld", "RoboTask", "RobotError", "World", "format_prompt", "generate_tasks"]
