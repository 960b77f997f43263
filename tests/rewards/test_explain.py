"""`densecode explain`: rollouts format and the HTML page's structure."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pytest

from densecode.cli import main
from densecode.config import RewardConfig
from densecode.rewards import SimFeedback, build_assembler, make_sample
from densecode.rewards.explain import read_jsonl, render_html, write_rollouts

PROMPT = "# Instruction: fetch the apple\ndef task_program():\n"
RESPONSES = [
    "    go_to('kitchen')\n    if is_in_room('apple'):\n        pick('apple')\n",
    "    x = eval(answer)\n    go_to(x)\n",
    "    say('café ✓')\n    pick((\n",
]


class FakeSim:
    def evaluate(self, programs, tasks):
        return [SimFeedback(0.5 if "eval" not in p else 0.0, [(3, -0.5, "robot error in go_to: no such room")])
                for p in programs]


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tokens, self.boxes, self.rows, self.sections = [], [], 0, 0
        self.data = None
        self._in_data = False
        self.external = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and "tok" in a.get("class", "").split():
            self.tokens.append(a)
        if tag == "input" and "comp" in a.get("class", ""):
            self.boxes.append(a["value"])
        if tag == "tr":
            self.rows += 1
        if tag == "section":
            self.sections += 1
        if tag == "script" and a.get("id") == "reward-data":
            self._in_data = True
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(a[key])

    def handle_data(self, data):
        if self._in_data:
            self.data = json.loads(data)
            self._in_data = False


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture()
def rollouts(tok, tmp_path):
    samples = []
    for r in RESPONSES:
        ids = tok(r, add_special_tokens=False)["input_ids"]
        rng = np.random.default_rng(len(ids))
        samples.append(make_sample(PROMPT, ids, tok, {"task_id": "fetch"},
                                   logprobs=rng.normal(-1, 0.3, len(ids)), ref_logprobs=rng.normal(-1, 0.3, len(ids))))
    batch = build_assembler(RewardConfig(), "robotics", simulator=FakeSim())(samples)
    path = write_rollouts(tmp_path / "rollouts.jsonl", samples, batch, step=7)
    return path, samples, batch


def test_rollouts_roundtrip(rollouts):
    path, samples, batch = rollouts
    rows = read_jsonl(path)
    assert len(rows) == 3
    assert rows[0]["format"] == "densecode-rollout/1" and rows[0]["step"] == 7
    assert set(rows[0]["components"]) == {"syntax", "lint", "sim", "kl"}
    for row, s, total in zip(rows, samples, batch.total):
        assert row["response"] == s.response
        assert [tuple(x) for x in row["token_spans"]] == s.token_spans
        assert np.allclose(row["total"], total, atol=1e-5)
        weighted = sum(row["weights"][c] * np.array(v) for c, v in row["components"].items())
        assert np.allclose(weighted, total, atol=1e-4)
    assert any(d["rule"] == "S307" for d in rows[1]["diagnostics"]["lint"])


def test_explain_page_structure(rollouts, tmp_path):
    path, samples, batch = rollouts
    out = tmp_path / "report.html"
    assert main(["explain", "--in", str(path), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    assert page.sections == 3
    assert len(page.tokens) == sum(s.n_tokens for s in samples)  # one span per token
    assert page.boxes == ["lint", "syntax", "sim", "kl"]
    assert page.rows == 1 + 3 + 1  # header, one per sample, mean
    assert page.external == []  # self-contained
    assert [len(s["ids"]) for s in page.data["samples"]] == [s.n_tokens for s in samples]
    # Token text, in order, rebuilds each response (shared multi-byte spans render once).
    for k, s in enumerate(samples):
        shown = "".join(html_unescape_text(text, k, t) for t in range(s.n_tokens))
        assert shown == s.response
    # Tooltip data: every component's raw values and weights, and the diagnostics per token range.
    d1 = page.data["samples"][1]
    assert set(d1["raw"]) == {"lint", "syntax", "sim", "kl"} and d1["weights"]["sim"] == 0.8
    assert np.allclose(d1["total"], batch.total[1], atol=1e-4)
    s307 = [d for d in d1["diags"] if "S307" in d[2]]
    assert s307 and samples[1].response[samples[1].token_spans[s307[0][0]][0]:].lstrip().startswith("eval")
    # Server-side colours: negative totals red, positive green.
    for tok_attrs in page.tokens:
        v = page.data["samples"][int(tok_attrs["data-s"])]["total"][int(tok_attrs["data-t"])]
        if v < -1e-3:
            assert "rgba(220,38,38" in tok_attrs["style"]
        elif v > 1e-3:
            assert "rgba(22,163,74" in tok_attrs["style"]
    assert "robot error in go_to" in text


def html_unescape_text(page_text, k, t):
    import html
    import re

    m = re.search(rf'<span class="[^"]*" data-s="{k}" data-t="{t}"[^>]*>(.*?)</span>', page_text, re.DOTALL)
    return html.unescape(m.group(1))


def test_render_rejects_broken_records():
    from densecode.errors import DensecodeError

    with pytest.raises(DensecodeError, match="token spans"):
        render_html([{"response": "x", "token_spans": [[0, 1]], "total": [1.0, 2.0], "components": {}}])


def test_explain_errors(tmp_path, capsys):
    assert main(["explain", "--in", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r.html")]) == 2
    gen = tmp_path / "gen.jsonl"
    gen.write_text(json.dumps({"prompt": PROMPT, "completion": "    go_to('a')\n"}) + "\n")
    assert main(["explain", "--in", str(gen), "--out", str(tmp_path / "r.html")]) == 2
    assert "--model" in capsys.readouterr().err


def test_explain_scores_generate_output(tiny_model_dir, tok, tmp_path):
    gen = tmp_path / "gen.jsonl"
    lines = []
    for r in RESPONSES:
        ids = tok(r, add_special_tokens=False)["input_ids"]
        lines.append(json.dumps({"prompt": PROMPT, "completion": r, "token_ids": ids, "finish_reason": "stop"}))
    gen.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.html"
    code = main(["explain", "--in", str(gen), "--out", str(out), "--model", str(tiny_model_dir),
                 "--set", "reward.weights={sim: 0, kl: 0}"])
    assert code == 0
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.boxes == ["lint", "syntax"]
    assert page.sections == 3


def test_explain_picks_the_last_step_by_default(rollouts, tmp_path):
    path, samples, batch = rollouts
    write_rollouts(path, samples[:1], batch, step=8)  # appended: a newer step with one sample
    out = tmp_path / "r.html"
    assert main(["explain", "--in", str(path), "--out", str(out)]) == 0
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.sections == 1
    assert main(["explain", "--in", str(path), "--out", str(out), "--step", "all"]) == 0
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.sections == 4
    assert main(["explain", "--in", str(path), "--out", str(out), "--step", "99"]) == 2


@pytest.mark.slow
def test_page_javascript_in_headless_chromium(rollouts, tmp_path):
    """Toggling components recolours tokens and tooltips list rule codes (needs Debian's chromium)."""
    import shutil

    if not shutil.which("chromium"):
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    from benchmarks.figures.explain_screenshot import js_selftest

    path = rollouts[0]
    out = tmp_path / "report.html"
    assert main(["explain", "--in", str(path), "--out", str(out)]) == 0
    report = js_selftest(out)
    assert "SELFTEST-OK" in report
    assert "lint: " in report and "lint only: rgba(220, 38, 38" in report
