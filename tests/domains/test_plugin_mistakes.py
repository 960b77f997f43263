"""Every silent mistake of issue 23 is one clear line and exit code 2 (`densecode check`, eval, train).

Each test writes a copy of the elevator example (examples/elevator) with one mistake into its own folder, which
is not on the import path: the module and the `base:` resolve from the config's folder.
"""

from pathlib import Path

import numpy as np
import yaml

from densecode.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elevator"


def plugin(tmp_path: Path, name: str, edit=None, env_code: str = "") -> Path:
    """A plug-in config in tmp_path whose env module (a copy of elevator_sim, plus `env_code`) lies beside it."""
    module = f"elev_{name}"  # one module name per test: imports are cached per process
    (tmp_path / f"{module}.py").write_text((EXAMPLE / "elevator_sim.py").read_text() + env_code)
    cfg = yaml.safe_load((EXAMPLE / "elevator.yaml").read_text())
    cfg["tasks"]["simulator"] = f"{module}:ElevatorEnv"
    cfg["tasks"]["source"] = f"{module}:generate_tasks"
    if edit:
        edit(cfg)
    path = tmp_path / "sim.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def check(path: Path, capsys, *extra: str) -> tuple[int, list[str]]:
    rc = main(["check", "--config", str(path), "--tasks", "3", "--split", "test", *extra])
    err = capsys.readouterr().err
    return rc, [line for line in err.splitlines() if line.startswith(("problem:", "densecode check: error:"))]


def test_the_example_checks_clean(tmp_path, capsys):
    rc, problems = check(plugin(tmp_path, "clean"), capsys)
    assert (rc, problems) == (0, [])


def test_misspelt_placeholder(tmp_path, capsys):
    def edit(cfg):
        cfg["tasks"]["api"]["go_to"]["action"]["floor"] = "$flor"

    path = plugin(tmp_path, "placeholder", edit)
    rc, lines = check(path, capsys)
    assert rc == 2 and len(lines) == 1
    assert "tasks.api.go_to.action: placeholder '$flor' matches no parameter" in lines[0]
    assert "did you mean '$floor'?" in lines[0]
    # the same one line for every command that loads the domain
    assert main(["eval", "--config", str(path), "--canonical", "--tasks", "2", "--out", str(tmp_path / "ev")]) == 2
    assert "'$flor' matches no parameter" in capsys.readouterr().err


def test_literal_dollar_text_is_written_twice():
    from densecode.simulators import ApiBinding

    b = ApiBinding.from_config({"api": {"pay": {"action": {"price": "$$5", "who": "$who"}, "params": ["who"]}}})
    assert b.functions["pay"].build_action(["ana"], {}) == {"price": "$5", "who": "ana"}


def test_unused_parameter(tmp_path, capsys):
    def edit(cfg):
        cfg["tasks"]["api"]["pick_up"]["action"]["name"] = "Ana"  # the argument is dropped

    rc, lines = check(plugin(tmp_path, "unused", edit), capsys)
    assert rc == 2
    assert any("tasks.api.pick_up.params: 'name' is never used" in line for line in lines)


def test_misspelt_result_path(tmp_path, capsys):
    def edit(cfg):
        cfg["tasks"]["api"]["waiting"]["result"] = "info.reslt"

    rc, lines = check(plugin(tmp_path, "result", edit), capsys, "--tasks", "6")
    assert rc == 2 and len(lines) == 1, lines
    assert "tasks.api.waiting.result 'info.reslt' never resolves on a real step" in lines[0]
    assert "did you mean info.result?" in lines[0]


def test_misspelt_error_path(tmp_path, capsys):
    def edit(cfg):
        cfg["tasks"]["error"] = "info.eror"

    rc, lines = check(plugin(tmp_path, "errorpath", edit), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert "tasks.error 'info.eror' resolved on none of" in lines[0] and "did you mean info.error?" in lines[0]


def test_misspelt_error_path_is_warned_about_in_training_too(tmp_path, caplog):
    """Without `densecode check`: the backend warns once when the error path resolved on none of 50+ steps."""
    from densecode.config import load_config
    from densecode.domains import build_domain

    def edit(cfg):
        cfg["tasks"]["error"] = "info.eror"

    domain = build_domain(load_config(plugin(tmp_path, "errwarn", edit)))
    backend = domain.simulator()
    tasks = domain.tasks("train", 12, 0)
    with caplog.at_level("WARNING", logger="densecode.simulators"):
        for _ in range(2):  # two batches: warned once
            backend.evaluate([t["reference"] for t in tasks], tasks)
    warned = [r.getMessage() for r in caplog.records if "resolved on none of" in r.getMessage()]
    assert backend.steps_seen >= 50 and len(warned) == 1, (backend.steps_seen, warned)
    assert "tasks.error 'info.eror'" in warned[0] and "did you mean info.error?" in warned[0]


STEP_RAISES = '''
_Base = ElevatorEnv


class ElevatorEnv(_Base):
    def step(self, action):
        if OPS[int(action["op"])] == "open_doors":
            raise ZeroDivisionError("door motor table is empty")
        return super().step(action)
'''

RESET_RAISES = '''
_Base = ElevatorEnv


class ElevatorEnv(_Base):
    def reset(self, *, seed=None, options=None):
        if options:
            raise KeyError("passengers")
        return super().reset(seed=seed, options=options)
'''


def test_step_raising_is_a_simulator_bug(tmp_path, capsys):
    rc, lines = check(plugin(tmp_path, "step", env_code=STEP_RAISES), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("problem: simulator bug on task elevator-test-0-")
    assert "step(open_doors): ZeroDivisionError: door motor table is empty (at elev_step.py:" in lines[0]
    assert "not charged to the program" in lines[0]


def test_reset_raising_is_a_simulator_bug(tmp_path, capsys):
    rc, lines = check(plugin(tmp_path, "reset", env_code=RESET_RAISES), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert "simulator bug on task elevator-test-0-" in lines[0] and "reset: KeyError: 'passengers'" in lines[0]


def test_simulator_bug_is_counted_logged_once_and_not_charged(tmp_path, caplog):
    """Training-time path: the sim reward puts nothing on the program; the bug is logged once with its traceback."""
    from densecode.config import load_config
    from densecode.domains import build_domain, build_reward_fn
    from densecode.rewards import make_sample

    cfg = load_config(plugin(tmp_path, "charged", env_code=STEP_RAISES))
    domain = build_domain(cfg)
    task = next(t for t in domain.tasks("test", 6, 0) if "open_doors" in t["reference"])
    backend = domain.simulator()
    with caplog.at_level("ERROR", logger="densecode.simulators"):
        fbs = backend.evaluate([task["reference"]] * 3, [task] * 3)
    assert backend.simulator_errors == 3
    logged = [r for r in caplog.records if "simulator bug" in r.getMessage()]
    assert len(logged) == 1 and task["task_id"] in logged[0].getMessage()
    assert "Traceback" in logged[0].getMessage() and "ZeroDivisionError" in logged[0].getMessage()
    assert all(fb.info["unjudged"] and fb.line_penalties == [] for fb in fbs)

    from transformers import AutoTokenizer

    from densecode.models import resolve_model_path

    tok = AutoTokenizer.from_pretrained(str(resolve_model_path("densecode-tiny")))
    ids = tok(task["reference"], add_special_tokens=False)["input_ids"]
    sample = make_sample(task["prompt"], ids, tok, task, code_regions=cfg.reward.code_regions)
    out = build_reward_fn(cfg, domain).components["sim"]([sample])[0]
    assert not np.any(out.values)  # neither the fail value nor a line penalty


def test_generator_returning_strings(tmp_path, capsys):
    code = '\n_gen = generate_tasks\n\n\ndef generate_tasks(split, n, seed):\n    return [t["instruction"] for t in _gen(split, n, seed)]\n'
    path = plugin(tmp_path, "strings", env_code=code)
    rc, lines = check(path, capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert "tasks.source 'elev_strings:generate_tasks': task 0 is a str" in lines[0] and "not a task dict" in lines[0]
    # training stops on it before loading the model (the domain's prepare() draws from both splits)
    assert main(["train", "--config", str(path), "--steps", "1", "--output-dir", str(tmp_path / "run")]) == 2
    assert "task 0 is a str" in capsys.readouterr().err


def test_generator_with_the_wrong_signature(tmp_path, capsys):
    code = '\n_gen = generate_tasks\n\n\ndef generate_tasks(split, n):\n    return _gen(split, n, 0)\n'
    rc, lines = check(plugin(tmp_path, "signature", env_code=code), capsys)
    assert rc == 2 and "failed when called as f(split='train', n=2, seed=0): TypeError" in lines[0]


def test_reset_options_of_the_wrong_type(tmp_path, capsys):
    code = ('\n_gen = generate_tasks\n\n\ndef generate_tasks(split, n, seed):\n    tasks = _gen(split, n, seed)\n'
            '    for t in tasks:\n        t["reset_options"] = list(t["reset_options"].items())\n    return tasks\n')
    rc, lines = check(plugin(tmp_path, "options", env_code=code), capsys)
    assert rc == 2 and len(lines) == 1
    assert "task 'elevator-train-0-0000': 'reset_options' must be a mapping" in lines[0]


def test_base_is_found_among_densecodes_configs_and_a_wrong_one_says_where_it_looked(tmp_path, capsys):
    from densecode.config import load_config

    path = plugin(tmp_path, "base")  # base: robotics.yaml, not beside the file
    assert load_config(path).generation.stop[0] == "\n#"  # robotics.yaml's, inherited
    path.write_text(path.read_text().replace("base: robotics.yaml", "base: robotcs.yaml"))
    rc, lines = check(path, capsys)
    assert rc == 2 and len(lines) == 1
    assert "base 'robotcs.yaml' not found: looked for" in lines[0] and str(tmp_path) in lines[0]
    assert "densecode's configs" in lines[0] and "robotics.yaml" in lines[0]


def test_modules_resolve_from_the_configs_folder_and_the_error_says_where(tmp_path, capsys, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the config's folder
    path = plugin(tmp_path, "modules")
    assert check(path, capsys)[0] == 0
    path.write_text(path.read_text().replace("elev_modules:ElevatorEnv", "elev_nosuch:ElevatorEnv"))
    rc, lines = check(path, capsys)
    assert rc == 2 and len(lines) == 1
    assert f"cannot import 'elev_nosuch' (searched the import path and the config's folder {tmp_path})" in lines[0]


def test_tasks_path_resolves_from_the_configs_folder(tmp_path, capsys, monkeypatch):
    import json
    import sys

    sys.path.insert(0, str(EXAMPLE))
    try:
        from elevator_sim import generate_tasks
    finally:
        sys.path.remove(str(EXAMPLE))
    rows = generate_tasks("train", 4, 0) + generate_tasks("test", 2, 0)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def edit(cfg):
        del cfg["tasks"]["source"]
        cfg["tasks"]["path"] = "data/tasks.jsonl"
        cfg["tasks"]["eval_fraction"] = 0.34

    path = plugin(tmp_path, "jsonl", edit)
    monkeypatch.chdir(EXAMPLE)  # any other folder
    rc, lines = check(path, capsys, "--split", "train")
    assert (rc, lines) == (0, [])
    path.write_text(path.read_text().replace("data/tasks.jsonl", "data/task.jsonl"))
    rc, lines = check(path, capsys)
    assert rc == 2 and len(lines) == 1
    assert f"no file {tmp_path}/data/task.jsonl (a relative tasks.path resolves from the config's folder" in lines[0]


def test_env_failing_gymnasiums_checker(tmp_path, capsys):
    code = '''
_Base = ElevatorEnv


class ElevatorEnv(_Base):
    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return {"floor": 99, "doors_open": 0}, info
'''
    rc, lines = check(plugin(tmp_path, "checker", env_code=code), capsys)
    assert rc == 2
    assert any("fails gymnasium's env checker" in line for line in lines)


def test_a_reference_that_fails_is_reported_with_its_line(tmp_path, capsys):
    code = ('\n_gen = generate_tasks\n\n\ndef generate_tasks(split, n, seed):\n    tasks = _gen(split, n, seed)\n'
            '    for t in tasks:\n        t["reference"] = "    close_doors()\\n    pick_up(\\"Zed\\")\\n"\n'
            '    return tasks\n')
    rc, lines = check(plugin(tmp_path, "badref", env_code=code), capsys)
    assert rc == 2 and len(lines) == 1, lines
    assert "(and 2 more) ended in robot_error at reference line 2: pick_up: the doors are closed" in lines[0]
