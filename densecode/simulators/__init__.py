"""Running programs against simulators: RoboSim and any gymnasium env as a plug-in.

One runner (`runner.run_jobs`: the sandbox, the API bridge, the outcome
classes) and one backend (`backend.ProgramBackend` with the one `feedback()`
for the `sim` reward) serve every simulator:

- RoboSim (`densecode_robosim`, a pure gymnasium package): `RoboSimBackend`,
  and `evaluate` / `summarize` for the generated robotics tasks.
- any gymnasium env named in a config's `tasks:` mapping with an API binding
  (function names -> actions, step outputs -> return values):
  `GymProgramBackend`, `PluginTasks`. `configs/warehouse.yaml` is a complete
  example (the grid warehouse in `densecode.simulators.warehouse`).

    from densecode.simulators import GymProgramBackend, PluginTasks, RoboSimBackend, is_plugin
    backend = GymProgramBackend.from_config(cfg.tasks)      # SimulatorBackend for the sim reward
    source = PluginTasks(cfg.tasks)                         # tasks / train_batch
"""

from densecode.simulators.backend import ProgramBackend, feedback
from densecode.simulators.binding import ApiBinding, ApiFunction
from densecode.simulators.gym_plugin import GymApiHandler, GymProgramBackend, make_env_factory
from densecode.simulators.robosim import (
    RoboOutcome,
    RoboSimBackend,
    RoboSimHandler,
    WorldRun,
    evaluate,
    run_programs,
    summarize,
    world_runs,
)
from densecode.simulators.runner import OUTCOMES, SEVERITY, RunResult, SimJob, Verdict, parse_error, run_jobs
from densecode.simulators.tasks import PLUGIN_KEYS, PluginTasks


def is_plugin(tasks_opts) -> bool:
    """True when a config's `tasks:` (a mapping or a domain's options) names a plug-in simulator."""
    if isinstance(tasks_opts, dict) or tasks_opts is None:
        return bool((tasks_opts or {}).get("simulator"))
    return bool(getattr(tasks_opts, "simulator", None))


__all__ = [
    "OUTCOMES", "PLUGIN_KEYS", "SEVERITY", "ApiBinding", "ApiFunction", "GymApiHandler", "GymProgramBackend",
    "PluginTasks", "ProgramBackend", "RoboOutcome", "RoboSimBackend", "RoboSimHandler", "RunResult", "SimJob",
    "Verdict", "WorldRun", "evaluate", "feedback", "is_plugin", "make_env_factory", "parse_error", "run_jobs",
    "run_programs", "summarize", "world_runs",
]
