"""Dense token rewards: hand-built samples whose correct token rewards are known."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from densecode.config import RewardConfig
from densecode.errors import DensecodeError
from densecode.rewards import (
    SimFeedback,
    build_assembler,
    default_weights,
    find_code_regions,
    make_sample,
    program_of,
)
from densecode.rewards.dfg import DFGComponent, dataflow_match
from densecode.rewards.kl import KLComponent, kl_per_token
from densecode.rewards.lint import LintComponent, category_of
from densecode.rewards.sample import spans_from_token_bytes
from densecode.rewards.sim import SimComponent
from densecode.rewards.syntax import SyntaxComponent, parse_error
from densecode.rewards.unit_tests import TestsComponent

ROBOT_PROMPT = "# Instruction: go to the kitchen\ndef task_program():\n"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def sample_of(tok, prompt, response, task=None, **kw):
    ids = tok(response, add_special_tokens=False)["input_ids"]
    s = make_sample(prompt, ids, tok, task or {}, **kw)
    assert s.response == response
    return s


def tokens_of(s, start, end):
    return set(s.tokens_in_range(start, end))


def nonzero(values):
    return set(np.flatnonzero(values).tolist())


# ---------------------------------------------------------------- samples and spans


def test_spans_cover_response_and_split_multibyte_chars_share_a_span():
    # "é" = c3 a9 and "✓" = e2 9c 93, split across byte pieces the way byte-level BPE can.
    pieces = [b"s = '", b"caf\xc3", b"\xa9 ", b"\xe2", b"\x9c", b"\x93'", b"\n"]
    text, spans = spans_from_token_bytes(pieces)
    assert text == "s = 'café ✓'\n"
    e = text.index("é")
    check = text.index("✓")
    assert spans[1] == (5, e + 1)  # "caf" + first byte of é: holds é too
    assert spans[2] == (e, e + 2)  # rest of é + space: shares é
    assert spans[3] == (check, check + 1) and spans[4] == (check, check + 1)  # lone bytes of ✓: the shared span
    assert spans[5] == (check, check + 2)
    # A truncated response ending mid-character decodes to U+FFFD, which the last token holds.
    text, spans = spans_from_token_bytes([b"ab", b"\xe2\x9c"])
    assert text == "ab\ufffd" and spans[-1] == (2, 3)


def test_make_sample_with_real_tokenizer_handles_multibyte(tok):
    response = "    say('café ✓ naïve')\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    assert len(s.token_spans) == len(s.token_ids)
    covered = set()
    for a, b in s.token_spans:
        covered.update(range(a, b))
    assert covered == set(range(len(response)))
    # Every token's span holds (at least part of) its own decoded text.
    for tid, (a, b) in zip(s.token_ids, s.token_spans):
        piece = tok.decode([tid])
        assert b > a
        assert piece.replace("\ufffd", "") in response[a:b] or "\ufffd" in piece


def test_special_tokens_get_empty_span(tok):
    ids = tok("x = 1\n", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    s = make_sample("def f():\n", ids, tok)
    assert s.response == "x = 1\n"
    assert s.token_spans[-1] == (6, 6)


def test_code_regions_modes():
    chat = "Here you go:\n```python\nx = 1\n```\nand\n```py\ny = 2\n```\nbye ```"
    regions, mode = find_code_regions("Write code.", chat, "auto")
    assert mode == "fenced"
    assert [chat[a:b] for a, b in regions] == ["x = 1\n", "y = 2\n"]
    regions, mode = find_code_regions(ROBOT_PROMPT, "    go_to('a')\n", "auto")
    assert (regions, mode) == ([(0, 15)], "completion")
    regions, mode = find_code_regions("Say hi.", "Hello there, how are you today?", "auto")
    assert regions == []
    # The prompt opened a fence: the response is code up to its closing fence.
    regions, mode = find_code_regions("```python\n", "x = 1\n```\ntext", "auto")
    assert regions == [(0, 6)] and mode == "completion"
    # Unclosed block at the end (truncated): runs to the end.
    assert find_code_regions("q", "a\n```python\nx = (", "fenced")[0] == [(12, 17)]
    with pytest.raises(DensecodeError):
        find_code_regions("q", "a", "everything")


def test_program_of_completion_maps_lines_back(tok):
    response = "    x = 1\n    y = x + 2\n    return y\n"
    s = sample_of(tok, "Compute.\ndef f():\n", response)
    program, pmap = program_of(s)
    assert program == "def f():\n" + response
    assert pmap.line_to_response(1) is None  # the prompt's def line
    a, b = pmap.line_to_response(3)
    assert response[a:b] == "y = x + 2"


def test_program_of_multiblock_joins_blocks(tok):
    chat = "First:\n```python\ndef f(a):\n    return a\n```\nThen:\n```python\nprint(f(2))\n```\n"
    s = sample_of(tok, "Write it.", chat)
    program, pmap = program_of(s)
    assert program == "def f(a):\n    return a\n\nprint(f(2))\n"
    a, b = pmap.line_to_response(4)
    assert chat[a:b] == "print(f(2))"
    assert pmap.line_to_response(3) is None  # the joining newline


# ---------------------------------------------------------------- syntax


def test_syntax_error_at_known_token(tok):
    response = "    x = 1\n    y = (x + ) * 2\n    say(y)\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    out = SyntaxComponent()([s])[0]
    bad = response.index(")")  # CPython: "invalid syntax" at the ')' after '+ '
    err_tok = s.token_at(bad)
    assert out.values[err_tok] == -1.0
    assert np.all(out.values[:err_tok] == 1.0)
    assert np.all(out.values[err_tok + 1 :] == 0.0)
    assert out.info["syntax_ok"] == 0.0
    assert out.diagnostics[0]["tokens"] == [err_tok, err_tok + 1]


def test_syntax_valid_and_incomplete(tok):
    ok = sample_of(tok, ROBOT_PROMPT, "    go_to('kitchen')\n")
    assert np.all(SyntaxComponent()([ok])[0].values == 1.0)
    # Truncated in the middle of a call: incomplete, not invalid.
    cut = sample_of(tok, ROBOT_PROMPT, "    go_to('kit", truncated=True)
    assert np.all(SyntaxComponent()([cut])[0].values == 1.0)
    # The same text, but the model chose to stop there: the last token is blamed.
    stopped = sample_of(tok, ROBOT_PROMPT, "    go_to('kit")
    v = SyntaxComponent()([stopped])[0].values
    assert v[-1] == -1.0 and np.all(v[:-1] == 1.0)
    assert parse_error("x = (1,\n")[2] is True
    assert parse_error("x = (1 +* 2)\n")[2] is False


def test_syntax_prose_gets_nothing_and_blocks_are_judged_separately(tok):
    chat = "Sure:\n```python\nx = = 1\n```\nAnd:\n```python\ny = 2\n```\n"
    s = sample_of(tok, "Write code.", chat)
    v = SyntaxComponent(after_error_value=0.0)([s])[0].values
    code = s.code_token_mask()
    prose = [i for i in range(s.n_tokens) if not code[i]]
    assert np.all(v[prose] == 0.0)
    second = tokens_of(s, chat.index("y = 2"), chat.index("y = 2") + 5)
    assert all(v[i] == 1.0 for i in second)  # block 2 is fine even though block 1 broke
    assert (v == -1.0).sum() == 1


def test_syntax_grammar_source_uses_verdicts(tok):
    s = sample_of(tok, ROBOT_PROMPT, "    x = 1\n    y = 2\n")
    verdicts = [True] * s.n_tokens
    verdicts[4] = False
    s.grammar_verdicts = verdicts
    v = SyntaxComponent(source="grammar")([s])[0].values
    assert v[4] == -1 and np.all(v[:4] == 1) and np.all(v[5:] == 0)
    s.grammar_verdicts = None
    with pytest.raises(DensecodeError):
        SyntaxComponent(source="grammar")([s])


def test_mbpp_reference_subset_never_negative(tok, shared_data):
    import json
    import os

    with open(os.path.join(shared_data, "mbpp", "mbpp.jsonl"), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:120]
    comp = SyntaxComponent()
    samples = [sample_of(tok, "Write a function.\n```python\n", r["code"]) for r in rows]
    for r, out in zip(rows, comp(samples)):
        assert out.values.min() >= 0, r["task_id"]


# ---------------------------------------------------------------- lint


def test_category_of():
    assert category_of("F701") == "compilable" and category_of("PLE0101") == "runnable"
    assert category_of("F821") == "runnable" and category_of("B006") == "style"
    assert category_of("S307") == "safety" and category_of("S301") == "safety"
    assert category_of("N802") == "style" and category_of("PLR0913") == "style"


def test_f821_maps_to_exactly_the_name(tok):
    response = "    total = compute(1, 2) + undefined_thing * 3\n    say(str(total))\n"
    s = sample_of(tok, ROBOT_PROMPT, response, task={"builtins": ["compute"]})
    comp = LintComponent(select=["F"], builtins=["say"])
    out = comp([s])[0]
    f821 = [d for d in out.diagnostics if d["rule"] == "F821"]
    assert len(f821) == 1
    start = response.index("undefined_thing")
    expected = tokens_of(s, start, start + len("undefined_thing"))
    assert set(range(*f821[0]["tokens"])) == expected
    assert nonzero(out.values) == expected  # not the whole line
    assert all(out.values[i] == -1.0 for i in expected)


def test_s307_maps_to_the_call(tok):
    response = "    data = eval(text)\n    say(data)\n"
    s = sample_of(tok, "def task_program(text):\n", response)
    out = LintComponent(select=["S"])([s])[0]
    (d,) = [d for d in out.diagnostics if d["rule"] == "S307"]
    start = response.index("eval")
    assert d["node"] == "call"
    assert set(range(*d["tokens"])) == tokens_of(s, start, response.index(")") + 1)
    assert "data" not in "".join(response[a:b] for a, b in (s.token_spans[i] for i in range(*d["tokens"])))


def test_lint_reference_selection_in_completion_mode_skips_prefix(tok):
    # ANN201 fires on the prompt's `def task_program():` line: it must reach no token.
    s = sample_of(tok, ROBOT_PROMPT, "    go_to('kitchen')\n")
    cfg = RewardConfig(weights={"sim": 0, "kl": 0, "syntax": 0})
    batch = build_assembler(cfg, "robotics")([s])
    assert batch.outputs["lint"][0].info["n_violations"] == 0
    assert np.all(batch.raw["lint"][0] == 0)


def test_lint_batch_one_call_many_samples(tok):
    responses = ["    import os\n    go_to('a')\n", "    go_to('b')\n", "    x = eval('1')\n    say(x)\n"]
    samples = [sample_of(tok, ROBOT_PROMPT, r) for r in responses]
    outs = LintComponent(builtins=["go_to", "say"])(samples)
    rules = [{d["rule"] for d in o.diagnostics} for o in outs]
    assert "F401" in rules[0] and rules[1] == set() and "S307" in rules[2]


def test_lint_multibyte_columns_map_by_characters(tok):
    response = "    s = 'héllo ✓✓'; t = nope\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    out = LintComponent(select=["F821"])([s])[0]
    (d,) = out.diagnostics
    start = response.index("nope")
    assert tuple(d["span"]) == (start, start + 4)


# ---------------------------------------------------------------- tests (sandbox)


@pytest.fixture
def fake_jobs(monkeypatch):
    """Job records without the real sandbox (its own tests cover it)."""
    import densecode.rewards.unit_tests as ut

    monkeypatch.setattr(ut, "_job_classes", lambda: (SimpleNamespace, SimpleNamespace))


class FakePool:
    def __init__(self, results):
        self.results = results
        self.jobs = []

    def run(self, jobs):
        self.jobs += jobs
        return self.results[: len(jobs)]


def _judge(n_passed, n_tests, error_line=None, exc_type=None):
    return SimpleNamespace(n_passed=n_passed, n_tests=n_tests, outcome="fail" if n_passed < n_tests else "pass",
                           exc_type=exc_type, exc_message="boom" if exc_type else None, error_line=error_line)


def test_tests_k_of_n_on_code_tokens_only(tok, fake_jobs):
    chat = "Here is the function:\n```python\ndef add(a, b):\n    return a + b\n```\nHope it helps!"
    s = sample_of(tok, "Write add.", chat, task={"tests": ["assert add(1, 2) == 3"] * 4})
    pool = FakePool([_judge(3, 4)])
    out = TestsComponent(sandbox=pool)([s])[0]
    code = s.code_token_mask()
    assert np.allclose(out.values[code], 0.75)
    assert np.all(out.values[~code] == 0.0)
    assert out.info["pass_rate"] == 0.75
    assert pool.jobs[0].code == "def add(a, b):\n    return a + b\n"


def test_tests_without_partial_credit_pays_only_all_passing(tok, fake_jobs):
    # The hack partial credit pays: return the prompt's one shown expected value (1 of 3 tests).
    task = {"tests": ["assert f(16, 2) == 64", "assert f(10, 2) == 40", "assert f(99, 3) == 792"]}
    hack = sample_of(tok, "def f(n, d):\n", "    return 64\n", task=task)
    right = sample_of(tok, "def f(n, d):\n", "    return n << d\n", task=task)
    judged = [_judge(1, 3), _judge(3, 3)]
    partial = TestsComponent(sandbox=FakePool(judged))([hack, right])
    strict = TestsComponent(sandbox=FakePool(judged), partial_credit=False, fail_penalty=-0.3)([hack, right])
    assert partial[0].outcome == pytest.approx(1 / 3) and np.all(partial[0].values > 0)
    assert strict[0].outcome == 0.0 and np.allclose(strict[0].values, -0.3)
    assert strict[0].info["pass_rate"] == pytest.approx(1 / 3) and strict[0].incorrect  # the diagnostic stays
    assert strict[1].outcome == 1.0 and np.allclose(strict[1].values, 1.0) and not strict[1].incorrect


def test_tests_none_passing_penalty_and_exception_line(tok, fake_jobs):
    response = "    a = 1\n    b = 0\n    c = a / b\n    return c\n"
    s = sample_of(tok, "def f():\n", response, task={"tests": ["assert f() == 1"]})
    # Program line 4 = response line 3 (line 1 is the prompt's def line).
    out = TestsComponent(sandbox=FakePool([_judge(0, 1, error_line=4, exc_type="ZeroDivisionError")]),
                         fail_penalty=-0.3, exception_penalty=-1.0)([s])[0]
    start = response.index("c = a / b")
    line3 = tokens_of(s, start, start + len("c = a / b"))
    for i in range(s.n_tokens):
        assert out.values[i] == pytest.approx(-1.3 if i in line3 else -0.3)
    assert any(d["rule"] == "ZeroDivisionError" for d in out.diagnostics)


def test_tests_without_tests_gives_zeros(tok):
    s = sample_of(tok, "def f():\n", "    return 1\n")
    out = TestsComponent(sandbox=FakePool([]))([s])[0]
    assert np.all(out.values == 0) and out.info["has_tests"] == 0


# ---------------------------------------------------------------- dfg, sim, kl


def test_dfg_rename_invariant_and_penalises_different_flow():
    ref = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    renamed = "def g(items):\n    s = 0\n    for it in items:\n        s += it\n    return s\n"
    assert dataflow_match(renamed, ref) == 1.0
    assert dataflow_match("def g(items):\n    return sum(items)\n", ref) < 0.5


def test_dfg_component_positive_part(tok):
    ref = "    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    s = sample_of(tok, "def f(xs):\n", ref, task={"reference": "def f(xs):\n" + ref})
    out = DFGComponent()([s])[0]
    assert np.allclose(out.values, 0.5)
    bad = sample_of(tok, "def f(xs):\n", "    return 0\n", task={"reference": "def f(xs):\n" + ref})
    assert np.all(DFGComponent()([bad])[0].values == 0)
    assert np.all(DFGComponent(positive_only=False)([bad])[0].values < 0)


class FakeSim:
    def __init__(self, feedback):
        self.feedback = feedback
        self.programs = None

    def evaluate(self, programs, tasks):
        self.programs = programs
        return [self.feedback for _ in programs]


def test_sim_score_and_line_penalty(tok):
    response = "    go_to('kitchen')\n    pick('apple')\n    place('pear')\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    sim = FakeSim(SimFeedback(0.6, [(4, -0.5, "placing what is not held"), (1, -1.0, "prefix line")]))
    out = SimComponent(simulator=sim)([s])[0]
    assert sim.programs == ["def task_program():\n" + response]
    start = response.index("place('pear')")
    line = tokens_of(s, start, start + len("place('pear')"))
    for i in range(s.n_tokens):
        assert out.values[i] == pytest.approx(0.1 if i in line else 0.6)
    zero = SimComponent(simulator=FakeSim(SimFeedback(0.0)))([s])[0]
    assert np.allclose(zero.values, -0.1)


def test_kl_estimators():
    lp = np.array([-1.0, -2.0, -0.5], dtype=np.float32)
    ref = np.array([-1.5, -1.0, -0.5], dtype=np.float32)
    x = ref - lp
    assert np.allclose(kl_per_token(lp, ref, "k3"), np.expm1(x) - x, atol=1e-6)
    assert np.allclose(kl_per_token(lp, ref, "k1"), -x)
    s = SimpleNamespace(n_tokens=3, logprobs=lp, ref_logprobs=ref)
    out = KLComponent()([s])[0]
    assert np.all(out.values <= 0) and out.values[2] == 0


# ---------------------------------------------------------------- assembler


def _robot_batch(tok, mode="dense"):
    responses = ["    go_to('kitchen')\n    x = eval(y)\n", "    say('hi')\n    pick((\n", "    go_to('a')\n"]
    samples = [sample_of(tok, ROBOT_PROMPT, r) for r in responses]
    for s in samples:
        rng = np.random.default_rng(s.n_tokens)
        s.logprobs = rng.normal(-2, 0.5, s.n_tokens).astype(np.float32)
        s.ref_logprobs = rng.normal(-2, 0.5, s.n_tokens).astype(np.float32)
    cfg = RewardConfig(mode=mode)
    return samples, build_assembler(cfg, "robotics", simulator=FakeSim(SimFeedback(0.4, [(2, -0.5, "x")])))(samples)


def test_assembler_weighted_sum_and_stats(tok):
    samples, batch = _robot_batch(tok)
    w = default_weights("robotics")
    assert batch.weights == w
    for i in range(len(samples)):
        expected = sum(w[n] * batch.raw[n][i] for n in w)
        assert np.allclose(batch.total[i], expected, atol=1e-6)
        assert np.allclose(batch.components["sim"][i], 0.8 * batch.raw["sim"][i])
    assert batch.stats["reward/syntax/syntax_ok"] == pytest.approx(2 / 3)
    assert "time/reward_lint_s" in batch.stats and "reward/kl/kl" in batch.stats


def test_sparse_sums_equal_dense_totals(tok):
    _, dense = _robot_batch(tok, "dense")
    samples, sparse = _robot_batch(tok, "sparse")
    for d, sp, s in zip(dense.total, sparse.total, samples):
        assert sp.sum() == pytest.approx(d.sum(), abs=1e-4)
        # Only KL stays per token: everything else sits on the last token.
        assert np.allclose(sp[:-1], sparse.components["kl"][samples.index(s)][:-1])


def test_set_weight_and_config_errors(tok):
    samples, _ = _robot_batch(tok)
    asm = build_assembler(RewardConfig(), "robotics", simulator=FakeSim(SimFeedback(1.0)))
    asm.set_weight("kl", 0.0)
    assert "kl" not in asm([samples[0]]).raw
    with pytest.raises(DensecodeError):
        asm.set_weight("kl", -1)
    with pytest.raises(DensecodeError, match="unknown option"):
        build_assembler(RewardConfig(components={"lint": {"colour": 1}}), "code")
    with pytest.raises(DensecodeError, match="unknown component"):
        build_assembler(RewardConfig(weights={"vibes": 1.0}), "code")
    with pytest.raises(DensecodeError, match="simulator"):
        build_assembler(RewardConfig(), "robotics")([samples[0]])


def test_custom_component_by_class_path(tok):
    s = sample_of(tok, ROBOT_PROMPT, "    go_to('a')\n")
    cfg = RewardConfig(weights={"sim": 0, "kl": 0, "lint": 0, "syntax": 0, "length": 1.0},
                       components={"length": {"class": "tests.rewards.test_rewards:LengthPenalty", "per_token": -0.01}})
    batch = build_assembler(cfg, "robotics")([s])
    assert np.allclose(batch.total[0], -0.01)


class LengthPenalty:
    """A plug-in component for the class-path test: a constant per token."""

    name = "length"

    def __init__(self, per_token: float = -0.01) -> None:
        self.per_token = per_token

    def __call__(self, samples):
        from densecode.rewards import ComponentOutput

        return [ComponentOutput(np.full(s.n_tokens, self.per_token, dtype=np.float32)) for s in samples]


def test_tests_component_with_real_sandbox(tok):
    sandbox = pytest.importorskip("densecode.sandbox")
    if not hasattr(sandbox, "AssertJob"):
        pytest.skip("densecode.sandbox has no AssertJob yet")
    prompt = "Write f.\n```python\n"
    good = sample_of(tok, prompt, "def f(x):\n    return x + 1\n```\nDone.", task={"tests": ["assert f(1) == 2", "assert f(2) == 4"]})
    bad = sample_of(tok, prompt, "def f(x):\n    y = 2\n    return x / 0\n```\n", task={"tests": ["assert f(1) == 2"]})
    outs = TestsComponent(timeout=60.0)([good, bad])  # generous: CI machines are shared
    assert outs[0].info["pass_rate"] == 0.5
    code = good.code_token_mask()
    assert np.allclose(outs[0].values[code], 0.5) and np.all(outs[0].values[~code] == 0)
    line3 = tokens_of(bad, bad.response.index("return x / 0"), bad.response.index(" / 0") + 4)
    v = outs[1].values
    assert all(v[i] == pytest.approx(-1.3) for i in line3)
    assert v[0] == pytest.approx(-0.3)
    assert outs[1].info["exception"] == 1.0


def test_empty_and_eos_only_responses(tok, fake_jobs):
    empty = make_sample(ROBOT_PROMPT, [], tok, {"tests": ["assert True"]})
    eos = make_sample(ROBOT_PROMPT, [tok.eos_token_id], tok, {"tests": ["assert True"]})
    assert empty.n_tokens == 0 and eos.token_spans == [(0, 0)]
    cfg = RewardConfig(mode="sparse")
    comps = {"tests": TestsComponent(sandbox=FakePool([_judge(0, 1), _judge(0, 1)]))}
    batch = build_assembler(cfg, "code", components=comps)([empty, eos])
    assert batch.total[0].shape == (0,)
    # No code at all: the failing tests' penalty lands on the only (EOS) token, and so does the
    # syntax error of stopping before `def task_program():` has a body.
    assert batch.total[1][0] == pytest.approx(0.7 * -0.3 + 0.1 * -1.0)


def _sentencepiece_style_tokenizer():
    """A Llama-style tokenizer (Metaspace + byte fallback), built offline."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "</s>": 1}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in [chr(i) for i in range(33, 127)] + ["▁", "▁▁", "▁▁▁▁"]:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "▁"), ("▁▁", "▁▁")], byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>")


def test_spans_with_byte_fallback_tokenizer():
    sp = _sentencepiece_style_tokenizer()
    text = "    say('café ✓')\n"
    ids = sp(text, add_special_tokens=False)["input_ids"]
    s = make_sample(ROBOT_PROMPT, ids + [sp.eos_token_id], sp)
    assert s.response == text
    pieces = sp.convert_ids_to_tokens(ids)
    check = text.index("✓")
    byte_tokens = [i for i, p in enumerate(pieces) if p in ("<0xE2>", "<0x9C>", "<0x93>")]
    assert len(byte_tokens) == 3 and all(s.token_spans[i] == (check, check + 1) for i in byte_tokens)
    assert s.token_spans[-1] == (len(text), len(text))  # EOS
    # A lint finding on ✓'s string reaches all three byte tokens.
    assert set(byte_tokens) <= set(s.tokens_in_range(text.index("'c"), text.index("')") + 1))


def test_sparse_without_dense_kl_puts_everything_on_the_last_token(tok):
    _, dense = _robot_batch(tok, "dense")
    samples = [sample_of(tok, ROBOT_PROMPT, "    go_to('kitchen')\n    x = eval(y)\n")]
    s = samples[0]
    s.logprobs = np.full(s.n_tokens, -1.0, dtype=np.float32)
    s.ref_logprobs = np.full(s.n_tokens, -1.5, dtype=np.float32)
    sim = FakeSim(SimFeedback(0.4, [(2, -0.5, "x")]))
    dense = build_assembler(RewardConfig(), "robotics", simulator=sim)(samples)
    sparse = build_assembler(RewardConfig(mode="sparse", sparse_keep_dense=[]), "robotics", simulator=sim)(samples)
    assert np.all(sparse.total[0][:-1] == 0)
    assert sparse.total[0][-1] == pytest.approx(dense.total[0].sum(), abs=1e-4)


def test_robotics_assembler_with_robosim_backend(tok):
    from densecode.simulators import RoboSimBackend
    from densecode_robosim.tasks import generate_tasks

    task = generate_tasks("train", 1, seed=0)[0]
    good = sample_of(tok, task.prompt, task.reference, task=task.to_dict())
    broken_body = "    place('a unicorn')\n" + task.reference
    bad = sample_of(tok, task.prompt, broken_body, task=task.to_dict())
    batch = build_assembler(RewardConfig(weights={"kl": 0.0}), "robotics", simulator=RoboSimBackend())([good, bad])
    assert batch.outputs["sim"][0].info["sim_score"] == pytest.approx(1.0)
    assert batch.outputs["lint"][0].info["n_violations"] == 0  # robot API names are builtins here
    sim_bad = batch.raw["sim"][1]
    line1 = tokens_of(bad, 4, len("    place('a unicorn')"))
    later = tokens_of(bad, len("    place('a unicorn')\n") + 4, len(broken_body))
    # The failing call's line carries the line penalty on top of the (fail) score.
    assert max(sim_bad[i] for i in line1) < min(sim_bad[i] for i in later)
    assert any(d["rule"] == "sim-line" for d in batch.outputs["sim"][1].diagnostics)


def test_kl_estimator_from_algo_unless_component_option(tok):
    asm = build_assembler(RewardConfig(), "code", kl_estimator="k1")
    assert asm.components["kl"].estimator == "k1"
    asm = build_assembler(RewardConfig(components={"kl": {"estimator": "k3"}}), "code", kl_estimator="k1")
    assert asm.components["kl"].estimator == "k3"


# ---------------------------------------------------------------- spread: each (reference) vs split


def test_split_spread_makes_sums_length_neutral(tok):
    """`spread: split` divides a value among its tokens: a longer response earns no more (or less)."""
    short = "    go_to('kitchen')\n"
    long = "    start = get_current_location()\n    go_to('kitchen')\n    go_to(start)\n    say('done')\n"
    sums = {}
    for name, response in (("short", short), ("long", long)):
        s = sample_of(tok, ROBOT_PROMPT, response)
        each = SimComponent(simulator=FakeSim(SimFeedback(0.6)))([s])[0].values
        split = SimComponent(simulator=FakeSim(SimFeedback(0.6)), spread="split")([s])[0].values
        code = s.code_token_mask()
        assert np.allclose(each[code], 0.6)
        assert np.allclose(split[code], 0.6 / code.sum())
        sums[name] = (float(each.sum()), float(split.sum()))
        syn = SyntaxComponent(spread="split")([s])[0].values
        assert float(syn.sum()) == pytest.approx(1.0, abs=1e-5)
    assert sums["long"][0] > 2 * sums["short"][0]  # "each": the sum grows with length
    assert sums["long"][1] == pytest.approx(0.6, abs=1e-5) and sums["short"][1] == pytest.approx(0.6, abs=1e-5)


def test_split_spread_keeps_line_penalties_on_their_line(tok):
    response = "    go_to('kitchen')\n    pick('apple')\n    place('pear')\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    sim = FakeSim(SimFeedback(0.6, [(4, -0.5, "placing what is not held")]))
    out = SimComponent(simulator=sim, spread="split")([s])[0]
    start = response.index("place('pear')")
    line = sorted(tokens_of(s, start, start + len("place('pear')")))
    n_code = int(s.code_token_mask().sum())
    for i in range(s.n_tokens):
        expected = 0.6 / n_code + (-0.5 / len(line) if i in line else 0.0)
        assert out.values[i] == pytest.approx(expected, abs=1e-6)
    assert float(out.values[line].sum()) == pytest.approx(-0.5 + 0.6 * len(line) / n_code, abs=1e-5)
    # The first bad token keeps the whole syntax error value.
    bad = sample_of(tok, ROBOT_PROMPT, "    x = 1\n    y = (x + ) * 2\n")
    v = SyntaxComponent(spread="split")([bad])[0].values
    err = bad.token_at(bad.response.index(")"))
    assert v[err] == -1.0 and np.all(v[:err] > 0) and np.all(v[:err] < 1.0)
    with pytest.raises(DensecodeError, match="spread"):
        SimComponent(simulator=sim, spread="mean")


def test_last_spread_puts_whole_response_scores_on_the_last_token_and_keeps_located_values(tok, fake_jobs):
    """`spread: last`: the score the whole response earned goes on its last token (with gamma = 1 every token's
    return then carries all of it); a failing line's penalty, a Ruff finding, a syntax error stay where they are."""
    response = "    go_to('kitchen')\n    pick('apple')\n    place('pear')\n"
    s = sample_of(tok, ROBOT_PROMPT, response)
    sim = FakeSim(SimFeedback(0.6, [(4, -0.5, "placing what is not held")]))
    last = SimComponent(simulator=sim, spread="last")([s])[0].values
    split = SimComponent(simulator=sim, spread="split")([s])[0].values
    start = response.index("place('pear')")
    line = sorted(tokens_of(s, start, start + len("place('pear')")))
    end = s.n_tokens - 1
    for i in range(s.n_tokens):
        expected = (-0.5 / len(line) if i in line else 0.0) + (0.6 if i == end else 0.0)
        assert last[i] == pytest.approx(expected, abs=1e-6)
    assert float(last.sum()) == pytest.approx(float(split.sum()), abs=1e-5)  # same total as split: only placement
    returns = np.cumsum(last[::-1])[::-1]  # gamma = 1: reward still to come
    assert np.all(returns[line[-1] + 1:] == pytest.approx(0.6)) and returns[0] == pytest.approx(0.1, abs=1e-5)
    # syntax: a response that parses gets its credit on the last token; an error keeps the split prefix credit
    syn = SyntaxComponent(spread="last")([s])[0].values
    assert syn[end] == pytest.approx(1.0) and np.all(syn[:end] == 0.0)
    bad = sample_of(tok, ROBOT_PROMPT, "    x = 1\n    y = (x + ) * 2\n")
    assert np.allclose(SyntaxComponent(spread="last")([bad])[0].values,
                       SyntaxComponent(spread="split")([bad])[0].values)
    # tests: the pass fraction on the last token, the line that raised keeps its penalty
    chat = "    a = 1\n    b = 0\n    c = a / b\n    return c\n"
    t = sample_of(tok, "def f():\n", chat, task={"tests": ["assert f() == 1"] * 4})
    out = TestsComponent(sandbox=FakePool([_judge(1, 4, error_line=4, exc_type="ZeroDivisionError")]),
                         exception_penalty=-1.0, spread="last")([t])[0].values
    start = chat.index("c = a / b")
    line3 = sorted(tokens_of(t, start, start + len("c = a / b")))
    for i in range(t.n_tokens):
        expected = (-1.0 / len(line3) if i in line3 else 0.0) + (0.25 if i == t.n_tokens - 1 else 0.0)
        assert out[i] == pytest.approx(expected, abs=1e-6)
    # dfg: the match on the last token
    ref = "    total = 0\n    for x in xs:\n        total += x\n    return total\n"
    d = sample_of(tok, "def f(xs):\n", ref, task={"reference": "def f(xs):\n" + ref})
    dv = DFGComponent(spread="last")([d])[0].values
    assert dv[-1] == pytest.approx(0.5) and np.all(dv[:-1] == 0.0)


def test_stopping_at_once_is_a_syntax_and_sim_failure_on_the_stop(tok):
    """EOS right after `def task_program():` leaves a body-less program: the stop is to blame."""
    empty = make_sample(ROBOT_PROMPT, [tok.eos_token_id], tok, {}, code_regions="completion")
    out = SyntaxComponent()([empty])[0]
    assert out.values.tolist() == [-1.0] and out.info["syntax_ok"] == 0.0
    # ... also when the prompt has no code prefix to complete (no code where code was asked for),
    # but not when the stop was a length cut-off
    prose = make_sample("Write add.", [tok.eos_token_id], tok, {}, code_regions="completion")
    assert SyntaxComponent()([prose])[0].values.tolist() == [-1.0]
    cut = make_sample(ROBOT_PROMPT, [tok.eos_token_id], tok, {}, code_regions="completion", truncated=True)
    assert SyntaxComponent()([cut])[0].values.tolist() == [0.0]
    # the sim's penalty for a program that could not run lands on the stop too
    sim = FakeSim(SimFeedback(0.0, [(1, -0.5, "SyntaxError: expected an indented block")]))
    v = SimComponent(simulator=sim)([empty])[0].values
    assert v.tolist() == [pytest.approx(-0.6)]
