"""Custom simulators as plug-ins: train robot-style programs against any gymnasium env.

Name the environment (a registered gymnasium id, or "package.module:EnvClass")
and an API binding (function names -> actions, step outputs -> return values)
under the config's `tasks:` mapping; densecode then runs programs against it in
the sandbox exactly as with RoboSim, with the same outcome classes and the same
`sim` reward. `configs/warehouse.yaml` is a complete example (the grid
warehouse in `densecode.simulators.warehouse`).

    from densecode.simulators import GymProgramBackend, PluginTasks, is_plugin
    backend = GymProgramBackend.from_config(cfg.tasks)      # SimulatorBackend for the sim reward
    source = PluginTasks(cfg.generation, cfg.tasks)         # train_batch / evaluate
"""

from densecode.simulators.backend import GymProgramBackend, GymApiHandler, PluginRun, make_env_factory
from densecode.simulators.binding import ApiBinding, ApiFunction
from densecode.simulators.tasks import PLUGIN_KEYS, PluginTasks


def is_plugin(tasks_opts) -> bool:
    """True when a config's `tasks:` (a mapping or a domain's options) names a plug-in simulator."""
    if isinstance(tasks_opts, dict) or tasks_opts is None:
        return bool((tasks_opts or {}).get("simulator"))
    return bool(getattr(tasks_opts, "simulator", None))


__all__ = [
    "PLUGIN_KEYS", "ApiBinding", "ApiFunction", "GymApiHandler", "GymProgramBackend", "PluginRun", "PluginTasks",
    "is_plugin", "make_env_factory",
]
