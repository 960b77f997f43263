"""`densecode explain`: see what the reward does, token by token, in one HTML page.

    densecode explain --in runs/x/rollouts.jsonl --out report.html
    densecode explain --in generations.jsonl --model MODEL --config robotics --out report.html

The page (self-contained: inline CSS/JS, no network) shows each response with every
token coloured by its total reward (red negative, green positive), a checkbox per
component to colour by any subset of components, a tooltip per token with its
component values and the Ruff rule codes / test outcomes / syntax errors behind
them, and a summary table.

Rollouts JSONL (`write_rollouts`; what the trainer writes each logged step), one
object per sample:
    format        "densecode-rollout/1"
    step, index   training step (or null) and sample index in the batch
    prompt, response, token_ids
    token_spans   [[start, end], ...] characters of `response` per token (shared span
                  for tokens that split a multi-byte character; empty for EOS)
    code_regions  [[start, end], ...]; region_mode "completion" | "fenced"
    truncated     bool; task: the task dict (JSON-safe fields)
    mode          "dense" | "sparse"; weights {component: weight}
    total         per-token total reward
    components    {component: per-token RAW values} (weighted = weights[c] * raw)
    diagnostics   {component: [{rule, span, tokens, message, value, ...}]}
    info          {component: {scalar: value}}
    verdicts      {component: {outcome, incorrect, ran_cleanly, parsed, kl, errors}} (ComponentOutput's typed
                  verdict; absent from files written before it existed)
    algo          (trainer rollouts) {values, returns, advantages}: per-token arrays the optimiser computed
                  (value predictions at rollout time, GAE returns, the advantages its loss used); optional
A generate-output JSONL (`prompt`, `completion`, `token_ids`, optional `task`,
`logprobs`, `grammar_verdicts`, `finish_reason`) is scored here first (needs
`--model` for the tokenizer; `--config`/`--set` choose domain and weights).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from densecode.errors import DensecodeError

FORMAT = "densecode-rollout/1"


# ---------------------------------------------------------------- rollouts file


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, (np.integer, int, bool, str)) or obj is None:
        return obj.item() if isinstance(obj, np.generic) else obj
    return repr(obj)


def rollout_records(samples: list, batch: Any, *, step: int | None = None,
                    algo: dict[str, list] | None = None) -> list[dict]:
    """One JSON-safe record per sample (see the module docstring); `algo` adds per-token optimiser arrays."""
    records = []
    for i, s in enumerate(samples):
        rec = {
            "format": FORMAT,
            "step": step,
            "index": i,
            "prompt": s.prompt,
            "response": s.response,
            "token_ids": list(map(int, s.token_ids)),
            "token_spans": [list(sp) for sp in s.token_spans],
            "code_regions": [list(r) for r in s.code_regions],
            "region_mode": s.region_mode,
            "truncated": bool(s.truncated),
            "task": _json_safe(s.task),
            "mode": getattr(batch, "mode", "dense"),
            "weights": dict(batch.weights),
            "total": np.round(batch.total[i].astype(np.float64), 6).tolist(),
            "components": {n: np.round(v[i].astype(np.float64), 6).tolist() for n, v in batch.raw.items()},
            "diagnostics": {n: _json_safe(o[i].diagnostics) for n, o in batch.outputs.items()},
            "info": {n: _json_safe(o[i].info) for n, o in batch.outputs.items()},
            "verdicts": {n: _json_safe(o[i].verdict()) for n, o in batch.outputs.items()},
        }
        if algo:
            rec["algo"] = {n: np.round(np.asarray(v[i], dtype=np.float64), 6).tolist() for n, v in algo.items()}
        records.append(rec)
    return records


def record_outcome(rec: dict) -> float | None:
    """A rollout record's verifiable outcome, as GRPO reads it from the live outputs (densecode.rl.grpo.outcome_of):
    the mean of its components' `outcome`, or None (none gave one, or a record without verdicts)."""
    found = [v["outcome"] for v in (rec.get("verdicts") or {}).values() if v.get("outcome") is not None]
    return float(np.mean(found)) if found else None


def write_rollouts(path: str | Path, samples: list, batch: Any, *, step: int | None = None, append: bool = True,
                   algo: dict[str, list] | None = None) -> Path:
    """Write (append) the samples and their RewardBatch as rollouts JSONL; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for rec in rollout_records(samples, batch, step=step, algo=algo):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[dict]:
    """Rollout records or generations (densecode's one JSONL reader; errors are `FILE:LINE: ...`)."""
    from densecode.jsonl import read_jsonl as _read

    return _read(path, what="samples", hint="a rollouts JSONL written by the trainer, or a `densecode generate` "
                                            "output with --model")


def _check_rollout(row: dict, where: str) -> None:
    for key in ("response", "token_spans", "total", "components"):
        if key not in row:
            raise DensecodeError(f"{where}: rollout record lacks {key!r} (written by densecode.rewards.explain.write_rollouts?)")
    n = len(row["token_spans"])
    if len(row["total"]) != n or any(len(v) != n for v in row["components"].values()):
        raise DensecodeError(f"{where}: per-token arrays do not match the {n} token spans")


# ---------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid #d8dce3;padding:10px 18px}
h1{font-size:18px;margin:0 0 6px}
.controls label{margin-right:14px;white-space:nowrap;cursor:pointer}
.legend{display:inline-flex;align-items:center;gap:6px;margin-left:12px;font-size:12px;color:#555}
.legend .bar{width:160px;height:10px;border:1px solid #ccc;
 background:linear-gradient(90deg,rgba(220,38,38,.85),rgba(255,255,255,0),rgba(22,163,74,.85))}
main{padding:12px 18px}
table.summary{border-collapse:collapse;background:#fff;font-size:12.5px;margin-bottom:16px}
table.summary th,table.summary td{border:1px solid #dde1e7;padding:3px 8px;text-align:right}
table.summary th{background:#eef1f5}
table.summary td.l{text-align:left}
.sample{background:#fff;border:1px solid #d8dce3;border-radius:6px;margin:0 0 14px;padding:10px 12px}
.sample h2{font-size:14px;margin:0 0 4px}
.meta{font-size:12px;color:#555;margin-bottom:6px}
.prompt{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;color:#667;
 background:#f3f4f6;padding:6px 8px;border-radius:4px;margin:4px 0}
pre.resp{font:13px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;
 word-break:break-all;margin:6px 0;padding:8px;border:1px solid #e3e6ea;border-radius:4px;background:#fff}
.tok{border-radius:2px;cursor:default}
.tok:hover{outline:1px solid #333}
.tok.prose{font-style:italic;color:#6b7280}
.tok.nl::before{content:"\\21B5";font-size:10px;opacity:.4}
.tok.empty{display:inline-block;width:5px;height:1.1em;vertical-align:text-bottom;border:1px dotted #999}
.diags{font-size:12px;margin:4px 0 0;padding-left:18px}
.diags code{background:#eef1f5;padding:0 3px;border-radius:3px}
.neg{color:#b91c1c}.pos{color:#15803d}
#tip{position:fixed;z-index:5;display:none;max-width:460px;background:#1f2937;color:#f9fafb;font-size:12px;
 padding:6px 8px;border-radius:4px;white-space:pre-wrap;pointer-events:none;box-shadow:0 2px 8px rgba(0,0,0,.3)}
"""

_JS = """
const DATA = JSON.parse(document.getElementById('reward-data').textContent);
const boxes = Array.from(document.querySelectorAll('input.comp'));
function colour(v, scale){
  if(!v || !scale) return '';
  const a = Math.min(Math.abs(v)/scale, 1)*0.85;
  return v < 0 ? `rgba(220,38,38,${a.toFixed(3)})` : `rgba(22,163,74,${a.toFixed(3)})`;
}
let SUMS = [];
function recolour(){
  const on = boxes.filter(b => b.checked).map(b => b.value);
  SUMS = DATA.samples.map(s => s.ids.map((_, t) =>
     on.reduce((acc, c) => acc + (s.weights[c] || 0) * ((s.raw[c] || [])[t] || 0), 0)));
  let scale = 0;
  SUMS.forEach(a => a.forEach(v => { scale = Math.max(scale, Math.abs(v)); }));
  document.getElementById('scale').textContent = scale ? scale.toPrecision(3) : '0';
  document.querySelectorAll('.tok').forEach(el => {
    el.style.backgroundColor = colour(SUMS[+el.dataset.s][+el.dataset.t], scale);
  });
}
boxes.forEach(b => b.addEventListener('change', recolour));
function tipText(k, t){
  const s = DATA.samples[k];
  const lines = [`token ${t}: ${JSON.stringify(s.text[t])}  (id ${s.ids[t]})`, `total ${s.total[t].toFixed(3)}`];
  for(const c of DATA.components){
    if(!(c in s.raw)) continue;
    const w = s.weights[c] || 0, r = s.raw[c][t];
    lines.push(`  ${c.padEnd(7)} ${(w*r >= 0 ? '+' : '') + (w*r).toFixed(3)}  (raw ${r.toFixed(3)} x ${w})`);
  }
  for(const [a, b, msg] of s.diags){ if(t >= a && t < b) lines.push(msg); }
  if(SUMS.length) lines.push(`selected ${SUMS[k][t].toFixed(4)}`);
  return lines.join('\\n');
}
const tip = document.getElementById('tip');
document.addEventListener('mouseover', e => {
  const el = e.target.closest('.tok'); if(!el){ tip.style.display='none'; return; }
  tip.textContent = tipText(+el.dataset.s, +el.dataset.t);
  tip.style.display = 'block';
});
document.addEventListener('mousemove', e => {
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 470) + 'px';
  tip.style.top = (e.clientY + 16) + 'px';
});
"""


def _fmt(v: float) -> str:
    return f"{v:+.3f}"


def _sample_html(k: int, rec: dict, scale: float, comps: list[str]) -> tuple[str, dict]:
    resp = rec["response"]
    spans = [tuple(sp) for sp in rec["token_spans"]]
    total = rec["total"]
    weights = rec.get("weights", {})
    raw = rec["components"]
    regions = rec.get("code_regions", [])
    diags = rec.get("diagnostics", {})
    # Which diagnostics touch which tokens (the tooltip lists them): [first, last+1, text].
    diag_ranges = []
    for comp, items in diags.items():
        for d in items:
            rng = d.get("tokens")
            if rng:
                diag_ranges.append([int(rng[0]), int(rng[1]), f"{comp}: {d.get('rule')} {d.get('message', '')}".strip()])
    parts = []
    shown = 0  # characters already rendered: shared spans render their character once
    for t, (s, e) in enumerate(spans):
        text = resp[max(s, shown):e] if e > shown else ""
        shown = max(shown, e)
        code = any(s < re_ and e > rs for rs, re_ in regions)
        v = total[t]
        a = min(abs(v) / scale, 1.0) * 0.85 if scale else 0.0
        bg = f"rgba(220,38,38,{a:.3f})" if v < 0 else f"rgba(22,163,74,{a:.3f})"
        cls = "tok" + ("" if code else " prose") + ("" if text else " empty") + (" nl" if text.startswith("\n") else "")
        parts.append(f'<span class="{cls}" data-s="{k}" data-t="{t}" style="background-color:{bg}">'
                     f"{html.escape(text)}</span>")
    if shown < len(resp):
        parts.append(html.escape(resp[shown:]))
    diag_items = []
    for comp, items in diags.items():
        for d in items:
            tok = d.get("tokens")
            where = ""
            if d.get("span"):
                a0, b0 = d["span"]
                piece = resp[a0:b0]
                shown_piece = repr(piece) if not piece.strip() else piece[:60]
                where = f" at <code>{html.escape(shown_piece)}</code>"
            elif tok is None:
                where = ""
            cls = "neg" if (d.get("value") or 0) < 0 else "pos"
            diag_items.append(f'<li><b>{html.escape(comp)}</b> <code>{html.escape(str(d.get("rule")))}</code>{where}: '
                              f'<span class="{cls}">{html.escape(str(d.get("message", "")))}</span> '
                              f'({_fmt(float(d.get("value") or 0))})</li>')
    task = rec.get("task") or {}
    task_name = task.get("task_id", task.get("name", ""))
    info = rec.get("info", {})
    meta = [f"{len(spans)} tokens", f"total {_fmt(sum(total))}"]
    if rec.get("truncated"):
        meta.append("truncated")
    for comp, inf in info.items():
        for key in ("syntax_ok", "n_violations", "pass_rate", "sim_score", "dfg_score", "kl"):
            if key in inf and inf[key] is not None:
                meta.append(f"{comp}.{key} {inf[key]:.3g}")
    title = f"Sample {rec.get('index', k)}" + (f" · step {rec['step']}" if rec.get("step") is not None else "")
    if task_name != "":
        title += f" · task {html.escape(str(task_name))}"
    body = (f'<section class="sample" id="s{k}"><h2>{title}</h2><div class="meta">{" · ".join(meta)}</div>'
            f'<details><summary>prompt</summary><div class="prompt">{html.escape(rec.get("prompt", ""))}</div></details>'
            f'<pre class="resp">{"".join(parts)}</pre>'
            + (f'<ul class="diags">{"".join(diag_items)}</ul>' if diag_items else "") + "</section>")
    data = {
        "ids": rec.get("token_ids") or [None] * len(spans),
        "text": [resp[a:b] for a, b in spans],
        "total": [round(float(x), 5) for x in total],
        "weights": {c: float(weights.get(c, 0.0)) for c in raw},
        "raw": {c: [round(float(x), 5) for x in raw[c]] for c in raw},
        "diags": diag_ranges,
    }
    return body, data


def render_html(records: list[dict], title: str = "densecode reward explorer") -> str:
    for i, rec in enumerate(records):
        _check_rollout(rec, f"sample {i}")
    comps: list[str] = []
    for rec in records:
        for c in rec["components"]:
            if c not in comps:
                comps.append(c)
    scale = max((abs(v) for rec in records for v in rec["total"]), default=0.0)
    bodies, data = [], []
    for k, rec in enumerate(records):
        b, d = _sample_html(k, rec, scale, comps)
        bodies.append(b)
        data.append(d)
    # Summary table: one row per sample, weighted sums per component.
    head = "".join(f"<th>{html.escape(c)}</th>" for c in comps)
    rows = []
    for k, rec in enumerate(records):
        w = rec.get("weights", {})
        cells = "".join(
            f'<td class="{"neg" if s < 0 else "pos" if s > 0 else ""}">{s:+.2f}</td>'
            for s in (float(w.get(c, 0.0)) * sum(rec["components"].get(c, [])) for c in comps))
        info = rec.get("info", {})
        flags = []
        if "syntax" in info:
            flags.append("syntax ok" if info["syntax"].get("syntax_ok") else "syntax error")
        if "lint" in info:
            flags.append(f"{int(info['lint'].get('n_violations', 0))} lint")
        if "tests" in info and info["tests"].get("has_tests"):
            flags.append(f"tests {info['tests'].get('pass_rate', 0):.2f}")
        if "sim" in info:
            flags.append(f"sim {info['sim'].get('sim_score', 0):.2f}")
        total = sum(rec["total"])
        rows.append(f'<tr><td class="l"><a href="#s{k}">{rec.get("index", k)}</a></td><td>{len(rec["token_spans"])}</td>'
                    f'<td class="{"neg" if total < 0 else "pos"}"><b>{total:+.2f}</b></td>{cells}'
                    f'<td class="l">{html.escape(", ".join(flags))}</td></tr>')
    means = [np.mean([float(r.get("weights", {}).get(c, 0.0)) * sum(r["components"].get(c, [])) for r in records])
             for c in comps]
    rows.append('<tr><th class="l">mean</th><th></th>'
                f'<th>{np.mean([sum(r["total"]) for r in records]):+.2f}</th>'
                + "".join(f"<th>{m:+.2f}</th>" for m in means) + "<th></th></tr>")
    table = (f'<table class="summary"><tr><th class="l">sample</th><th>tokens</th><th>total</th>{head}'
             f'<th class="l">notes</th></tr>{"".join(rows)}</table>')
    mode = records[0].get("mode", "dense")
    weights = records[0].get("weights", {})
    boxes = "".join(
        f'<label><input type="checkbox" class="comp" value="{html.escape(c)}" checked> {html.escape(c)} '
        f'<small>(w {float(weights.get(c, 0.0)):g})</small></label>' for c in comps)
    payload = json.dumps({"samples": data, "components": comps}, ensure_ascii=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1>
<div class="controls">Colour by: {boxes}
<span class="legend">−<span id="scale">{scale:.3g}</span> <span class="bar"></span> +</span>
<span class="legend">{len(records)} samples · {mode} rewards · hover a token for its values</span></div></header>
<main>{table}{"".join(bodies)}</main><div id="tip"></div>
<script type="application/json" id="reward-data">{payload}</script>
<script>{_JS}</script></body></html>
"""


# ---------------------------------------------------------------- CLI
