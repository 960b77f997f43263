"""benchmarks/experiments/multitask.py end to end at its --quick budget on two toy tasks and a tiny random model:
every arm is a real `densecode train` run (in-process), the merged and specialist evals use the trainer's eval, the outputs are
written, a second call reuses everything, and a run cut short is continued with --resume."""

from __future__ import annotations

import importlib
import json
import statistics

import pytest
import yaml

from tests import toy_domains  # noqa: F401  (registers the toy-a / toy-b domains)


def _bench():
    return importlib.import_module("benchmarks.experiments.multitask")


def _argv(tiny_model_dir, tmp_path, work="work", recipe="gae"):
    return ["--quick", "--in-process", "--recipe", recipe, "--tasks", "toy-a,toy-b", "--model", str(tiny_model_dir),
            "--workdir", str(tmp_path / work), "--out", str(tmp_path / "out"), "--json", str(tmp_path / "rec.json"),
            "--archive", str(tmp_path / "archive"),
            "--set", "tasks.options={toy-a: {word: x}, toy-b: {word: y}}", "--set", "reward.code_regions=completion",
            "--max-new-tokens", "6"]


def test_quick_benchmark_runs_every_arm_and_resumes(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import densecode.cli

    bench = _bench()
    calls = []
    real_main = densecode.cli.main
    monkeypatch.setattr(densecode.cli, "main", lambda argv: calls.append(argv) or real_main(argv))
    assert bench.main(_argv(tiny_model_dir, tmp_path)) == 0
    work, out = tmp_path / "work", tmp_path / "out"
    arms = [*bench.MULTI_ARMS, "specialist-toy-a", "specialist-toy-b"]
    assert len(calls) == len(arms) and all("--resume" not in c for c in calls)
    for arm in bench.MULTI_ARMS:  # each arm's switch reached its run's config
        cfg = (work / f"{arm}-seed0" / "config.yaml").read_text()
        for s in bench.MULTI_ARMS[arm]:
            key, value = s.split("=")
            assert f"{key.split('.')[-1]}: {value}" in cfg, (arm, s)

    result = json.loads((out / "multitask.json").read_text())
    scores = result["scores"]
    assert set(scores) == set(bench.ROWS)
    # Every arm's numbers are its own run's last held-out eval (the domain's headline metric, success_rate).
    for arm in bench.MULTI_ARMS:
        last = bench.eval_records(work / f"{arm}-seed0")[2]
        row = scores[arm]["0"]
        assert row["toy-a"] == last["eval/toy-a/success_rate"] and row["toy-b"] == last["eval/toy-b/success_rate"]
        assert row["average"] == pytest.approx(statistics.fmean([row["toy-a"], row["toy-b"]]))
        assert row["average"] == pytest.approx(last["eval/average/score"])
        # ... and the same eval's pass at the training temperature (every task's eval samples once more).
        sampled = result["sampled_scores"][arm]["0"]
        assert sampled["toy-a"] == last["eval/toy-a/sampled_success_rate"]
        assert sampled["toy-b"] == last["eval/toy-b/sampled_success_rate"]
    assert set(result["sampled_scores"]) == set(bench.ROWS)
    # A specialist evaluated on every task by the benchmark scores its own task as its training run's eval did.
    cross = result["runs"]["best_specialist-seed0"]["cross"]
    for t in ("toy-a", "toy-b"):
        own = bench.eval_records(work / f"specialist-{t}-seed0")[2][f"eval/{t}/success_rate"]
        assert cross[t][t] == own
        assert scores["best_specialist"]["0"][t] == max(cross[s][t] for s in cross)
    # The merged model is the specialists' average (task vectors with weights 1/2 each).
    from safetensors.torch import load_file

    merged = load_file(work / "merged-seed0" / "model.safetensors")
    specs = [load_file(bench.final_model(work / f"specialist-{t}-seed0") / "model.safetensors")
             for t in ("toy-a", "toy-b")]
    name = next(k for k in merged if merged[k].is_floating_point() and merged[k].dim() == 2)
    assert (merged[name] - (specs[0][name] + specs[1][name]) / 2).abs().max() < 1e-5
    md = (out / "multitask.md").read_text()
    assert "| astor |" in md and "| best specialist per task |" in md and "toy-b" in md
    assert md.count("| astor |") == 2 and "sampled at the training temperature" in md
    # ASTOR's scheduler table: the quotas its runs logged, averaged over steps (two tasks: they sum to 1).
    sched = result["astor_schedule"]
    logged = [json.loads(line) for line in (work / "astor-seed0" / "metrics.jsonl").read_text().splitlines()]
    quotas = [r["multi/toy-a/quota"] for r in logged if r["kind"] == "train"]
    assert sched["toy-a"]["quota"] == pytest.approx(statistics.fmean(quotas))
    assert sched["toy-a"]["quota"] + sched["toy-b"]["quota"] == pytest.approx(1.0)
    assert "ASTOR's scheduler, per task" in md and "| toy-b | " in md
    assert (out / "multitask.png").stat().st_size > 0
    records = json.loads((tmp_path / "rec.json").read_text())
    assert {r["baseline"] for r in records} == {"joint", "best specialist per task"} and len(records) == 4
    assert "| astor |" in capsys.readouterr().out

    # A second call trains nothing and gives the same table.
    calls.clear()
    assert bench.main(_argv(tiny_model_dir, tmp_path)) == 0
    assert calls == [] and json.loads((out / "multitask.json").read_text())["scores"] == scores

    # A run cut short (its last checkpoint and eval lost, never archived) continues from its checkpoint with --resume.
    run = work / "joint-seed0"
    (tmp_path / "archive" / "joint-seed0.tar.xz").unlink()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if json.loads(ln)["step"] <= 1 and not (json.loads(ln)["kind"] == "eval"
                                                                       and json.loads(ln)["step"] == 2)]
    (run / "metrics.jsonl").write_text("".join(ln + "\n" for ln in kept))
    (run / "checkpoints" / "latest").write_text("step-000001")
    import shutil

    shutil.rmtree(run / "checkpoints" / "step-000002")
    assert bench.main(_argv(tiny_model_dir, tmp_path)) == 0
    assert len(calls) == 1 and calls[0][-2:] == ["--resume", str(run)]
    assert 2 in bench.eval_records(run)

    # Another machine: a new workdir, only the archive. Every run and eval is restored, nothing trains or evaluates
    # (the specialists' weights are not archived: their evals are), and the table is the same.
    archived = sorted(p.name for p in (tmp_path / "archive").iterdir())
    assert len([n for n in archived if n.endswith(".tar.xz")]) == len(arms)
    assert "merged-seed0.eval.json" in archived and "specialist-toy-a-seed0.eval-all-tasks.json" in archived
    calls.clear()
    assert bench.main(_argv(tiny_model_dir, tmp_path, work="work2")) == 0
    assert calls == [] and json.loads((out / "multitask.json").read_text())["scores"] == scores
    assert not (tmp_path / "work2" / "specialist-toy-a-seed0" / "checkpoints").exists()

    # Other settings in the same workdir are refused rather than mixed with the finished runs.
    with pytest.raises(SystemExit, match=r"other settings \(.*train.batch_size"):
        bench.main([*_argv(tiny_model_dir, tmp_path), "--batch-size", "6"])


def test_outcome_recipe_is_the_single_task_recipe_without_kl(tiny_model_dir, tmp_path):
    """--recipe outcome (the default): every run gets PPO's outcome credit with 4 responses per prompt and beta_base 0
    for each task unless the user names one; the KL ablations, astor itself then, are not in the default arms."""
    from types import SimpleNamespace

    bench = _bench()
    argv = _argv(tiny_model_dir, tmp_path, recipe="outcome")
    assert bench.main([*argv, "--arms", "astor", "specialists"]) == 0
    cfg = yaml.safe_load((tmp_path / "work" / "astor-seed0" / "config.yaml").read_text())
    assert cfg["algo"]["ppo"]["credit"] == "outcome" and cfg["algo"]["ppo"]["samples_per_prompt"] == 4
    assert cfg["algo"]["ppo"]["negative_scale"] == 0.0 and cfg["generation"]["top_p"] == 1.0
    assert cfg["tasks"]["kl_beta"] == {"toy-a": 0.0, "toy-b": 0.0}
    assert cfg["tasks"]["task_stops"] is True  # each task's responses end at its own stops, as in its own runs
    spec = yaml.safe_load((tmp_path / "work" / "specialist-toy-a-seed0" / "config.yaml").read_text())
    assert spec["tasks"]["kl_beta"] == {"toy-a": 0.0}
    result = json.loads((tmp_path / "out" / "multitask.json").read_text())
    assert result["samples"]["astor"] == 2 * 4 * 4  # steps x prompts x responses per prompt
    assert {r["run"] for r in result["learning"]} == {"astor-seed0", "specialist-toy-a-seed0", "specialist-toy-b-seed0"}
    assert "Does each run learn its own tasks?" in (tmp_path / "out" / "multitask.md").read_text()

    # --eval-split validation: every task's evals on its validation split (choosing the budget), a workdir apart.
    val = _argv(tiny_model_dir, tmp_path, work="val", recipe="outcome")
    val += ["--archive", str(tmp_path / "archive-val")]  # the test-split archive's astor run is refused here
    assert bench.main([*val, "--arms", "astor", "--eval-split", "validation", "--eval-every", "1"]) == 0
    cfg = yaml.safe_load((tmp_path / "val" / "astor-seed0" / "config.yaml").read_text())
    assert cfg["train"]["eval_every"] == 1  # --eval-every: the learning table gets every step (choosing a budget)
    steps = {r["step"] for r in json.loads((tmp_path / "out" / "multitask.json").read_text())["learning"]}
    assert steps == {1, 2}
    assert {t: o["eval_split"] for t, o in cfg["tasks"]["options"].items()} == {"toy-a": "validation",
                                                                               "toy-b": "validation"}

    def arms(recipe, kl_beta):
        args = SimpleNamespace(recipe=recipe, tasks=["a", "b"], arms=None, per_task={"kl_beta": dict(kl_beta)})
        bench.choose_kl_and_arms(args)
        return args.arms, args.per_task["kl_beta"]

    assert arms("outcome", {}) == ([a for a in bench.ARMS if a not in bench.KL_ARMS], {"a": 0.0, "b": 0.0})
    assert arms("outcome", {"a": 0.2}) == (list(bench.ARMS), {"a": 0.2, "b": 0.0})
    assert arms("gae", {})[0] == list(bench.ARMS)  # the domains' own KL weights are the betas


def test_bad_benchmark_arguments_say_what_to_fix(tmp_path, capsys):
    bench = _bench()
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--tasks", "codeio", "--workdir", str(tmp_path)])
    assert "at least two different tasks" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--batch-size", "1", "--workdir", str(tmp_path)])
    assert "every task needs a prompt" in capsys.readouterr().err
    assert bench.main(["--quick", "--workdir", str(tmp_path), "--set", "tasks.astor.flor=0.1"]) == 2
    assert "flor" in capsys.readouterr().err


def test_paired_differences_are_seed_by_seed_with_a_t_interval():
    bench = _bench()
    avg = lambda xs: {s: {"average": v} for s, v in enumerate(xs)}
    result = {"scores": {"astor": avg([0.50, 0.60, 0.70]), "joint": avg([0.40, 0.55, 0.60]),
                         "merging": {1: {"average": 0.50}}}}
    d = bench.paired_differences(result)
    assert set(d) == {"joint", "merging"}
    # joint: diffs 0.10, 0.05, 0.10 -> mean 0.0833, sd 0.02887, half-width 4.303 * 0.02887 / sqrt(3) = 0.0717
    assert d["joint"]["mean"] == pytest.approx(0.083333, abs=1e-5)
    assert d["joint"]["hi"] - d["joint"]["mean"] == pytest.approx(4.303 * statistics.stdev([0.1, 0.05, 0.1]) / 3 ** 0.5)
    assert d["joint"]["lo"] > 0  # above 0 by more than the seed noise
    # Only the seeds both rows have are paired; one seed has no interval.
    assert d["merging"]["per_seed"] == {1: pytest.approx(0.10)}
    table = bench.render_differences(d)
    assert "| joint | +0.083 | [+0.012, +0.155] | +0.100, +0.050, +0.100 |" in table
    assert "n/a (1 seed)" in table


def test_runs_saved_before_the_utility_signal_option_are_compared_as_they_ran():
    from densecode.config import load_config, to_dict

    bench = _bench()

    def cfg(schedule, signal, saved_without_it=False):
        c = to_dict(load_config(None, ["domain=multi", "tasks.tasks=[toy-a,toy-b]", f"tasks.schedule={schedule}",
                                       f"tasks.astor.potential_signal={signal}"]))
        if saved_without_it:
            del c["tasks"]["astor"]["potential_signal"]
        return c

    old_astor = bench.comparable(cfg("astor", "outcome", saved_without_it=True), saved=True)
    assert old_astor == bench.comparable(cfg("astor", "reward"))  # it ran on sequence rewards
    assert old_astor != bench.comparable(cfg("astor", "outcome"))  # so it is not today's default run
    # joint only logs the utilities: the same run whatever the signal.
    old_joint = bench.comparable(cfg("joint", "outcome", saved_without_it=True), saved=True)
    assert old_joint == bench.comparable(cfg("joint", "outcome")) == bench.comparable(cfg("joint", "reward"))
    assert bench.comparable(cfg("joint", "outcome")) != bench.comparable(cfg("astor", "outcome"))


def test_learning_table_pairs_each_eval_with_the_runs_step_0_on_the_same_tasks(tmp_path):
    """Each run's gain per task and pass at every eval after step 0: the paired mean change over tasks and its 95%
    interval, flagged above / below 0 only when the interval excludes 0."""
    from types import SimpleNamespace

    bench = _bench()

    def write(run: str, rows: list[tuple[int, str, list[float]]]) -> None:
        d = tmp_path / run
        d.mkdir()
        (d / "eval_tasks.jsonl").write_text("".join(
            json.dumps({"step": s, "pass": p, "metric": "success_rate", "task_ids": [str(i) for i in range(len(v))],
                        "values": v, "outcomes": ["success" if x else "failure" for x in v]}) + "\n"
            for s, p, v in rows))

    before = [0.0] * 20 + [1.0] * 20
    gained = [1.0] * 36 + [0.0] * 4      # 16 tasks fixed, none lost: an interval above 0
    mixed = [1.0] * 20 + [0.0] * 20      # 20 fixed, 20 lost: mean 0, interval across 0
    write("astor-seed0", [(0, "a/greedy", before), (0, "b/greedy", before), (10, "a/greedy", gained),
                          (10, "b/greedy", mixed), (20, "a/greedy", gained[:-1])])  # a row of another length: skipped
    write("specialist-a-seed0", [(0, "a/sampled", before), (10, "a/sampled", before)])
    args = SimpleNamespace(seeds=[0], tasks=["a", "b"], arms=["astor", "specialists"])
    rows = bench.learning(args, tmp_path)
    got = {(r["run"], r["task"], r["pass"], r["step"]): r for r in rows}
    assert set(got) == {("astor-seed0", "a", "greedy", 10), ("astor-seed0", "b", "greedy", 10),
                        ("specialist-a-seed0", "a", "sampled", 10)}
    a = got[("astor-seed0", "a", "greedy", 10)]
    assert a["before"] == 0.5 and a["after"] == 0.9 and abs(a["change"] - 0.4) < 1e-12 and a["lo"] > 0
    b = got[("astor-seed0", "b", "greedy", 10)]
    assert abs(b["change"]) < 1e-12 and b["lo"] < 0 < b["hi"]
    assert got[("specialist-a-seed0", "a", "sampled", 10)]["change"] == 0.0
    table = bench.render_learning(rows)
    assert table.count("**above 0**") == 1 and "below 0" not in table
