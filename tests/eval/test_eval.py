"""densecode eval: pass@k, code extraction, EvalPlus judging, reports, model resolution, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from densecode.errors import DensecodeError
from densecode.eval import extract, mbpp, passk
from densecode.eval.report import BREAKDOWN_COLUMNS, render_markdown, write_run

# ------------------------------------------------------------------ pass@k


def _comb_pass_at_k(n, c, k):
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("n,c,k,expected", [
    (10, 3, 1, 0.3),
    (10, 3, 5, 1 - 21 / 252),  # C(7,5)/C(10,5)
    (5, 0, 1, 0.0),
    (5, 5, 3, 1.0),
    (20, 18, 3, 1.0),  # n - c < k: every draw of 3 holds a correct one
    (200, 1, 100, 0.5),
    (1, 1, 1, 1.0),
])
def test_pass_at_k_known_values(n, c, k, expected):
    assert passk.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_combinatorial_formula():
    for n in range(1, 15):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert passk.pass_at_k(n, c, k) == pytest.approx(_comb_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_rejects_bad_arguments_and_averages():
    with pytest.raises(ValueError):
        passk.pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        passk.pass_at_k(3, 1, 4)
    assert passk.mean_pass_at_k([10, 10], [3, 0], 1) == pytest.approx(0.15)
    assert passk.ks_for(1) == [1] and passk.ks_for(10) == [1, 4, 5, 10] and passk.ks_for(16) == [1, 4, 5, 10, 16]


# ------------------------------------------------------------------ extraction


def test_extract_first_python_block_of_several():
    response = (
        "Here is some shell:\n```bash\nls -la\n```\nand the solution:\n"
        "```python\ndef f(x):\n    return x + 1\n```\nAlternative:\n```python\ndef f(x):\n    return 0\n```\n"
    )
    assert extract.extract_code(response, "f") == "def f(x):\n    return x + 1\n"


def test_extract_untagged_block_when_no_python_tag():
    response = "Sure.\n```\nimport math\ndef area(r):\n    return math.pi * r * r\n```"
    code = extract.extract_code(response, "area")
    assert code.startswith("import math\n") and "def area(r):" in code


def test_extract_no_block_takes_whole_text():
    response = "def g():\n    return 2\n\nprint(g())\nassert g() == 3\n"
    # whole text is code; the model's own assert and print are dropped
    assert extract.extract_code(response, "g") == "def g():\n    return 2\n"


def test_extract_unterminated_block_runs_to_end_and_cuts_truncated_tail():
    response = "```python\ndef h(a, b):\n    return a * b\n\ndef broken(:\n    retu"
    assert extract.extract_code(response, "h") == "def h(a, b):\n    return a * b\n"


def test_sanitize_drops_main_guard_and_keeps_imports_classes_assignments():
    code = (
        "import os\nfrom math import sqrt\nLIMIT = 10\nclass P:\n    pass\n@staticmethod\ndef dec():\n    pass\n"
        "def k(n):\n    return sqrt(n)\nif __name__ == '__main__':\n    print(k(4))\nfor i in range(3):\n    k(i)\n"
    )
    out = extract.sanitize(code, "k")
    assert "if __name__" not in out and "for i" not in out
    for kept in ("import os", "from math import sqrt", "LIMIT = 10", "class P:", "@staticmethod", "def k(n):"):
        assert kept in out


def test_sanitize_keeps_unparsable_code_and_missing_entry_point_unchanged():
    assert extract.sanitize("def f(:\n  pass", "f") == "def f(:\n  pass"
    code = "if True:\n    def f():\n        return 1\n"
    assert extract.sanitize(code, "f") == code  # the definition is inside a block we would drop


def test_code_blocks_reports_languages_and_closure():
    blocks = extract.code_blocks("```py\na = 1\n```\ntext\n```\nb = 2")
    assert [(b.language, b.code, b.closed) for b in blocks] == [("py", "a = 1", True), ("", "b = 2", False)]


# ------------------------------------------------------------------ MBPP data and prompts


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mbpp_row(task_id: int, name: str = "double") -> dict:
    return {"task_id": task_id, "text": f"Write a function {name}.", "code": f"def {name}(x):\n    return 2 * x",
            "test_setup_code": "", "test_list": [f"assert {name}(2) == 4", f"assert {name}(0) == 0"],
            "challenge_test_list": []}


def test_mbpp_splits_and_entry_point(tmp_path):
    path = _write_jsonl(tmp_path / "m.jsonl", [_mbpp_row(i) for i in (2, 11, 510, 511, 600, 601)])
    assert [t.number for t in mbpp.load_tasks("mbpp", path, "test")] == [11, 510]
    assert [t.number for t in mbpp.load_tasks("mbpp", path, "validation")] == [511, 600]
    assert [t.number for t in mbpp.load_tasks("mbpp", path, "train")] == [601]
    assert len(mbpp.load_tasks("mbpp", path, "all")) == 6
    task = mbpp.load_tasks("mbpp", path, "prompt")[0]
    assert task.entry_point == "double"
    assert task.problem == '"""\nWrite a function double.\nassert double(2) == 4\n"""\n'


def _plus_row(number: int) -> dict:
    return {"task_id": f"Mbpp/{number}", "prompt": f'"""\nWrite double.\nassert double(2) == 4\n"""\n',
            "entry_point": "double", "canonical_solution": "def double(x):\n    return 2 * x\n",
            "base_input": [[2]], "plus_input": [[3]], "atol": 0}


def test_mbppplus_split_selects_mbpp_ids_and_cli_default_is_all(tmp_path):
    # MBPP+ holds train-split problems (601-974): a model trained on them is judged on the test ids only.
    path = _write_jsonl(tmp_path / "plus.jsonl", [_plus_row(i) for i in (2, 11, 510, 511, 601, 700)])
    assert [t.number for t in mbpp.load_tasks("mbppplus", path, "all")] == [2, 11, 510, 511, 601, 700]
    assert [t.number for t in mbpp.load_tasks("mbppplus", path, "test")] == [11, 510]
    assert [t.number for t in mbpp.load_tasks("mbppplus", path, "train")] == [601, 700]
    from densecode.eval.spec import default_split

    assert [default_split("mbppplus", None), default_split("mbpp", None), default_split(None, None)] == \
        ["all", "test", "test"]
    assert default_split("mbppplus", "test") == "test"


def test_mbpp_loader_errors_name_the_file_and_fix(tmp_path):
    with pytest.raises(DensecodeError, match="--data"):
        mbpp.load_tasks("mbpp", tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_mbpp_row(11)) + "\n{not json\n")
    with pytest.raises(DensecodeError, match=r"bad.jsonl:2"):
        mbpp.load_tasks("mbpp", bad)
    wrong = _write_jsonl(tmp_path / "wrong.jsonl", [{"task_id": 11, "text": "x"}])
    with pytest.raises(DensecodeError, match="missing field"):
        mbpp.load_tasks("mbpp", wrong)
    with pytest.raises(DensecodeError, match="no mbpp tasks"):
        mbpp.load_tasks("mbpp", _write_jsonl(tmp_path / "p.jsonl", [_mbpp_row(3)]), "test")


def test_hub_fallback_offline_says_to_pass_data(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DensecodeError, match="pass --data"):
        mbpp.load_tasks("mbppplus", None)


def test_prompts_completion_few_shot_and_chat():
    task = mbpp.CodeTask("11", 11, "Write f.", '"""\nWrite f.\nassert f() == 1\n"""\n', "f", "def f():\n    return 1\n")
    shots = mbpp.few_shot_examples(2)
    prompt = mbpp.completion_prompt(task, shots)
    assert prompt.endswith(task.problem) and "def sum_of_squares" in prompt and "def count_vowels" in prompt

    class ChatTok:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert not tokenize and add_generation_prompt
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    chat = mbpp.chat_prompt(task, shots[:1], ChatTok())
    assert chat.count("<user>") == 2 and chat.endswith(mbpp.CHAT_RESPONSE_PREFIX)
    # the chat answer continues inside the opened block; extraction closes over it
    program = mbpp.program_from_completion(task, "def f():\n    return 1\n```\nDone.", "chat")
    assert program == "def f():\n    return 1\n"
    program = mbpp.program_from_completion(task, "def f():\n    return 1\nprint(f())", "completion")
    assert program == "def f():\n    return 1\n"


def test_evalplus_input_types_restored():
    task = mbpp.CodeTask("Mbpp/2", 2, "", "", "similar_elements", "", base_input=[[[1, 2], [2, 3]]],
                         plus_input=[[[], [4]]])
    inputs, n_base = mbpp.evalplus_inputs(task)
    assert n_base == 1 and inputs == [[(1, 2), (2, 3)], [(), (4,)]]
    assert all(type(a) is tuple for args in inputs for a in args)
    task124 = mbpp.CodeTask("Mbpp/124", 124, "", "", "angle_complex", "", base_input=[["0", "1j"]])
    assert mbpp.evalplus_inputs(task124)[0] == [[0.0, 1j]]


# ------------------------------------------------------------------ EvalPlus judging in the sandbox


def _plus_task(number, entry, canonical, base, plus, atol=0.0):
    return mbpp.CodeTask(f"Mbpp/{number}", number, "t", "", entry, canonical, base_input=base, plus_input=plus,
                         atol=atol)


def test_evalplus_judging_atol_base_plus_and_special_oracles():
    from densecode.sandbox import SandboxPool

    ratio = _plus_task(900, "ratio", "def ratio(a, b):\n    return a / b\n", [[1, 3]], [[2, 3], [10, 7]], atol=1e-4)
    default_atol = _plus_task(901, "half", "def half(a):\n    return a / 2\n", [[1]], [[3]])
    sets = _plus_task(2, "similar_elements", "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
                      [[[3, 4, 5], [5, 4, 9]]], [[[1, 2], [2, 1]]])
    not_none = _plus_task(737, "check_str",
                          "import re\ndef check_str(s):\n    return re.search('^[aeiou]', s)\n", [["apple"]], [["xyz"]])
    wrapper_tests = [
        (ratio, "def ratio(a, b):\n    return round(a / b, 4)\n", "pass", "pass"),  # within atol 1e-4
        (ratio, "def ratio(a, b):\n    return round(a / b, 2)\n", "fail", "fail"),  # 3e-3 off
        (ratio, "def ratio(a, b):\n    return 0.3333 if (a, b) == (1, 3) else 0\n", "pass", "fail"),  # base only
        (default_atol, "def half(a):\n    return a / 2 + 1e-8\n", "pass", "pass"),  # atol 0 + float: 1e-6
        (default_atol, "def half(a):\n    return a / 2 + 1e-4\n", "fail", "fail"),
        (sets, "def similar_elements(a, b):\n    return tuple(sorted(set(b) & set(a), reverse=True))\n", "pass", "pass"),
        (sets, "def similar_elements(a, b):\n    return (4,)\n", "fail", "fail"),
        (not_none, "def check_str(s):\n    return s[0] in 'aeiou'\n", "pass", "pass"),  # bool compares as itself
        (not_none, "def check_str(s):\n    return True\n", "pass", "fail"),
        (not_none, "def check_str(s):\n    return 'match'\n", "pass", "fail"),  # not None, like a match object
    ]
    jobs = [mbpp.mbppplus_job(task, program, 10.0) for task, program, _, _ in wrapper_tests]
    with SandboxPool(max_workers=2) as pool:
        results = pool.run(jobs)
    got = [(mbpp.verdict_record("mbppplus", t, r)["base_verdict"], mbpp.verdict_record("mbppplus", t, r)["plus_verdict"])
           for (t, *_), r in zip(wrapper_tests, results)]
    assert got == [(b, p) for _, _, b, p in wrapper_tests]


def test_mbpp_assert_judging_records_outcome_and_error():
    from densecode.sandbox import SandboxPool

    task = mbpp.mbpp_task_from_record(_mbpp_row(11), "test")
    programs = ["def double(x):\n    return 2 * x\n", "def double(x):\n    return x + 2\n", "def double(x):\n    return y\n"]
    with SandboxPool(max_workers=2) as pool:
        results = pool.run([mbpp.mbpp_job(task, p, 10.0) for p in programs])
    records = [mbpp.verdict_record("mbpp", task, r) for r in results]
    assert [r["verdict"] for r in records] == ["pass", "fail", "fail"]
    assert records[1]["outcome"] == "wrong_answer" and records[1]["n_passed"] == 1
    assert records[2]["outcome"] == "runtime_error" and "NameError" in records[2]["error"]


# ------------------------------------------------------------------ reports


def _fake_results(breakdown=True):
    results = {
        "benchmark": "roboeval", "model": "m", "created": "today", "command": "densecode eval x",
        "settings": {"n": 1}, "scores": {"pass@1": 0.175, "successes": 14, "prompts": 80},
        "outcomes": {"python_error": 11, "success": 14},
        "timing": {"generate_s": 1.5},
        "tasks": [{"task_id": "T/0", "verdict": "fail", "outcome": "python_error",
                   "error": "SyntaxError: bad | pipe\nnext line", "n": 1, "n_correct": 0}],
    }
    if breakdown:
        results["breakdown"] = {"Python error": 11, "robot-execution error": 28, "task failure": 27, "success": 14}
        results["breakdown_total"] = 80
    return results


def test_report_renders_paper_breakdown_layout_and_escapes_cells():
    md = render_markdown(_fake_results())
    header = "| model | " + " | ".join(BREAKDOWN_COLUMNS) + " |"
    assert header in md
    assert "| m | 11 | 28 | 27 | 14 |" in md
    assert "out of 80 prompts" in md
    assert "| pass@1 | 0.175 |" in md
    assert "bad \\| pipe ⏎ next line" in md  # one table row per task, whatever the error text
    assert "Error breakdown" not in render_markdown(_fake_results(breakdown=False))


def test_write_run_writes_json_markdown_png(tmp_path):
    paths = write_run(tmp_path / "run", _fake_results())
    assert json.loads(paths["results"].read_text())["scores"]["successes"] == 14
    assert paths["report"].read_text().startswith("# densecode eval: roboeval")
    assert paths["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ models and CLI errors


def test_resolve_eval_model_accepts_train_run_dirs(tmp_path):
    from densecode.eval.runner import resolve_eval_model

    run = tmp_path / "run"
    for step in ("step-000010", "step-000020"):
        (run / "checkpoints" / step / "model").mkdir(parents=True)
        (run / "checkpoints" / step / "model" / "config.json").write_text("{}")
    (run / "checkpoints" / "latest").write_text("step-000010\n")
    expected = str(run / "checkpoints" / "step-000010" / "model")
    assert resolve_eval_model(str(run)) == (expected, None)
    assert resolve_eval_model(str(run / "checkpoints" / "step-000010")) == (expected, None)
    (run / "checkpoints" / "latest").unlink()  # without `latest`, the highest step wins
    assert resolve_eval_model(str(run))[0].endswith("step-000020/model")
    assert resolve_eval_model("org/some-model") == ("org/some-model", None)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "densecode-tiny"}))
    assert resolve_eval_model(str(adapter)) == ("densecode-tiny", str(adapter))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DensecodeError, match="no model there"):
        resolve_eval_model(str(empty))


def test_cli_missing_data_errors(tmp_path, capsys, monkeypatch):
    from densecode.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["eval", "--benchmark", "mbpp", "--data", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "mbppplus", "--canonical", "--out", str(tmp_path)]) == 2
    assert "pass --data" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "roboeval", "--out", str(tmp_path)]) == 2
    assert "benchmark/tasks" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "mbpp", "--n", "0", "--out", str(tmp_path)]) == 2


def test_cli_canonical_on_small_file_agrees(tmp_path):
    """--canonical judges the dataset's own solutions; a wrong reference shows up as a failure."""
    from densecode.cli import main

    rows = [_mbpp_row(11), _mbpp_row(12, "triple")]
    rows[1]["test_list"] = ["assert triple(2) == 6"]  # the reference doubles: must fail
    data = _write_jsonl(tmp_path / "m.jsonl", rows)
    assert main(["eval", "--benchmark", "mbpp", "--canonical", "--data", str(data), "--out", str(tmp_path / "o")]) == 0
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["scores"]["MBPP pass@1"] == 0.5
    assert [t["verdict"] for t in results["tasks"]] == ["pass", "fail"]
    assert results["tasks"][1]["outcome"] == "wrong_answer"


def test_robotics_canonical_references_all_succeed(tmp_path):
    from densecode.cli import main

    assert main(["eval", "--benchmark", "robotics", "--canonical", "--tasks", "6", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["scores"]["success pass@1"] == 1.0
    assert results["breakdown"] == {"Python error": 0, "robot-execution error": 0, "task failure": 0, "success": 6}


def test_roboeval_example_task_with_tiny_model(tiny_model_dir, tmp_path):
    from densecode.cli import main

    example = Path(__file__).resolve().parents[3] / "shared" / "docs" / "example_task.py"
    if not example.is_file():
        pytest.skip(f"RoboEval example task not found at {example}")
    assert main(["eval", "--benchmark", "roboeval", "--data", str(example), "--model", str(tiny_model_dir),
                 "--max-new-tokens", "16", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert sum(results["breakdown"].values()) == results["breakdown_total"] == len(results["tasks"])
    assert "robot-execution error" in (tmp_path / "report.md").read_text()


def test_chat_model_prompting_and_pass_at_k_end_to_end(tiny_model_dir, tmp_path):
    """A tokenizer with a chat template gets chat prompts (pre-filled python block); --n 5 reports pass@5."""
    import shutil

    from densecode.cli import main

    model = tmp_path / "chat-model"
    shutil.copytree(tiny_model_dir, model)
    config_path = model / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    config_path.write_text(json.dumps(config))
    rows = [_mbpp_row(n, f"f{n}") for n in (2, 3, 11, 12)]  # 2 and 3 are the prompt split: the few-shot examples
    data = _write_jsonl(tmp_path / "m.jsonl", rows)
    out = tmp_path / "out"
    assert main(["eval", "--benchmark", "mbpp", "--model", str(model), "--data", str(data), "--few-shot", "1",
                 "--n", "5", "--temperature", "1.0", "--max-new-tokens", "12", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["prompt_style"] == "chat"
    assert [t["task_id"] for t in results["tasks"]] == ["11", "12"]
    prompt = results["tasks"][0]["prompt"]
    assert prompt.endswith(mbpp.CHAT_RESPONSE_PREFIX) and prompt.count("<|user|>") == 2  # 1 shot + the task
    assert {"MBPP pass@1", "MBPP pass@5"} <= set(results["scores"])
    assert all(t["n"] == 5 and len(t["samples"]) == 5 for t in results["tasks"])


def test_prompt_longer_than_context_scores_as_failure(tiny_model_dir, tmp_path):
    from densecode.cli import main

    rows = [_mbpp_row(11), _mbpp_row(12, "long_one")]
    rows[1]["text"] = "Write a function long_one. " + "Very long statement. " * 300  # >> 512 tokens
    data = _write_jsonl(tmp_path / "m.jsonl", rows)
    assert main(["eval", "--benchmark", "mbpp", "--model", str(tiny_model_dir), "--data", str(data),
                 "--max-new-tokens", "8", "--out", str(tmp_path / "o")]) == 0
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [t["outcome"] == "prompt_too_long" for t in results["tasks"]] == [False, True]
    assert results["scores"]["tasks"] == 2 and results["timing"]["prompts_too_long"] == 1


def test_roboeval_breakdown_columns_from_known_programs(tmp_path, monkeypatch):
    """Five phrasings, five programs with known fates -> the paper's four columns."""
    from densecode.cli import main
    from densecode.eval import runner

    example = Path(__file__).resolve().parents[3] / "shared" / "docs" / "example_task.py"
    if not example.is_file():
        pytest.skip(f"RoboEval example task not found at {example}")
    good = ("    go_to('library')\n    answer = ask('Mina', 'Green tea or black tea?', ['green tea', 'black tea'])\n"
            "    go_to('start_loc')\n    say('Mina wants ' + answer)\n")
    bodies = [
        good,
        "    go_to('library')\n    x = undefined_name\n",  # Python error
        "    go_to('the moon')\n",  # robot-execution error: no such location
        "    say('hello')\n",  # runs cleanly, fails the task check
        "    go_to('library'\n",  # syntax error: counts as a Python error in the paper's table
    ]
    monkeypatch.setattr(runner, "_robo_bodies", lambda args, prompts, out: [[b] for b in bodies])
    assert main(["eval", "--benchmark", "roboeval", "--data", str(example), "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["breakdown"] == {"Python error": 2, "robot-execution error": 1, "task failure": 1, "success": 1}
    assert results["scores"]["successes"] == 1 and results["scores"]["pass@1"] == 0.2
    assert [t["outcome"] for t in results["tasks"]] == ["success", "python_error", "robot_error", "check_failure",
                                                        "parse_error"]
