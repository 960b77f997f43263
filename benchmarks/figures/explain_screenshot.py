"""Render a reward-explorer page for MBPP samples and screenshot it in headless Chromium.

    .venv/bin/python -m benchmarks.figures.explain_screenshot --out-dir runs/explain-demo

Builds 8 code-domain samples (MBPP reference solutions and syntax / lint / wrong /
exception mutations, chat- and completion-style), scores them with the real
assembler (sandboxed tests, Ruff, Python parser, DFG), writes rollouts.jsonl with
`write_rollouts`, runs `densecode explain`, and takes a PNG with Debian's chromium
(`apt-get install -y chromium`). Look at the PNG: the page must show the summary
table, coloured tokens, and the diagnostics under each sample.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import MBPP, chromium_command, load_tokenizer, screenshot

_SELFTEST = """<script>
try {
  // The first code token some lint rule fired on: colour by lint only, then read its tooltip.
  const s0 = DATA.samples.findIndex(s => (s.raw.lint || []).some(v => v < 0));
  const t0 = DATA.samples[s0].raw.lint.findIndex(v => v < 0);
  const el = document.querySelector(`.tok[data-s="${s0}"][data-t="${t0}"]`);
  const before = el.style.backgroundColor;
  boxes.forEach(b => { b.checked = b.value === 'lint'; });
  recolour();
  const after = el.style.backgroundColor;
  const out = document.createElement('pre');
  out.id = 'selftest';
  out.textContent = 'SELFTEST-OK\\n' + tipText(s0, t0) + '\\nall components: ' + before + ' / lint only: ' + after;
  document.body.appendChild(out);
} catch (err) {
  const out = document.createElement('pre'); out.id = 'selftest'; out.textContent = 'SELFTEST-FAIL ' + err;
  document.body.appendChild(out);
}
</script>"""


def js_selftest(html_path: Path) -> str:
    """Run the page's JS in headless Chromium: recolour by one component, build a tooltip."""
    probe = html_path.with_name("selftest.html")
    probe.write_text(html_path.read_text(encoding="utf-8").replace("</body>", _SELFTEST + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="densecode-chromium-") as profile:
        cmd = [*chromium_command(profile), "--dump-dom", probe.resolve().as_uri()]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False).stdout
    probe.unlink()
    start = dom.find('<pre id="selftest">')
    return dom[start: dom.find("</pre>", start)] if start >= 0 else "SELFTEST-MISSING"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="runs/explain-demo")
    parser.add_argument("--model", default=None, help="tokenizer source (default: a tiny test tokenizer)")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args()
    if not MBPP.is_file():
        sys.exit(f"MBPP not found at {MBPP} (expected ../shared/data beside the repo)")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from densecode.api import explain
    from densecode.config import RewardConfig
    from densecode.rewards import build_assembler, make_sample
    from densecode.rewards.explain import write_rollouts
    from densecode.rewards.mutations import load_mbpp, mbpp_workload

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(args.model)
    items = mbpp_workload(load_mbpp(MBPP)[1:40], args.n, seed=3)
    samples = [make_sample(it["prompt"], tok(it["response"], add_special_tokens=False)["input_ids"], tok, it["task"])
               for it in items]
    # No policy log-probs here, so no KL term; everything else as the reference code weights.
    assembler = build_assembler(RewardConfig(weights={"kl": 0.0}), "code")
    batch = assembler(samples)
    rollouts = write_rollouts(out / "rollouts.jsonl", samples, batch, step=0, append=False)
    html_path = out / "report.html"
    explain(rollouts, html_path, title="densecode reward explorer — MBPP demo")
    report = js_selftest(html_path)
    print("JS self-test:", report.replace('<pre id="selftest">', ""))
    if "SELFTEST-OK" not in report:
        return 1
    png = out / "report.png"
    screenshot(html_path, png, args.width, args.height)
    kinds = ", ".join(f"{i}:{it['kind']}" for i, it in enumerate(items))
    print(f"wrote {html_path} and {png} (samples {kinds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
