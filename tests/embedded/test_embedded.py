"""densecode-tiny: corpus, tokenizer, packing, the build command and the shipped asset."""

from __future__ import annotations

import ast
import json
import os

import pytest

from densecode.embedded import ASSET_DIR, EOS_TOKEN
from densecode.embedded.corpus import (
    TASK_DOMAINS,
    Pair,
    domain_pairs,
    held_out_prompts,
    stdlib_functions,
    synthetic_function_pairs,
)

ROUNDTRIP_SAMPLES = [
    "def f(x):\n    return 'café ✓ naïve' + x\n",
    "class A:\n\tdef g(self):\n\t\treturn {'k': [1, 2.5e-3, None]}  # 中文注释\n",
    "    \n\n   trailing spaces   \n\n\n",
    "s = f\"{x!r:>10}\" + b'\\x00'.decode() + r'\\d+'  \U0001f600\n",
    "def task_program():\n    go_to(\"kitchen\")\n    if is_in_room(\"apple\"):\n        pick(\"apple\")\n",
]


@pytest.fixture(scope="module")
def stdlib_sample():
    return stdlib_functions()[:400]


def test_stdlib_corpus_is_clean_and_deterministic(stdlib_sample):
    again = stdlib_functions()[:400]
    assert stdlib_sample == again
    assert len(stdlib_sample) == 400
    for src in stdlib_sample:
        ast.parse(src)
        assert src.isascii() and "\t" not in src and src.endswith("\n")
        assert src.startswith(("def ", "async def "))


def test_synthetic_pairs_are_valid_functions_and_seeded():
    pairs = synthetic_function_pairs(200, seed=3)
    assert pairs == synthetic_function_pairs(200, seed=3)
    assert pairs != synthetic_function_pairs(200, seed=4)
    for p in pairs:
        tree = ast.parse(p.prompt + p.response)
        fn = tree.body[0]
        assert isinstance(fn, ast.FunctionDef)
        # The body uses only the function's own parameters (plus locals it binds).
        params = {a.arg for a in fn.args.args}
        loads = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        stores = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        import builtins

        assert loads <= params | stores | set(dir(builtins)) | {"x", "i", "ch", "_"}, p.prompt + p.response


def test_domain_pairs_are_distinct_judged_canonical_answers_of_the_split():
    """The corpus holds each domain's canonical answers, which its own judge accepts, for train-split prompts only."""
    from densecode.domains.registry import get_domain_class

    for name in TASK_DOMAINS:
        pairs = domain_pairs(name, "train", 12, seed=0)
        assert len(pairs) == 12 and len({p.prompt for p in pairs}) == 12 and {p.source for p in pairs} == {name}
        assert pairs == domain_pairs(name, "train", 12, seed=0)
        # No held-out prompt in the training material (RoboSim's split alone is by program text).
        held_out = {p.prompt for p in domain_pairs(name, "test", 300, seed=0)}
        held_out |= {p.prompt for p in domain_pairs(name, "validation", 300, seed=0)}
        assert held_out <= held_out_prompts(name)
        assert not held_out & {p.prompt for p in domain_pairs(name, "train", 100, seed=0)}, name
        domain = get_domain_class(name)()
        tasks = {t["prompt"]: t for t in domain.tasks("train", 12, 0)}
        judged = [(tasks[p.prompt], p.response) for p in pairs if p.prompt in tasks]
        assert len(judged) == 12, name
        records = domain.score([t for t, _ in judged], [r for _, r in judged])
        assert all(r["outcome"] == "success" for r in records), (name, records)
        if name == "testgen":  # the corpus's short asserts by default; the canonical ones on request
            assert [p.response for p in pairs] == [tasks[p.prompt]["simple_canonical"] for p in pairs]
            canonical = domain_pairs(name, "train", 12, seed=0, simple_answers=False)
            assert [p.response for p in canonical] == [tasks[p.prompt]["canonical"] for p in canonical]


def test_mbpp_pairs_take_the_train_ids_only(shared_data):
    from pathlib import Path

    from densecode.embedded.corpus import mbpp_pairs
    from densecode.eval.mbpp import load_tasks

    path = Path(shared_data) / "mbpp" / "mbpp.jsonl"
    pairs = mbpp_pairs(path, "train")
    train = load_tasks("mbpp", path, split="train")
    assert len(pairs) == len(train) == 374
    assert {t.number for t in train} <= set(range(601, 975))
    test_problems = {t.problem for t in load_tasks("mbpp", path, split="test")}
    assert not test_problems & {p.prompt for p in pairs}
    for p in pairs:
        ast.parse(p.response)
        assert "\r" not in p.response and p.response.endswith("\n")


def test_trained_tokenizer_round_trips_code_exactly(stdlib_sample):
    from densecode.embedded.tokenizer import train_tokenizer

    tok = train_tokenizer(stdlib_sample, vocab_size=600)
    assert tok.eos_token == tok.pad_token == EOS_TOKEN
    assert tok.padding_side == "left"
    for text in stdlib_sample[:100] + ROUNDTRIP_SAMPLES:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # A prompt tokenized alone then its response: concatenation decodes to the joined text.
    prompt, response = "# Instruction: go\ndef task_program():\n", "    go_to(\"lab\")\n"
    joined = tok(prompt, add_special_tokens=False)["input_ids"] + tok(response, add_special_tokens=False)["input_ids"]
    assert tok.decode(joined) == prompt + response


def test_code_pretokenizer_spells_a_name_and_a_number_the_same_everywhere(stdlib_sample):
    """The multitask recipe's tokenizer: a name is one token sequence after a space, a bracket, a quote or an indent
    (GPT-2's splits glue the space to the word), digits are single tokens; it round-trips any text exactly and
    reloads from disk with the same splits."""
    from transformers import AutoTokenizer

    from densecode.embedded.tokenizer import train_tokenizer

    texts = stdlib_sample[:300] + [f"def f(items):\n    for x in items:\n        go_to(\"basement\")\n    return {i}"
                                   for i in range(200)]
    tok = train_tokenizer(texts, vocab_size=600, pretokenizer="code")
    gpt2 = train_tokenizer(texts, vocab_size=600)

    def pieces(t, text):
        return [t.decode([i]) for i in t(text, add_special_tokens=False)["input_ids"]]

    program = 'def f(items):\n    for x in items:\n        go_to("basement")\n    basement = items[0] + 2031\n'
    code, old = pieces(tok, program), pieces(gpt2, program)
    assert code.count("items") == 3 and code.count("basement") == 2
    assert {"2", "0", "3", "1"} <= set(code) and "2031" not in code and "203" not in code
    assert " items" in old  # the split this tokenizer removes
    tmp = __import__("tempfile").mkdtemp()
    tok.save_pretrained(tmp)
    again = AutoTokenizer.from_pretrained(tmp)
    for text in stdlib_sample[:100] + ROUNDTRIP_SAMPLES + [program, " \t\r\n x  =  1\r\n"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
        assert again(text, add_special_tokens=False)["input_ids"] == ids
    with pytest.raises(ValueError, match="pretokenizer"):
        train_tokenizer(texts, vocab_size=600, pretokenizer="words")


def test_supervised_rows_mask_prompts_and_pack_whole_examples(stdlib_sample):
    from densecode.embedded.tokenizer import train_tokenizer
    from densecode.embedded.train import (
        IGNORE,
        encode_pair,
        pretrain_rows,
        supervised_rows,
    )

    tok = train_tokenizer(stdlib_sample[:100], vocab_size=400)
    pair = Pair("# Instruction: say hi\ndef task_program():\n", "    say(\"hi\")\n", "robotics")
    ids, labels = encode_pair(tok, pair)
    n_prompt = len(tok(pair.prompt, add_special_tokens=False)["input_ids"])
    assert labels[:n_prompt] == [IGNORE] * n_prompt
    assert labels[n_prompt:] == ids[n_prompt:] and ids[-1] == tok.eos_token_id
    assert tok.decode(ids[n_prompt:-1]) == pair.response

    pairs = [Pair(f"# Instruction: task {i}\ndef task_program():\n", f"    say(\"{i}\")\n" * (1 + i % 4), "robotics")
             for i in range(60)]
    rows = supervised_rows(tok, pairs, ctx=96, seed=0)
    assert all(len(ids) <= 96 and len(ids) == len(labels) for ids, labels in rows)
    # Every example is packed whole: the number of EOS = the number of examples.
    assert sum(ids.count(tok.eos_token_id) for ids, _ in rows) == 60
    stream = pretrain_rows(tok, stdlib_sample[:50], ctx=64)
    assert all(len(ids) == 64 and ids == labels for ids, labels in stream)


def test_weighted_prompt_loss_counts_prompt_tokens_at_their_weight(stdlib_sample):
    """Prompt tokens (unlabelled, non-pad) enter the loss at the given weight; pads never; weight 1 = plain LM loss
    on every real token, and the response-only loss is the labels' loss."""
    import torch

    from densecode.embedded.tokenizer import train_tokenizer
    from densecode.embedded.train import ModelShape, build_model, collate, supervised_rows, weighted_prompt_loss

    tok = train_tokenizer(stdlib_sample[:100], vocab_size=400)
    pairs = [Pair(f"def f{i}(x):\n", f"    return x + {i}\n", "codegen") for i in range(12)]
    rows = supervised_rows(tok, pairs, ctx=40, seed=0)
    pad = tok.pad_token_id
    x, y = collate(rows, pad, 48)
    assert (x == pad).any()  # the rows are padded
    model = build_model(tok, ModelShape(1, 32, 2, 64, 64), 0)
    nll = torch.nn.functional.cross_entropy(model(input_ids=x).logits[:, :-1].transpose(1, 2), x[:, 1:],
                                            reduction="none")
    labelled, prompt = y[:, 1:] != -100, (y[:, 1:] == -100) & (x[:, 1:] != pad)
    assert prompt.any() and labelled.any()
    for w in (0.0, 0.3, 1.0):
        expected = (nll[labelled].sum() + w * nll[prompt].sum()) / (labelled.sum() + w * prompt.sum())
        assert torch.allclose(weighted_prompt_loss(model, x, y, pad, w), expected, atol=1e-5)
    assert torch.allclose(weighted_prompt_loss(model, x, y, pad, 0.0), model(input_ids=x, labels=y).loss, atol=1e-5)


def test_tiny_build_produces_loadable_model(tmp_path):
    """The whole build in-process at a size that takes seconds (the CLI toy build is slow-marked)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.embedded.build import BuildRecipe, build, verify_sha256sums

    recipe = BuildRecipe(vocab_size=300, n_layer=1, n_embd=32, n_head=2, n_inner=64, n_positions=256, ctx=256,
                         steps=4, batch_size=4, warmup=1, robotics_tasks=40, synthetic_tasks=40, stdlib_max=40,
                         eval_every=4, robotics_steps=3, robotics_warmup=1)
    info = build(recipe, tmp_path, seed=0, progress=False)
    assert info["recipe"]["steps"] == 4 and len(info["eval_losses"]) == 1
    assert info["corpus"]["robotics_train_tasks"] == 40
    assert info["robotics_stage"]["steps_run"] == 3 and "robotics" in info["robotics_stage"]["eval_losses"]
    assert verify_sha256sums(tmp_path) == []
    assert not (tmp_path / "_stage1").exists()
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert model.config.vocab_size == len(tok) and model.config.eos_token_id == tok.eos_token_id
    out = model.generate(**tok(["def task_program():\n"], return_tensors="pt"), max_new_tokens=4, do_sample=False,
                         pad_token_id=tok.eos_token_id)
    assert out.shape[1] > 0


def test_stage2_from_a_saved_stage1_equals_the_whole_build(tmp_path):
    """`--stage1 DIR` (stage 2 only) gives the same weights as the two stages in one build."""
    from dataclasses import replace

    from densecode.embedded.build import BuildRecipe, build, build_from_stage1
    from densecode.errors import DensecodeError

    recipe = BuildRecipe(vocab_size=300, n_layer=1, n_embd=32, n_head=2, n_inner=64, n_positions=256, ctx=256,
                         steps=3, batch_size=4, warmup=1, robotics_tasks=30, synthetic_tasks=30, stdlib_max=30,
                         eval_every=3, robotics_steps=4, robotics_stop_at=2, robotics_warmup=1)
    build(recipe, tmp_path / "whole", seed=0, progress=False)
    build(replace(recipe, robotics_steps=0), tmp_path / "stage1", seed=0, progress=False)
    info = build_from_stage1(recipe, tmp_path / "stage1", tmp_path / "two", seed=0, progress=False)
    assert info["robotics_stage"]["steps_run"] == 2
    whole = (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert (tmp_path / "two" / "model.safetensors").read_bytes() == whole
    with pytest.raises(DensecodeError, match="another stage-1 recipe"):
        build_from_stage1(replace(recipe, lr=1e-3), tmp_path / "stage1", tmp_path / "bad", seed=0, progress=False)
    with pytest.raises(DensecodeError, match="already ran the robotics stage"):
        build_from_stage1(recipe, tmp_path / "two", tmp_path / "bad", seed=0, progress=False)


MULTITASK_TINY = {"vocab_size": 300, "n_layer": 1, "n_embd": 32, "n_head": 2, "n_inner": 64, "n_positions": 512, "ctx": 320,
        "steps": 4, "batch_size": 4, "warmup": 1, "tasks_per_domain": 8, "codeio_tasks": 12, "stdlib_max": 40,
        "mbpp": False, "eval_every": 4, "select_steps": [2, 4], "select_tasks": 2, "processes": 1}


def test_multitask_build_is_loadable_and_keeps_the_best_validation_checkpoint(tmp_path):
    """The whole build in-process at a size that takes seconds (the CLI toy build is slow-marked)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.embedded.build import verify_sha256sums
    from densecode.embedded.build_multitask import MultitaskRecipe, build_multitask

    info = build_multitask(MultitaskRecipe(**MULTITASK_TINY), tmp_path, seed=0, progress=False)
    assert info["recipe"]["steps"] == 4 and len(info["eval_losses"]) == 1
    assert info["corpus"]["items"] == {**{name: 8 for name in TASK_DOMAINS}, "codeio": 12, "stdlib": 39}
    assert [row["step"] for row in info["selection"]] == [2, 4]
    for row in info["selection"]:
        assert set(row) == {"step", "mean", *TASK_DOMAINS}
    best = max(info["selection"], key=lambda row: (row["mean"], row["step"]))
    assert info["shipped_step"] == best["step"]
    assert verify_sha256sums(tmp_path) == []
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert model.config.vocab_size == len(tok) and model.config.eos_token_id == tok.eos_token_id
    out = model.generate(**tok(["def task_program():\n"], return_tensors="pt"), max_new_tokens=4, do_sample=False,
                         pad_token_id=tok.eos_token_id)
    assert out.shape[1] > 0


def test_multitask_selection_does_not_move_the_training_rng(tmp_path):
    """Validation generation in the middle of training leaves the final weights bit-identical to a build that
    validates only at the end."""
    from dataclasses import replace

    from densecode.embedded.build_multitask import MultitaskRecipe, build_multitask

    a = build_multitask(MultitaskRecipe(**MULTITASK_TINY), tmp_path / "a", seed=0, progress=False)
    build_multitask(replace(MultitaskRecipe(**MULTITASK_TINY), select_steps=[4]), tmp_path / "b", seed=0, progress=False)
    if a["shipped_step"] != 4:
        pytest.skip("the step-2 checkpoint won the selection; the end weights are not the shipped ones")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_multitask_build_without_the_mbpp_file_names_the_fix(tmp_path, capsys, monkeypatch):
    from densecode.cli import build_model, main

    monkeypatch.setattr(build_model, "MBPP_DEFAULTS", (tmp_path / "absent.jsonl",))
    assert main(["build-model", "--recipe", "multitask", "--out", str(tmp_path / "m"), "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "--mbpp PATH" in err and "--no-mbpp" in err
    assert main(["build-model", "--recipe", "multitask", "--out", str(tmp_path / "m"), "--mbpp",
                 str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    # The robotics-only recipe and toy builds never overwrite the shipped asset; the tiny recipe refuses the
    # five-task flags.
    assert main(["build-model", "--recipe", "tiny"]) == 2
    assert "the shipped asset is the five-task recipe's" in capsys.readouterr().err
    assert main(["build-model", "--toy"]) == 2
    assert "never replaces the shipped asset" in capsys.readouterr().err
    assert main(["build-model", "--recipe", "tiny", "--out", str(tmp_path / "m"), "--no-mbpp"]) == 2
    assert "--recipe multitask only" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_build_model_set_overrides_recipe_fields_with_type_checks(tmp_path, capsys, monkeypatch):
    from densecode.cli import build_model, main
    from densecode.embedded.build_multitask import MultitaskRecipe

    recipe = MultitaskRecipe()
    build_model._apply_overrides(recipe, ["n_layer=6", "lr=0.003", "prompt_loss_weight=0", "select_steps=[5, 9]",
                                          "stdlib_max=100", "mbpp=false", "codeio_tasks=12000"])
    assert (recipe.n_layer, recipe.lr, recipe.prompt_loss_weight, recipe.select_steps) == (6, 0.003, 0.0, [5, 9])
    assert recipe.stdlib_max == 100 and recipe.mbpp is False and isinstance(recipe.prompt_loss_weight, float)
    assert recipe.codeio_tasks == 12000
    build_model._apply_overrides(recipe, ["codeio_tasks=null", "stdlib_max=null"])  # optional fields back to None
    assert recipe.codeio_tasks is None and recipe.stdlib_max is None
    for bad, message in (("n_layers=6", "one of the recipe's fields"), ("n_layer", "KEY=VALUE"),
                         ("n_layer=six", "expects an integer"), ("n_layer=true", "expects an integer"),
                         ("select_steps=5", "expects a list"), ("codeio_tasks=0", "codeio_tasks 0")):
        assert main(["build-model", "--recipe", "multitask", "--no-mbpp", "--out", str(tmp_path / "m"),
                     "--set", bad]) == 2
        assert message in capsys.readouterr().err, bad
    assert main(["build-model", "--recipe", "tiny", "--out", str(tmp_path / "m"), "--set", "n_layer=2"]) == 2
    assert "--recipe multitask only" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_build_model_rejects_bad_output_dir(tmp_path, capsys):
    from densecode.cli import main

    target = tmp_path / "file.txt"
    target.write_text("x")
    assert main(["build-model", "--toy", "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main(["build-model", "--toy", "--out", str(busy)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (busy / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_build_model_toy_cli_end_to_end(tmp_path):
    from transformers import AutoModelForCausalLM

    from densecode.cli import main

    out = tmp_path / "toy"
    assert main(["build-model", "--recipe", "tiny", "--toy", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    info = json.loads((out / "build_info.json").read_text())
    assert info["recipe"]["steps"] == 30
    # Rebuilding over a previous build is allowed.
    assert main(["build-model", "--recipe", "tiny", "--toy", "--steps", "2", "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "build_info.json").read_text())["recipe"]["steps"] == 2
    AutoModelForCausalLM.from_pretrained(out)
    # The default recipe (the shipped asset's), five tasks.
    multi = tmp_path / "multitask"
    assert main(["build-model", "--toy", "--no-mbpp", "--out", str(multi), "--no-progress", "--threads", "1"]) == 0
    info = json.loads((multi / "build_info.json").read_text())
    assert info["shipped_step"] in info["recipe"]["select_steps"] and set(info["corpus"]["items"]) >= set(TASK_DOMAINS)
    AutoModelForCausalLM.from_pretrained(multi)


# --------------------------------------------------------------------------- the shipped asset

def test_asset_checksums_and_size():
    from densecode.embedded.build import verify_sha256sums

    assert (ASSET_DIR / "SHA256SUMS").is_file(), f"{ASSET_DIR} has no SHA256SUMS: run `densecode build-model`"
    assert verify_sha256sums(ASSET_DIR) == []
    listed = {line.split()[1] for line in (ASSET_DIR / "SHA256SUMS").read_text().splitlines()}
    present = {p.name for p in ASSET_DIR.iterdir() if p.is_file()} - {"SHA256SUMS"}
    assert listed == present
    total = sum(p.stat().st_size for p in ASSET_DIR.iterdir())
    assert total <= 25 * 2**20
    info = json.loads((ASSET_DIR / "build_info.json").read_text())
    assert info["name"] == "densecode-tiny" and info["seed"] == 0


def test_asset_was_built_by_the_default_recipe():
    """`densecode build-model` (no options) must regenerate the shipped asset: an edit to the
    recipe defaults without a rebuild makes the asset and the command disagree."""
    from dataclasses import asdict

    from densecode.embedded.build_multitask import MultitaskRecipe

    info = json.loads((ASSET_DIR / "build_info.json").read_text())
    assert info["recipe"] == asdict(MultitaskRecipe())
    config = json.loads((ASSET_DIR / "config.json").read_text())
    assert (config["n_layer"], config["n_embd"], config["vocab_size"]) == (
        info["recipe"]["n_layer"], info["recipe"]["n_embd"], info["recipe"]["vocab_size"])


@pytest.fixture(scope="module")
def shipped():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.models import resolve_model_path

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    path = resolve_model_path("densecode-tiny")
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model.eval()
    return model, tok


def test_shipped_tokenizer_round_trips(shipped, stdlib_sample):
    _, tok = shipped
    for text in stdlib_sample[:50] + ROUNDTRIP_SAMPLES:
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_shipped_model_writes_parseable_robot_programs(shipped):
    from densecode_robosim.tasks import PROGRAM_HEADER, STOP_STRINGS, generate_tasks

    from densecode.generation import generate

    model, tok = shipped
    tasks = generate_tasks("test", n=8, seed=0)
    gens = generate(model, tok, [t.prompt for t in tasks], n=1, max_new_tokens=128, temperature=0.0,
                    stop=list(STOP_STRINGS), batch_size=8, seed=0, progress=False)
    programs = [PROGRAM_HEADER + g.completion for g in gens]
    parsed = 0
    for program in programs:
        try:
            tree = ast.parse(program)
        except SyntaxError:
            continue
        body = tree.body[0].body
        # A real body that calls the robot API, not `pass`.
        calls = {n.func.id for n in ast.walk(tree.body[0]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        if body and calls & {"go_to", "say", "ask", "pick", "place", "is_in_room", "get_all_rooms"}:
            parsed += 1
    assert parsed >= 7, "\n\n".join(programs)


@pytest.mark.slow
def test_shipped_model_meets_the_bands_on_every_task(shipped):
    """The targets before RL on 300 test tasks of each of the five tasks, greedy and at the training temperature:
    success in the band, robotics greedy at least the robotics-only model's, code answers that parse."""
    from densecode.embedded.quality import band_report, markdown_table, measure

    model, tok = shipped
    results = measure(model, tok, n_tasks=300, seed=0, progress=False)
    print(markdown_table(results))
    checks = band_report(results)
    assert len(checks) == 17
    assert [text for text, ok in checks if not ok] == []


def test_band_report_checks_each_target_and_ignores_mbpp():
    from densecode.embedded.quality import band_report

    def summary(success, parses=1.0):
        return {"success": success, "parses": parses}

    results = {"robotics": {"greedy": summary(0.41), "T=1.0": summary(0.30)},
               "codegen": {"greedy": summary(0.20, parses=0.89), "T=1.0": summary(0.71)},
               "commitmsg": {"greedy": summary(0.15)},
               "mbpp": {"greedy": summary(0.0)}}
    checks = dict(band_report(results))
    failed = sorted(text for text, ok in checks.items() if not ok)
    assert failed == ["codegen T=1.0: success 71.0% in [15%, 70%]", "codegen greedy: parses 89.0% >= 90%",
                      "robotics greedy: success 41.0% >= 42%"]
    assert len(checks) == 8 and not any("mbpp" in text for text in checks)
