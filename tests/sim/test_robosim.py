"""RoboSim: world semantics (RoboEval rules and quirks), dynamic worlds, the gym env,
sandboxed runs with outcome classes and line numbers, and the reward backend."""

import gymnasium as gym
import pytest
import densecode_robosim  # noqa: F401  (registers the env ids)
from gymnasium.utils.env_checker import check_env
from densecode_robosim.env import RoboSimEnv, action
from densecode_robosim.trace import Ask, GoTo, Say, Trace, TraceElement
from densecode_robosim.world import DynamicWorld, RobotError, World


def tea_world():
    return World(
        rooms=["library", "garage", "start_loc"],
        objects=[["apple", "garage"], ["Mug", "library"]],
        people=[[".*", "library", ["green", "black"]]],
        robot="start_loc",
    )


# ----------------------------------------------------------------- concrete worlds


def test_go_to_first_matching_pattern_case_insensitive_and_traced_before_validation():
    w = tea_world()
    w.go_to("the LIBRARY please")  # stored pattern "library" searched in the argument
    assert w.location == "library"
    with pytest.raises(RobotError, match="no location"):
        w.go_to("kitchen")
    assert [e.to_list() for e in w.trace] == [["GoTo", "the LIBRARY please", None], ["GoTo", "kitchen", None]]
    assert w.location == "library"


def test_is_in_room_matches_objects_and_catch_all_agents():
    w = tea_world()
    assert w.is_in_room("apple") is False  # robot at start_loc
    w.go_to("garage")
    assert w.is_in_room("red apple") is True and w.is_in_room("mug") is False
    w.go_to("library")
    assert w.is_in_room("mug") is True  # stored "Mug", IGNORECASE
    assert w.is_in_room("a unicorn") is True  # quirk: agent ".*" matches anything
    assert w.trace[-1].to_list() == ["CheckEntity", "a unicorn", None]


def test_ask_consumes_answers_last_repeats_and_yes_no_fallback():
    w = tea_world()
    with pytest.raises(RobotError, match="nobody"):
        w.ask("Mina", "green or black?", ["green tea", "black tea"])
    w.go_to("library")
    assert w.ask("anyone", "tea?", ["Green tea", "black tea"]) == "Green tea"
    assert w.ask("ignored", "tea?", ["green tea", "black tea"]) == "black tea"
    assert w.ask("ignored", "tea?", ["green tea", "black tea"]) == "black tea"  # last answer repeats
    # answer "black" matches no option but matches the question -> the "yes" option
    assert w.ask("x", "Do you like black coffee?", ["No", "Yes"]) == "Yes"
    with pytest.raises(RobotError, match="none of the options"):
        w.ask("x", "Coffee?", ["cake", "pie"])
    with pytest.raises(RobotError, match="empty"):
        w.ask("x", "Coffee?", [])
    with pytest.raises(RobotError, match="list of strings"):
        w.ask("x", "Coffee?", "yes")
    assert w.trace[0].to_list() == ["Ask", "green or black?", ["green tea", "black tea"]]


def test_pick_place_rules():
    w = tea_world()
    with pytest.raises(RobotError, match="no 'apple'"):
        w.pick("apple")
    w.go_to("garage")
    w.pick("apple")
    assert w.holding == "apple" and not w.is_in_room("apple")
    with pytest.raises(RobotError, match="already holding"):
        w.go_to("library") or w.pick("mug")
    with pytest.raises(RobotError, match="not 'mug'"):
        w.place("mug")
    w.place("apple")
    assert w.holding is None and w.object_in("apple", "library")
    with pytest.raises(RobotError, match="not holding"):
        w.place("apple")


def test_bad_argument_types_are_robot_errors_and_untraced_queries():
    w = tea_world()
    for name, args in [("go_to", [3]), ("is_in_room", [None]), ("say", [["hi"]]), ("pick", [1.5])]:
        with pytest.raises(RobotError, match="must be a string"):
            w.call(name, args)
    with pytest.raises(RobotError, match="takes 1 argument"):
        w.call("go_to", ["a", "b"])
    n = len(w.trace)
    assert w.call("get_current_location") == "start_loc"
    assert w.call("get_all_rooms") == ["library", "garage", "start_loc"]
    assert len(w.trace) == n  # not traced


def test_trace_quirks():
    t = Trace([TraceElement("GoTo", "library"), TraceElement("Ask", "Tea?", ["green", "black"]),
               TraceElement("GoTo", "start_loc"), TraceElement("Say", "She wants GREEN")])
    assert len(t.AfterFirst(GoTo("kitchen"))) == 4  # absent pattern: the whole trace
    assert len(t.BeforeLast(Say("purple"))) == 4
    assert t.Precedes(GoTo("library"), Say("green"))
    assert not t.Precedes(Say("green"), GoTo("library"))
    assert t.ActAtFirst("library", Ask(".*", "black"))
    assert not t.ActAtFirst("library", Say("green"))
    assert t.AfterFirst(GoTo("library")).ActAtFirst("start_loc", Say("green"))


# ----------------------------------------------------------------- dynamic worlds


def test_dynamic_world_is_consistent_and_seeded():
    answers = set()
    for seed in range(20):
        w = DynamicWorld(["kitchen", "lobby"], robot="lobby", seed=seed)
        w.go_to("kitchen")
        seen = w.is_in_room("apple")
        assert all(w.is_in_room("apple") == seen for _ in range(3))  # stays as first drawn
        if seen:
            w.pick("apple")
            assert not w.is_in_room("apple")  # picked: gone
            w.place("apple")
            assert w.is_in_room("apple")
        else:
            with pytest.raises(RobotError, match="established"):
                w.pick("apple")
        if w.is_in_room("person"):
            answers.add(w.ask("Mina", "Tea or coffee?", ["tea", "coffee"]))
        else:
            with pytest.raises(RobotError, match="nobody"):
                w.ask("someone", "Tea?", ["yes", "no"])
    assert answers == {"tea", "coffee"}  # drawn from the options
    a, b = DynamicWorld(["k"], seed=3), DynamicWorld(["k"], seed=3)
    assert [a.is_in_room(f"o{i}") for i in range(10)] == [b.is_in_room(f"o{i}") for i in range(10)]
    w = DynamicWorld(["kitchen"], seed=0)
    w.ask("Omar", "Ready?", ["yes", "no"])  # asking makes the person exist
    assert w.is_in_room("Omar") and w.is_in_room("person")
    with pytest.raises(RobotError, match="empty"):
        w.say("  ")
    with pytest.raises(RobotError, match="no location"):
        w.go_to("attic")


# ----------------------------------------------------------------- gym env


@pytest.mark.parametrize("env_id", ["RoboSim-v0", "RoboSim-Dynamic-v0"])
def test_env_checker_passes(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)


def test_env_step_semantics():
    env = RoboSimEnv()
    world = {"rooms": ["kitchen", "lobby"], "objects": [["apple", "kitchen"]], "robot": "lobby"}
    checks = [{"op": "object_in", "obj": "apple", "room": "lobby"}, {"op": "holding", "obj": None}]
    obs, info = env.reset(seed=0, options={"world": world, "checks": checks})
    assert obs == {"result": "null", "location": "lobby", "holding": ""}
    obs, r, term, trunc, info = env.step(action("go_to", "kitchen"))
    assert (r, term, trunc) == (0.0, False, False) and info["trace_element"] == ["GoTo", "kitchen", None]
    obs, *_ = env.step({"api": 2, "args": '["apple"]'})  # is_in_room through the declared action space
    assert obs["result"] == "true"
    env.step(action("pick", obj="apple"))
    assert env.observation_space.contains(env._obs(None)) and env._obs(None)["holding"] == "apple"
    env.step(action("go_to", "lobby"))
    env.step(action("place", "apple"))
    obs, r, term, _, info = env.step(action("end_program"))
    assert term and r == 1.0 and all(ok for _, ok in info["checks"])
    env.reset(seed=0, options={"world": world, "checks": checks})
    obs, r, term, _, info = env.step(action("place", "apple"))
    assert term and r == -1.0 and info["error"]["call"] == "place"
    with pytest.raises(RuntimeError):
        env.step(action("say", "hi"))




def test_oversized_arguments_are_refused_cheaply():
    import time

    w = tea_world()
    start = time.perf_counter()
    with pytest.raises(RobotError, match="longer than"):
        w.call("say", ["apple " * 100000])
    with pytest.raises(RobotError, match="list argument"):
        w.call("ask", ["x", "q", ["a"] * 1000])
    from densecode_robosim.checks import judge_check, words_re

    long_say = [TraceElement("Say", "x" * 1999)]
    assert not judge_check({"op": "exists", "el": ["Say", words_re("apple", "kitchen")]}, long_say, w, "start_loc")
    assert time.perf_counter() - start < 1.0


def test_runs_never_mutate_the_world_spec():
    spec = {"rooms": ["lab"], "objects": [["cup", "lab"]], "people": [[".*", "lab", ["a", "b"]]], "robot": "lab"}
    for _ in range(2):
        w = World.from_dict(spec)
        assert w.ask("x", "q", ["a", "b"]) == "a"
        w.pick("cup")
    assert spec["people"][0][2] == ["a", "b"] and spec["objects"] == [["cup", "lab"]]
