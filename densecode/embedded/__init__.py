"""The embedded default model `densecode-tiny` and its reproducible offline build.

`densecode build-model` (see `build.py`) assembles a corpus from material every
machine has (the interpreter's standard-library sources, the RoboSim task
generator's training split, synthetic small function tasks), trains a byte-level
BPE tokenizer and a small GPT-2 causal LM on it, and writes the fp16 asset that
ships in `densecode/assets/densecode-tiny/`.
"""

from __future__ import annotations

from pathlib import Path

MODEL_NAME = "densecode-tiny"
ASSET_DIR = Path(__file__).resolve().parent.parent / "assets" / MODEL_NAME
EOS_TOKEN = "<|endoftext|>"

__all__ = ["ASSET_DIR", "EOS_TOKEN", "MODEL_NAME"]
