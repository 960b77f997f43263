#!/usr/bin/env bash
# One <= 10-minute check on a single GPU (written for an H200, no internet):
#   1. `densecode train --domain robotics` on the embedded model for a fixed number of PPO steps,
#   2. the phase split per step (generate / reward / update) and tokens/s from its metrics.jsonl,
#   3. `densecode eval --benchmark robotics` of the trained checkpoint (held-out tasks, greedy),
#      plus MBPP+ when GPU_CHECK_MBPPPLUS points at the jsonl,
#   4. a summary in $OUT/gpu_check.md.
#
#   bash benchmarks/gpu_check.sh                     # the GPU run (defaults below)
#   GPU_CHECK_TINY=1 bash benchmarks/gpu_check.sh    # seconds on a CPU: a tiny random model, 2 steps
#
# Settings (environment): GPU_CHECK_STEPS (40), GPU_CHECK_BATCH (64 prompts/step),
# GPU_CHECK_EVAL_TASKS (300), GPU_CHECK_MODEL (densecode-tiny), GPU_CHECK_OUT (runs/gpu_check),
# GPU_CHECK_MBPPPLUS (path to MbppPlus jsonl; skipped when unset), PYTHON (python3, or .venv/bin/python here).
#
# On a GPU machine without internet the project's pins may be missing from its Python. Carry
# them as wheels in .whl/ (git-ignored) and this script installs them into /tmp/site first:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     transformers==4.53.2 tokenizers==0.21.4 huggingface_hub==0.36.2 gymnasium==1.4.0 cloudpickle \
#     farama-notifications ruff==0.17.6 tree-sitter==0.26.1 tree-sitter-python==0.25.0 peft==0.21.2 \
#     accelerate==1.15.0 regex==2024.11.6
# (densecode and robosim themselves run from the working tree via PYTHONPATH; nothing is installed.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

TINY=${GPU_CHECK_TINY:-0}
OUT=${GPU_CHECK_OUT:-runs/gpu_check}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if [[ "$TINY" == "1" ]]; then
  STEPS=${GPU_CHECK_STEPS:-2}; BATCH=${GPU_CHECK_BATCH:-4}; EVAL_TASKS=${GPU_CHECK_EVAL_TASKS:-4}
  MAX_NEW=${GPU_CHECK_MAX_NEW_TOKENS:-24}; TRAIN_LIMIT=${GPU_CHECK_TRAIN_TIMEOUT:-300}; EVAL_LIMIT=180
  MBPP_LIMIT=${GPU_CHECK_MBPP_LIMIT:-2}
else
  STEPS=${GPU_CHECK_STEPS:-40}; BATCH=${GPU_CHECK_BATCH:-64}; EVAL_TASKS=${GPU_CHECK_EVAL_TASKS:-300}
  MAX_NEW=${GPU_CHECK_MAX_NEW_TOKENS:-128}; TRAIN_LIMIT=${GPU_CHECK_TRAIN_TIMEOUT:-330}; EVAL_LIMIT=150
  MBPP_LIMIT=${GPU_CHECK_MBPP_LIMIT:-100}
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH="$ROOT:$ROOT/sim${PYTHONPATH:+:$PYTHONPATH}"
START=$(date +%s)
say() { echo "[gpu_check +$(( $(date +%s) - START ))s] $*"; }

if compgen -G ".whl/*.whl" > /dev/null; then
  say "installing carried wheels from .whl/ into /tmp/site"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

say "environment"
"$PYTHON" - <<'EOF'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.machine())
missing = []
for name in ("torch", "transformers", "gymnasium", "yaml", "tqdm", "numpy", "matplotlib", "tree_sitter",
             "tree_sitter_python", "safetensors", "accelerate"):
    try:
        mod = importlib.import_module(name)
        print(f"  {name} {getattr(mod, '__version__', '')}")
    except Exception as exc:  # noqa: BLE001
        missing.append(f"{name} ({type(exc).__name__})")
import shutil
print("  ruff", shutil.which("ruff") or "not on PATH (python -m ruff is tried by the lint reward)")
if missing:
    sys.exit("missing packages: " + ", ".join(missing) + " -- carry them as wheels in .whl/ (see the header)")
import torch
if torch.cuda.is_available():
    print("  cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
else:
    print("  no CUDA device: running on CPU")
EOF

MODEL=${GPU_CHECK_MODEL:-densecode-tiny}
if [[ "$TINY" == "1" && -z "${GPU_CHECK_MODEL:-}" ]]; then
  MODEL="$OUT/tiny-model"
  "$PYTHON" -c "from densecode.testing import make_tiny_model; make_tiny_model('$MODEL')"
fi
DEVICE_ARGS=()
THREADS=$("$PYTHON" -c "import os; print(min(8, os.cpu_count() or 1))")
if [[ "$TINY" == "1" ]]; then THREADS=1; fi

say "train: $STEPS PPO steps x $BATCH prompts on $MODEL"
rm -rf "$OUT/train"
# SIGINT at the time limit: densecode train saves a checkpoint and exits cleanly, and the check goes on.
SAVE_EVERY=$(( STEPS / 2 > 0 ? STEPS / 2 : 1 ))
if timeout -s INT -k 60 "$TRAIN_LIMIT" "$PYTHON" -m densecode.cli train --domain robotics --model "$MODEL" \
  --steps "$STEPS" --output-dir "$OUT/train" --no-progress \
  --set train.batch_size="$BATCH" --set train.save_every="$SAVE_EVERY" --set train.eval_every="$STEPS" \
  --set train.eval_tasks="$EVAL_TASKS" --set train.num_threads="$THREADS" \
  --set generation.max_new_tokens="$MAX_NEW" --set generation.batch_size="$BATCH" > "$OUT/train.log" 2>&1; then
  say "train done"
else
  say "train stopped (exit $?; time limit ${TRAIN_LIMIT}s?): continuing with what it logged and saved"
fi
tail -n 25 "$OUT/train.log"

say "phase split (steps after the first; from $OUT/train/metrics.jsonl)"
"$PYTHON" - "$OUT" <<'EOF' | tee "$OUT/phases.md" || true
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "train" / "metrics.jsonl").read_text().splitlines() if l.strip()]
steps = [r for r in rows if "time/step_s" in r]
if not steps:
    sys.exit("no step records in metrics.jsonl")
timed = steps[1:] or steps  # the first step pays for warm-up (CUDA init, kernel autotuning)
mean = lambda k: sum(r.get(k, 0.0) for r in timed) / len(timed)
step_s = mean("time/step_s")
print(f"| phase | s/step | share |\n|---|---|---|")
for key in ("time/generate_s", "time/score_s", "time/reward_s", "time/update_s"):
    if any(key in r for r in timed):
        print(f"| {key[5:-2]} | {mean(key):.3f} | {mean(key) / step_s:.0%} |")
print(f"| step | {step_s:.3f} | 100% |")
print()
print(f"tokens/s (whole step): {mean('perf/tokens_per_s'):.0f}")
print(f"tokens/s (generation only): {mean('perf/generate_tokens_per_s'):.0f}")
evals = [r for r in rows if any(k.startswith("eval/") for k in r)]
if evals:
    last = evals[-1]
    print("held-out eval during training:", {k: round(v, 3) for k, v in last.items() if k.startswith("eval/")})
EOF
[[ -s "$OUT/phases.md" ]] || say "no phase split: training logged no steps (see $OUT/train.log)"

say "eval: robotics held-out split ($EVAL_TASKS tasks, greedy)"
timeout "$EVAL_LIMIT" "$PYTHON" -m densecode.cli eval --benchmark robotics --model "$OUT/train" --tasks "$EVAL_TASKS" \
  --batch-size "$BATCH" --max-new-tokens "$MAX_NEW" --out "$OUT/eval-robotics" > "$OUT/eval-robotics.log" 2>&1 \
  || say "robotics eval failed or ran out of time (see $OUT/eval-robotics.log)"
tail -n 10 "$OUT/eval-robotics.log"
if [[ -n "${GPU_CHECK_MBPPPLUS:-}" ]]; then
  say "eval: MBPP+ ($MBPP_LIMIT tasks)"
  timeout "$EVAL_LIMIT" "$PYTHON" -m densecode.cli eval --benchmark mbppplus --model "$OUT/train" \
    --data "$GPU_CHECK_MBPPPLUS" --limit "$MBPP_LIMIT" --batch-size "$BATCH" --max-new-tokens 256 \
    --out "$OUT/eval-mbppplus" > "$OUT/eval-mbppplus.log" 2>&1 || say "MBPP+ eval failed or ran out of time"
  tail -n 8 "$OUT/eval-mbppplus.log"
fi

"$PYTHON" - "$OUT" "$(( $(date +%s) - START ))" <<'EOF' | tee "$OUT/gpu_check.md"
import json, sys
from pathlib import Path
out, seconds = Path(sys.argv[1]), sys.argv[2]
print("# gpu_check summary\n")
phases = out / "phases.md"
print(phases.read_text() if phases.is_file() else "(no phase split: see train.log)")
for name in ("eval-robotics", "eval-mbppplus"):
    path = out / name / "results.json"
    if path.is_file():
        r = json.loads(path.read_text())
        timing = r.get("timing", {})
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in r["scores"].items())
              + f"; generation {timing.get('tokens_per_s')} tokens/s, judge {timing.get('judge_s')} s")
print(f"\ntotal wall time: {seconds} s")
EOF
say "done: $OUT/gpu_check.md"
