"""benchmarks/rl_seeds.py: the independent check scores the model the runs started from."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("rl_seeds_under_test", ROOT / "benchmarks" / "rl_seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_base_model_follows_the_model_override():
    bench = load_bench()
    assert bench.base_model([]) == "densecode-tiny"
    assert bench.base_model(["train.lr=1e-5"]) == "densecode-tiny"
    assert bench.base_model(["model.name_or_path=/tmp/tiny", "train.lr=1e-5"]) == "/tmp/tiny"
    assert bench.base_model(["model.name_or_path=/a", "model.name_or_path = /b"]) == "/b"
