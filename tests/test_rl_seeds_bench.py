"""benchmarks/rl_seeds.py: the independent check scores the model the runs started from."""

from benchmark_scripts import load_script


def load_bench():
    return load_script("rl_seeds")


def test_base_model_follows_the_model_override():
    bench = load_bench()
    assert bench.base_model([]) == "densecode-tiny"
    assert bench.base_model(["train.lr=1e-5"]) == "densecode-tiny"
    assert bench.base_model(["model.name_or_path=/tmp/tiny", "train.lr=1e-5"]) == "/tmp/tiny"
    assert bench.base_model(["model.name_or_path=/a", "model.name_or_path = /b"]) == "/b"
