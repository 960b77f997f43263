"""What the benchmark scripts share: the repository's paths, the test tokenizer, the naive one-python-per-program
baseline, headless-Chromium screenshots and the quiet CPU set-up of the training-step measurements.

Light on purpose: importing it loads no torch, transformers or densecode module (each helper imports what it needs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# MBPP from ../shared/data beside the repository (the scripts that read it say so when it is absent).
MBPP = ROOT.parent / "shared" / "data" / "mbpp" / "mbpp.jsonl"


def exit_with(main) -> None:
    """`sys.exit(main())`, with a DensecodeError (a bad setting, task or model) as one line on stderr and exit 2."""
    from densecode.errors import DensecodeError

    try:
        raise SystemExit(main())
    except DensecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def checkout_first() -> None:
    """This checkout's densecode and sim/densecode_robosim ahead of any installed copy on sys.path."""
    sys.path[:0] = [str(ROOT), str(ROOT / "sim")]


def quiet_offline_cpu() -> None:
    """One thread, offline, no tokenizer threads, warnings off: call it before torch is imported."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")


def load_tokenizer(model: str | None):
    """`model`'s tokenizer (a path or a name densecode resolves), else the tiny test model's."""
    from transformers import AutoTokenizer

    if model:
        from densecode.models import resolve_model_path

        return AutoTokenizer.from_pretrained(resolve_model_path(model))
    from densecode.testing import make_tiny_model

    path = make_tiny_model(Path(tempfile.mkdtemp(prefix="densecode-tok-")))
    return AutoTokenizer.from_pretrained(path)


def naive(programs: list[str], timeout_s: float) -> tuple[float, list[bool]]:
    """The naive baseline: one fresh interpreter per program, one after another, no isolation; pass = exit code 0.
    Returns the wall time and the verdicts."""
    from tqdm import tqdm

    verdicts = []
    start = time.perf_counter()
    for script in tqdm(programs, desc="naive", unit="prog", dynamic_ncols=True):
        with tempfile.TemporaryDirectory() as d:
            try:
                proc = subprocess.run([sys.executable, "-c", script], check=False, cwd=d, stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=timeout_s)
                verdicts.append(proc.returncode == 0)
            except subprocess.TimeoutExpired:
                verdicts.append(False)
    return time.perf_counter() - start, verdicts


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("chromium not found: install it with `apt-get update && apt-get install -y chromium`")


def chromium_command(profile: str) -> list[str]:
    """Headless Chromium with a throw-away profile, nothing fetched in the background; add the action and the page."""
    return [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]


def screenshot(html_path: Path, png_path: Path, width: int, height: int) -> None:
    """A PNG of the page at `html_path` (exits with chromium's error when it fails)."""
    with tempfile.TemporaryDirectory(prefix="densecode-chromium-") as profile:
        cmd = [*chromium_command(profile), "--hide-scrollbars", f"--screenshot={png_path}",
               f"--window-size={width},{height}", html_path.resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0 or not png_path.is_file():
            sys.exit(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
