"""benchmarks/experiments/greedy_changes.py: which changed answers differ only inside string literals."""

import importlib


def test_literal_shape_blanks_strings_only():
    bench = importlib.import_module("benchmarks.experiments.greedy_changes")
    a = 'go_to("game room")\npick("umbrella")\n'
    b = "go_to('conference room')\npick(\"umbrella\")\n"
    assert bench.literal_shape(a) == bench.literal_shape(b)
    assert bench.literal_shape(a) != bench.literal_shape('go_to("game room")\nplace("umbrella")\n')
    assert bench.literal_shape("x = (") == "x = ("  # code that does not tokenize stays as it is


def test_compare_counts_transitions_and_string_only_changes():
    bench = importlib.import_module("benchmarks.experiments.greedy_changes")
    before = (['go_to("a")\n', 'go_to("b")\n', "x = 1\n", "y = 2\n"],
              [{"outcome": "success"}, {"outcome": "robot_error"}, {"outcome": "success"}, {"outcome": "success"}])
    after = (['go_to("c")\n', 'go_to("d")\n', "x = 2 + 1\n", "y = 2\n"],
             [{"outcome": "robot_error"}, {"outcome": "success"}, {"outcome": "check_failure"}, {"outcome": "success"}])
    res = bench.compare(before, after)
    assert (res["changed"], res["changed_strings_only"]) == (3, 2)
    assert (res["lost"], res["lost_strings_only"], res["gained"], res["gained_strings_only"]) == (2, 1, 1, 1)
    assert res["transitions"] == {"success -> robot_error": 1, "robot_error -> success": 1,
                                  "success -> check_failure": 1}
    assert res["success_before"] == 0.75 and res["success_after"] == 0.5


def test_first_change_position_and_fifths():
    bench = importlib.import_module("benchmarks.experiments.greedy_changes")
    assert bench.first_change_position("abcde", "xbcde") == 0.0
    assert bench.first_change_position("abcdefghij", "abcdefghiX") == 0.9
    assert bench.first_change_position("abc", "abcdef") == 1.0
    assert bench.fifths([0.0, 0.19, 0.2, 0.5, 0.99, 1.0]) == [2, 1, 1, 0, 2]
    before = (["def f(x):\n    return x + 1\n", "ab\n"], [{"outcome": "success"}, {"outcome": "success"}])
    after = (["def f(x):\n    return x + 2\n", "zb\n"], [{"outcome": "wrong_answer"}, {"outcome": "success"}])
    res = bench.compare(before, after)
    assert res["first_change_fifths"] == [1, 0, 0, 0, 1]
    assert res["first_change_fifths_lost"] == [0, 0, 0, 0, 1] and res["first_change_fifths_gained"] == [0] * 5
