import os

import pytest

# Tests share 2 cores with everything else: keep torch single-threaded and offline.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random GPT-2 + BPE tokenizer saved as a local model directory."""
    from densecode.testing import make_tiny_model

    import torch

    torch.set_num_threads(1)
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data; skips the test with a message when absent."""
    path = os.path.abspath(SHARED_DATA)
    if not os.path.isdir(path):
        pytest.skip(f"benchmark data not found at {path} (expected ../shared/data beside the repo)")
    return path
