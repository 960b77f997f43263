"""tasks.prompt_style (densecode/prompts.py, docs/prompts.md): chat vs completion prompts, their tokens, and the reward
regions of a chat answer (its ```python block, else all of it), on a ChatML tokenizer built offline from densecode-tiny's.
"""

import pytest

from densecode.config import load_config
from densecode.domains import build_domain, build_reward_fn
from densecode.errors import DensecodeError
from densecode.prompts import (
    chat_prompt,
    ends_in_generation_prompt,
    resolve_prompt_style,
)
from densecode.rewards import make_sample

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _tiny_tokenizer():
    from transformers import AutoTokenizer

    from densecode.models import resolve_model_path

    return AutoTokenizer.from_pretrained(str(resolve_model_path("densecode-tiny")))


@pytest.fixture(scope="module")
def plain_tokenizer():
    return _tiny_tokenizer()


@pytest.fixture(scope="module")
def chat_tokenizer():
    tok = _tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    return tok


@pytest.fixture(scope="module")
def bos_chat_tokenizer():
    """A ChatML tokenizer that also adds <|im_start|> as its BOS (the unfixed SmolLM2 GGUF tokenizer of docs/models.md)."""
    from tokenizers.processors import TemplateProcessing

    tok = _tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    bos = tok.convert_tokens_to_ids("<|im_start|>")
    tok.bos_token = "<|im_start|>"
    tok._tokenizer.post_processor = TemplateProcessing(single="<|im_start|> $A", pair="<|im_start|> $A $B",
                                                       special_tokens=[("<|im_start|>", bos)])
    assert tok("a")["input_ids"][0] == bos  # the tokenizer really adds it
    return tok


def _domain(name, tokenizer, *overrides):
    cfg = load_config(name, list(overrides))
    domain = build_domain(cfg)
    domain.use_tokenizer(tokenizer)
    return domain


# ---------------------------------------------------------------- choosing the style


def test_auto_is_chat_exactly_when_the_tokenizer_has_a_template(plain_tokenizer, chat_tokenizer):
    assert resolve_prompt_style("auto", plain_tokenizer) == "completion"
    assert resolve_prompt_style("auto", chat_tokenizer) == "chat"
    assert resolve_prompt_style("completion", chat_tokenizer) == "completion"
    with pytest.raises(DensecodeError, match="no chat template"):
        resolve_prompt_style("chat", plain_tokenizer)


ALL = ["robotics", "codegen", "codeio", "testgen", "commitmsg", "warehouse"]  # warehouse: the plug-in domain


@pytest.mark.parametrize("name", ALL)
def test_auto_on_densecode_tiny_keeps_the_completion_prompts(name, plain_tokenizer):
    unbound = build_domain(load_config(name))
    domain = _domain(name, plain_tokenizer)
    assert domain.prompt_style == "completion"
    prompts, tasks = domain.train_batch(3, 7)
    assert prompts == unbound.train_batch(3, 7)[0] == [t["prompt"] for t in unbound.tasks("train", 3, 7 + 0)]
    assert not any("prompt_style" in t for t in tasks)
    assert domain.stop_strings(load_config(name).generation.stop) == load_config(name).generation.stop


def test_bad_prompt_style_is_a_config_error_naming_the_field(capsys):
    from densecode.cli import main

    assert main(["config", "--config", "codegen", "--set", "tasks.prompt_style=chatty"]) == 2
    err = capsys.readouterr().err
    assert "tasks.prompt_style" in err and "auto, chat, completion" in err and "chatty" in err


def test_every_domain_has_the_field():
    from densecode.config_docs import domain_sections

    tasks_sections = {domain for domain, name, cls in domain_sections() if name == "tasks"}
    assert {"robotics", "code", "codegen", "codeio", "testgen", "commitmsg", "multi", "plugin"} <= tasks_sections
    for domain, name, cls in domain_sections():
        if name == "tasks":
            assert cls().prompt_style == "auto", domain


# ---------------------------------------------------------------- the prompt text and its tokens


@pytest.mark.parametrize("name", ALL)
def test_chat_prompt_is_the_template_with_one_generation_prompt(name, chat_tokenizer):
    domain = _domain(name, chat_tokenizer)
    assert domain.prompt_style == "chat" and domain.stop_strings(["\n#"]) == []
    prompts, tasks = domain.train_batch(2, 3)
    for prompt, task in zip(prompts, tasks):
        messages = domain.chat_messages({**task, "prompt": task["completion_prompt"]})
        assert prompt == chat_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert prompt.count("<|im_start|>assistant\n") == 1 and prompt.endswith("<|im_start|>assistant\n")
        assert prompt.count("<|im_start|>") == 2  # the user turn and the generation prompt, nothing doubled
        assert task["prompt_style"] == "chat"
        # the user turn shows the task's own text (the diff, for commitmsg)
        shown = task["diff"] if name == "commitmsg" else task["completion_prompt"]
        assert shown.rstrip() in prompt


def test_no_second_bos_when_the_tokenizer_adds_one(bos_chat_tokenizer):
    tok = bos_chat_tokenizer
    messages = [{"role": "user", "content": "Write f."}]
    template = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    text = chat_prompt(tok, messages)
    ids = tok(text)["input_ids"]  # how rollouts and generate encode a prompt (the tokenizer's defaults)
    bos = tok.convert_tokens_to_ids("<|im_start|>")
    assert ids == tok(template, add_special_tokens=False)["input_ids"]
    assert ids[0] == bos and ids[1] != bos
    assert ids.count(bos) == 2  # user turn + generation prompt
    assert tok(template)["input_ids"][:2] == [bos, bos]  # what encoding the raw template text would have done


def test_mbpp_eval_chat_prompt_uses_the_same_rendering(bos_chat_tokenizer):
    from densecode.eval import mbpp

    task = mbpp.mbpp_task_from_record({"task_id": 11, "text": "Write a function to add.", "code":
                                       "def add(a, b):\n    return a + b\n", "test_list": ["assert add(1, 2) == 3"]}, "t")
    prompt = mbpp.chat_prompt(task, [], bos_chat_tokenizer)
    ids = bos_chat_tokenizer(prompt)["input_ids"]
    bos = bos_chat_tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == bos and ids[1] != bos and "def add(a, b):" in prompt


def test_generation_prompt_detection(chat_tokenizer, plain_tokenizer):
    assert ends_in_generation_prompt(chat_tokenizer, chat_prompt(chat_tokenizer, [{"role": "user", "content": "x"}]))
    assert not ends_in_generation_prompt(chat_tokenizer, "def f():\n")
    assert not ends_in_generation_prompt(plain_tokenizer, "def f():\n")


# ---------------------------------------------------------------- the answer's code and the reward regions

FENCED = "Here is the function:\n```python\n{code}```\nIt returns the answer."


def _sample(tokenizer, prompt, response, task):
    ids = tokenizer(response, add_special_tokens=False)["input_ids"]
    return make_sample(prompt, ids, tokenizer, task)


def _outside_code_is_zero(sample, batch):
    mask = sample.code_token_mask()
    assert mask.any() and not mask.all()
    for name, per_sample in batch.components.items():
        if name == "kl":
            continue
        values = per_sample[0]
        outside = [float(v) for v, m in zip(values, mask) if not m]
        assert outside == [0.0] * len(outside), (name, outside)


# (domain, the whole answer a chat model should write for a task, the component that judges it)
ANSWERS = [("codegen", lambda t: t["reference"], "tests"),  # the whole function: signature, docstring, body
           ("robotics", lambda t: "def task_program():\n" + t["reference"], "sim")]


@pytest.mark.parametrize("name,answer,judge", ANSWERS, ids=[a[0] for a in ANSWERS])
def test_chat_regions_follow_the_fenced_block(name, answer, judge, chat_tokenizer):
    cfg = load_config(name)
    domain = build_domain(cfg)
    domain.use_tokenizer(chat_tokenizer)
    prompts, tasks = domain.train_batch(1, 0)
    task = tasks[0]
    code = answer(task)
    code = code if code.endswith("\n") else code + "\n"
    response = FENCED.format(code=code)
    sample = _sample(chat_tokenizer, prompts[0], response, task)
    start = response.index(code)
    assert sample.code_regions == [(start, start + len(code.rstrip("\n")))]
    batch = build_reward_fn(cfg, domain)([sample])
    assert batch.components[judge][0].max() > 0  # the fenced code passes its tests / its simulation
    _outside_code_is_zero(sample, batch)  # syntax, lint, tests/sim (dfg): nothing on the prose around the block
    # a plain answer: all of it is the code
    plain = _sample(chat_tokenizer, prompts[0], code, task)
    assert plain.code_regions == [(0, len(plain.response))] and plain.code_token_mask().all()
    # the domain's own judge agrees with the reward for both forms, and fails prose
    records = domain.score([task] * 3, [response, code, "Here:\n```python\ndef nope():\n    pass\n```"])
    assert [r["outcome"] == "success" for r in records] == [True, True, False]


def test_completion_regions_are_unchanged_without_the_chat_marker(chat_tokenizer):
    cfg = load_config("codegen")
    task = build_domain(cfg).tasks("train", 1, 0)[0]  # unstyled: a completion task
    body = task["canonical"]
    sample = _sample(chat_tokenizer, task["prompt"], body, task)
    assert sample.region_mode == "completion" and sample.code_regions == [(0, len(sample.response))]


def test_plugin_chat_names_its_own_api_and_runs_the_block(chat_tokenizer):
    domain = _domain("warehouse", chat_tokenizer)
    prompts, tasks = domain.train_batch(1, 0)
    assert "move(direction)" in prompts[0] and "get_all_rooms" not in prompts[0]
    code = "def task_program():\n" + tasks[0]["reference"]
    records = domain.score(tasks * 2, [FENCED.format(code=code), "def task_program():\n    pass\n"])
    assert records[0]["outcome"] == "success" and records[1]["outcome"] != "success"


def test_testgen_chat_answer_is_judged_by_its_block(chat_tokenizer):
    domain = _domain("testgen", chat_tokenizer)
    _, tasks = domain.train_batch(1, 0)
    task = tasks[0]
    asserts = task["canonical"]
    records = domain.score([task, task], [FENCED.format(code=asserts if asserts.endswith("\n") else asserts + "\n"),
                                          asserts])
    assert records[0]["coverage"] == records[1]["coverage"] > 0


def test_multi_passes_its_style_to_each_task(chat_tokenizer):
    cfg = load_config(None, ["domain=multi", "tasks.tasks=[robotics,codegen,commitmsg]", "tasks.schedule=joint",
                             "tasks.options.commitmsg.prompt_style=completion"])  # a task's own setting wins
    domain = build_domain(cfg)
    assert domain.use_tokenizer(chat_tokenizer) == "chat"
    assert {n: d.prompt_style for n, d in domain.domains.items()} == {"robotics": "chat", "codegen": "chat",
                                                                      "commitmsg": "completion"}
    prompts, tasks = domain.train_batch(6, 0)
    for prompt, task in zip(prompts, tasks):
        chat = task["_domain"] != "commitmsg"
        assert prompt.endswith("<|im_start|>assistant\n") == chat and (task.get("prompt_style") == "chat") == chat


def test_training_drops_completion_stops_for_chat(chat_tokenizer, plain_tokenizer):
    from densecode.training import use_prompt_style

    cfg = load_config("robotics")
    assert use_prompt_style(cfg, build_domain(cfg), plain_tokenizer) == "completion" and cfg.generation.stop
    assert use_prompt_style(cfg, build_domain(cfg), chat_tokenizer) == "chat" and cfg.generation.stop == []
    bad = load_config("robotics", ["generation.grammar=constrain", "tasks.prompt_style=chat"])
    with pytest.raises(DensecodeError, match="grammar"):
        use_prompt_style(bad, build_domain(bad), chat_tokenizer)


def test_code_domain_mbpp_chat_request_names_the_signature(chat_tokenizer, tmp_path):
    import json

    rows = [{"task_id": n, "text": "Write a function to add two numbers.", "code": "def add(a, b):\n    return a + b\n",
             "test_list": ["assert add(1, 2) == 3"], "test_setup_code": ""} for n in (601, 511)]
    data = tmp_path / "mbpp.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    domain = _domain("code", chat_tokenizer, f"tasks.path={data}")
    prompts, tasks = domain.train_batch(1, 0)
    assert "def add(a, b):" in prompts[0] and "Write a function to add two numbers." in prompts[0]
    task = {**tasks[0], "prompt": prompts[0]}
    answer = "```python\ndef add(a, b):\n    return a + b\n```"
    records = domain.score([task, task], [answer, "def plus(a, b):\n    return a + b\n"])  # the name the tests call
    assert records[0]["outcome"] == "success" and records[1]["outcome"] != "success"


def test_an_answer_prefix_opens_the_block_and_its_fence_ends_the_answer(chat_tokenizer, tmp_path):
    """tasks.chat_answer_prefix: the prompt ends with the pre-filled text, the rollouts stop at the block's closing
    fence, the response is all code (regions, rewards and the judge read it whole)."""
    import json

    from densecode.training import use_prompt_style
    from densecode.generation import cut_at_stop

    rows = [{"task_id": n, "text": "Write a function to add two numbers.", "code": "def add(a, b):\n    return a + b\n",
             "test_list": ["assert add(1, 2) == 3"], "test_setup_code": ""} for n in (601, 511)]
    data = tmp_path / "mbpp.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    overrides = [f"tasks.path={data}", "tasks.chat_answer_prefix=```python\n"]
    cfg = load_config("code", overrides)
    domain = build_domain(cfg)
    assert use_prompt_style(cfg, domain, chat_tokenizer) == "chat" and cfg.generation.stop == ["\n```"]
    prompts, tasks = domain.train_batch(1, 0)
    assert prompts[0].endswith("<|im_start|>assistant\n```python\n")
    code = "def add(a, b):\n    return a + b"
    generated = code + "\n```\nThis adds the numbers."  # what the sampler cuts at the stop string
    ids = chat_tokenizer(generated, add_special_tokens=False)["input_ids"]
    kept = cut_at_stop(chat_tokenizer, ids, generated.index("\n```"))
    response = chat_tokenizer.decode(kept)
    assert "```" not in response and response.startswith(code)
    task = {**tasks[0], "prompt": prompts[0]}
    sample = make_sample(prompts[0], kept, chat_tokenizer, task)
    assert sample.code_regions == [(0, len(sample.response.rstrip("\n")))] or sample.code_regions == [
        (0, len(sample.response))]
    batch = build_reward_fn(cfg, domain)([sample])
    assert batch.components["tests"][0].max() > 0
    records = domain.score([task] * 2, [response, "def plus(a, b):\n    return a + b\n"])
    assert [r["outcome"] == "success" for r in records] == [True, False]
    # without a prefix (or with one that opens no block) a chat turn ends only at its end-of-turn token
    plain = load_config("code", [f"tasks.path={data}", "tasks.chat_answer_prefix=Sure.\n"])
    assert use_prompt_style(plain, build_domain(plain), chat_tokenizer) == "chat" and plain.generation.stop == []
    # completion prompts ignore it
    tiny = load_config("code", overrides)
    assert use_prompt_style(tiny, build_domain(tiny), _tiny_tokenizer()) == "completion"
    assert tiny.generation.stop and not build_domain(tiny).train_batch(1, 0)[0][0].endswith("```python\n")


def test_multi_shares_the_closing_fence_when_a_task_prefills_a_block(chat_tokenizer):
    from densecode.eval.extract import answer_code_span

    cfg = load_config(None, ["domain=multi", "tasks.tasks=[codegen,commitmsg]", "tasks.schedule=joint",
                             "tasks.options.codegen.chat_answer_prefix=```python\n"])
    domain = build_domain(cfg)
    assert domain.use_tokenizer(chat_tokenizer) == "chat" and domain.stop_strings([]) == ["\n```"]
    prompts, tasks = domain.train_batch(4, 0)
    for prompt, task in zip(prompts, tasks):
        assert prompt.endswith("```python\n") == (task["_domain"] == "codegen")
    cut = "Here it is:\n```python\ndef f():\n    return 1"  # a whole-turn answer cut at the shared stop
    start, end = answer_code_span(cut)
    assert cut[start:end] == "def f():\n    return 1"
    none = build_domain(load_config(None, ["domain=multi", "tasks.tasks=[codegen,commitmsg]", "tasks.schedule=joint"]))
    none.use_tokenizer(chat_tokenizer)
    assert none.stop_strings(["\n#"]) == []


def test_the_smollm2_recipe_trains_on_the_format_mbpp_eval_judges():
    from densecode.eval.mbpp import CHAT_RESPONSE_PREFIX

    domain = build_domain(load_config("mbpp-smollm2"))
    assert domain.options.prompt_style == "chat" and domain.options.chat_answer_prefix == CHAT_RESPONSE_PREFIX
