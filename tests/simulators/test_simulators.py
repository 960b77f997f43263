"""Custom simulator plug-ins: the warehouse example end to end, bindings, bad config."""

from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from densecode.domains import load_config  # `tasks:` typed by the domain
from densecode.errors import DensecodeError
from densecode.rewards.base import SimulatorBackend
from densecode.simulators import ApiBinding, GymProgramBackend, PluginTasks, is_plugin
from densecode.simulators.warehouse import WarehouseEnv, generate_tasks

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "warehouse.yaml"
H = "def task_program():\n"


@pytest.fixture(scope="module")
def source():
    cfg = load_config(CONFIG)
    assert cfg.domain == "warehouse" and is_plugin(cfg.tasks)
    return PluginTasks(cfg.tasks)


def test_warehouse_env_passes_the_checker():
    check_env(WarehouseEnv(), skip_render_check=True)


def test_references_succeed_end_to_end(source):
    prompts, tasks = source.train_batch(30, seed=0)
    assert prompts[0] == tasks[0]["prompt"] and prompts[0].endswith("\ndef task_program():\n")
    assert {t["family"] for t in tasks} == {"fetch", "search_row"}
    metrics = source.evaluate_programs([t["prompt"] + t["reference"] for t in tasks], tasks)
    assert metrics["success"] == 1.0
    fbs = source.backend.evaluate([t["reference"] for t in tasks[:4]], tasks[:4])  # bodies work too
    assert [f.score for f in fbs] == [1.0] * 4


def test_outcomes_and_line_penalties(source):
    task = generate_tasks("test", n=1, seed=0)[0]
    programs = [
        H + '    move("north")\n    move("up")\n',  # robot error on line 3 (or the wall on line 2)
        H + "    x = position()\n    y = x + 1\n",
        H + "    drop(\n",
        H + "    pass\n",
        H + "    while True:\n        scan()\n",
    ]
    backend = source.backend
    assert isinstance(backend, SimulatorBackend)
    outcomes = backend.outcomes(programs, [task] * len(programs))
    assert outcomes == ["robot_error", "python_error", "parse_error", "check_failure", "timeout"]
    fbs = backend.evaluate(programs, [task] * len(programs))
    assert fbs[1].line_penalties[0][0] == 3 and "TypeError" in fbs[1].line_penalties[0][2]
    assert fbs[2].line_penalties[0][0] == 2
    assert fbs[3].score == pytest.approx(0.25) and fbs[3].line_penalties == []
    assert fbs[4].line_penalties[0][0] == 3  # the runaway loop's last call


def test_splits_are_disjoint():
    test = {t["instruction"] for t in generate_tasks("test", n=60)}
    train = {t["instruction"] for t in generate_tasks("train", n=400)}
    assert len(test) == 60 and not test & train


def test_any_registered_gym_id_plugs_in_robosim_as_an_example():
    """RoboSim itself through the generic path: nothing in the plug-in is RoboSim-specific."""
    import densecode_robosim  # noqa: F401  (registers RoboSim-v0)

    binding = ApiBinding.from_config({
        "api": {
            "go_to": {"action": {"name": "go_to", "args": ["$location"]}, "params": ["location"]},
            "is_in_room": {"action": {"name": "is_in_room", "args": ["$0"]}, "params": ["obj"], "result": "obs.result"},
        },
        "error": "info.error.message",
    })
    backend = GymProgramBackend("RoboSim-v0", binding)
    world = {"rooms": ["kitchen", "lobby"], "objects": [["apple", "kitchen"]], "robot": "lobby"}
    task = {"task_id": "r", "instruction": "x", "reset_options": {"world": world}}
    ok = H + '    go_to("kitchen")\n    if is_in_room("apple") != "true":\n        go_to("moon")\n'
    bad = H + '    go_to(location="moon")\n'
    fb_ok, fb_bad = backend.evaluate([ok, bad], [task, task])
    assert fb_ok.score == 1.0
    assert fb_bad.score == 0.0 and fb_bad.line_penalties[0][:2] == (2, -1.0) and "moon" in fb_bad.line_penalties[0][2]


@pytest.mark.parametrize("opts,match", [
    ({}, "tasks.simulator is not set"),
    ({"simulator": "no.such.module:Env", "api": {"f": {"action": 0}}}, "cannot import"),
    ({"simulator": "NoSuchEnv-v9", "api": {"f": {"action": 0}}}, "not a registered gymnasium env id"),
    ({"simulator": "densecode.simulators.warehouse:WarehouseEnv"}, "tasks.api must map"),
    ({"simulator": "densecode.simulators.warehouse:WarehouseEnv", "api": {"class": {"action": 0}}}, "not a valid Python"),
    ({"simulator": "densecode.simulators.warehouse:WarehouseEnv", "api": {"f": {}}}, "needs an 'action'"),
    ({"simulator": "densecode.simulators.warehouse:WarehouseEnv", "api": {"f": {"action": 0, "result": "x.y"}}},
     "must be null or a path"),
    ({"simulator": "densecode.simulators.warehouse:WarehouseEnv", "api": {"f": {"action": 0}}, "score": "end_reward"},
     "needs tasks.end_action"),
])
def test_bad_plugin_config_is_a_clear_error(opts, match):
    with pytest.raises(DensecodeError, match=match):
        GymProgramBackend.from_config(opts)


def test_plugin_tasks_need_a_source(source):
    cfg = load_config(CONFIG)
    opts = {k: v for k, v in vars(cfg.tasks).items() if k != "source" and v is not None}
    with pytest.raises(DensecodeError, match="tasks.source"):
        PluginTasks(opts)
    with pytest.raises(DensecodeError, match="unknown key"):
        PluginTasks({**opts, "source": cfg.tasks.source, "simulater": 1})


def test_one_feedback_for_every_simulator():
    """backend.feedback: the sim reward's scoring shared by RoboSim and gym plug-ins (no sandbox needed)."""
    from densecode.simulators import RunResult, feedback

    err = lambda line, kind="python": {"kind": kind, "type": "IndexError", "call": "go_to", "message": "m", "line": line}
    runs = [RunResult("success"), RunResult("check_failure", progress=0.5), RunResult("robot_error", error=err(3, "robot")),
            RunResult("python_error", error=err(3, "robot")), RunResult("timeout", error={"kind": "timeout", "message": "slow",
                                                                                          "line": None})]
    fb = feedback(runs, clean_credit=0.2, check_credit=0.5, error_penalty=-1.0)
    assert fb.score == pytest.approx((1.0 + 0.2 + 0.5 * 0.8 * 0.5) / 5)
    assert fb.line_penalties == [(3, pytest.approx(-0.4), "robot error in go_to: m")]  # 2 of 5 runs failed on line 3
    assert {k: v for k, v in fb.info.items() if k != "sim_s"} == {
        "runs": 5, "clean_runs": 2, "successes": 1, "robot_errors": 1, "python_errors": 1, "timeouts": 1}
    parse = [RunResult("parse_error", error={"kind": "parse", "type": "SyntaxError", "message": "bad", "line": 2})] * 3
    fb = feedback(parse, error_penalty=-0.25)
    assert fb.score == 0.0 and fb.line_penalties == [(2, -0.25, "SyntaxError: bad")]  # once, not per run
