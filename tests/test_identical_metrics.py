"""The trainer's refactors change nothing: the first 3 steps of the default robotics run and of codegen's and multitask's GAE configs
log the same metrics.jsonl records as the goldens in tests/data/trainer_golden_metrics.json (recorded from the
code before the trainer was split into run_dir / protocols / sampling modules, commit 0606b10; `ppo/entropy` re-recorded
when the entropy came to be taken from the log-softmax, −Σ p log p, which moved it by ~6e-6 and nothing else; `multitask` re-recorded when generation took only the last prompt position's logits
(`logits_to_keep=1`: a smaller LM-head matmul, whose round-off moved its near-zero KL terms by ~1e-7, its
samples and rewards not at all); `codegen` and `multitask` again when each minibatch dropped the columns that
are padding in all its rows (smaller matmuls: approx_kl and KL moved by ~1e-3 of their ~1e-6 values, nothing else
beyond round-off); all three for the new counter `train/zero_gradient_minibatches`, recorded on another CPU
(values moved by float32 round-off only)). Round-off differs between CPU kinds, so each kind has its own golden
file, recorded from the same code (`_cpu_kind`).

Timing and throughput fields are left out (they differ run to run); everything else — rewards, losses,
clipfrac, approx_kl, grad norms, KL — must match to float32 round-off. Re-record (only for an intended change
of behaviour) with DENSECODE_RECORD_GOLDEN=1 pytest tests/test_identical_metrics.py.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cpu_kind() -> str:
    """The CPU's vendor and widest vector unit: float32 round-off (BLAS kernels, reduction order) differs between
    them beyond the tolerance below (AMD EPYC vs Intel Xeon: KL -5.7e-7 vs -7.0e-7, grad norms 1e-5 apart)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    vendor = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("vendor_id")), "")
    return "amd" if vendor == "AuthenticAMD" else "intel" if vendor == "GenuineIntel" else "unknown"


# One golden file per CPU kind, each recorded on that kind from the same code (the Intel one is the original).
GOLDENS = {"intel": "trainer_golden_metrics.json", "amd": "trainer_golden_metrics-amd.json"}
GOLDEN = ROOT / "tests" / "data" / GOLDENS.get(_cpu_kind(), GOLDENS["intel"])
# The same small overrides before and after the refactor: 3 steps, 4 prompts a step, no held-out eval.
OVERRIDES = ["--steps", "3", "--set", "train.eval_every=0", "--set", "train.batch_size=4", "--no-progress"]
RUNS = {
    # The default with every row through the update, as when the goldens were recorded (skip_zero_advantage_rows,
    # the default since, runs the same update on fewer rows: round-off, and a counter of its own).
    "robotics": ["--domain", "robotics", "--set", "algo.skip_zero_advantage_rows=false"],
    # The GAE recipe (a critic, GAE, the KL term: the paths robotics' outcome-credit default does not take), which
    # was codegen's default when the goldens were recorded; configs/codegen-gae.yaml holds it unchanged.
    "codegen": ["--config", "codegen-gae"],
    # The GAE multi-task config (robotics + MBPP code, the critic, ASTOR's per-task KL in the reward), the default
    # when the goldens were recorded; configs/multitask-gae.yaml holds it unchanged.
    "multitask": ["--config", "multitask-gae"],
}


def _is_timing(key: str) -> bool:
    return (key in ("elapsed_s",) or key.startswith(("time/", "perf/")) or key.endswith("_s"))


def _records(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not _is_timing(k)} for row in rows]


def _train(name: str, out: Path) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("DENSECODE_CRASH_AT", None)
    proc = subprocess.run([sys.executable, "-c", "import sys; from densecode.cli import main; sys.exit(main())", "train", *RUNS[name], *OVERRIDES,
                           "--output-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _records(out)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7)
    return a == b


@pytest.mark.parametrize("name", list(RUNS))
def test_first_three_steps_log_the_golden_metrics(name, tmp_path):
    if name == "multitask" and not (ROOT.parent / "shared" / "data" / "mbpp").is_dir():
        pytest.skip("the multitask config's code task needs ../shared/data/mbpp")
    got = _train(name, tmp_path / name)
    if os.environ.get("DENSECODE_RECORD_GOLDEN"):
        golden = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
        golden[name] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {GOLDEN.name}[{name}]")
    want = json.loads(GOLDEN.read_text())[name]
    assert len(got) == len(want) == 3
    for step, (g, w) in enumerate(zip(got, want), start=1):
        assert sorted(g) == sorted(w), f"step {step}: keys differ: {sorted(set(g) ^ set(w))}"
        diff = {k: (g[k], w[k]) for k in w if not _same(g[k], w[k])}
        assert not diff, f"{name} step {step}: (now, golden) {diff}"
