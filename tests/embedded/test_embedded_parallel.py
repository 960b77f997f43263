"""Data-parallel builds of the embedded model: processes share each batch and step as one."""

from __future__ import annotations

import pytest

from densecode.embedded.corpus import Pair, stdlib_functions


@pytest.fixture(scope="module")
def small_setup():
    from densecode.embedded.tokenizer import train_tokenizer
    from densecode.embedded.train import supervised_rows

    tok = train_tokenizer(stdlib_functions()[:100], vocab_size=400)
    pairs = [Pair(f"def f{i}(x):\n", f"    return x + {i}\n" * (1 + i % 3), "codegen") for i in range(40)]
    pools = {"codegen": supervised_rows(tok, pairs, ctx=48, seed=0)}
    return tok, pools


def _trained(tok, pools, processes: int, weight: float, on_checkpoint=None):
    import torch

    from densecode.embedded.build_multitask import train_in_processes
    from densecode.embedded.train import ModelShape, TrainSettings, build_model, train

    torch.set_num_threads(1)
    model = build_model(tok, ModelShape(2, 32, 2, 64, 64), 0)
    settings = TrainSettings(steps=3, batch_size=6, ctx=48, lr=1e-2, warmup=1, prompt_loss_weight=weight,
                             checkpoint_steps=[2])
    if processes == 1:
        log = train(model, tok, pools, {"codegen": 1.0}, settings, on_checkpoint=on_checkpoint, progress=False)
    else:
        log, on_checkpoint = train_in_processes(processes, model, tok, pools, {"codegen": 1.0}, settings,
                                                on_checkpoint=on_checkpoint, progress=False)
    return model, log, on_checkpoint


@pytest.mark.parametrize("weight", [1.0, 0.0])
def test_two_processes_step_like_one(small_setup, weight, tmp_path):
    """Two processes, each with half of every batch, reach the one-process weights (float summation order aside):
    the same batches, the loss normalised over the whole batch, gradients summed before clipping and the step.
    Rank 0's checkpoint hook runs once per checkpoint step and comes back with its state."""
    import torch

    from densecode.embedded.build_multitask import _Selector
    from densecode.embedded.train import ModelShape, build_model

    tok, pools = small_setup
    one, log1, _ = _trained(tok, pools, 1, weight)
    hook = _Selector(tok, select=[], select_tasks=0, seed=0, checkpoint_steps=[2], out=tmp_path / "m", info={},
                     progress=False)
    two, log2, hook = _trained(tok, pools, 2, weight, on_checkpoint=hook)
    assert log2["processes"] == 2 and log1["processes"] == 1
    assert log2["tokens"] == log1["tokens"]
    assert log2["loss"] == pytest.approx(log1["loss"], abs=2e-4)
    for (name, a), b in zip(one.state_dict().items(), two.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name
    # The weights moved: the comparison is not between two untouched models.
    start = build_model(tok, ModelShape(2, 32, 2, 64, 64), 0)
    assert max(float((a - b).abs().max()) for a, b in zip(one.state_dict().values(), start.state_dict().values())) > 1e-3
    assert (tmp_path / "m-step2" / "model.safetensors").is_file()
    assert isinstance(hook, _Selector) and hook.selection == []


def test_processes_are_checked_before_the_build(tmp_path):
    from densecode.embedded.build_multitask import MultitaskRecipe, build_multitask
    from densecode.errors import DensecodeError

    with pytest.raises(DensecodeError, match="processes"):
        build_multitask(MultitaskRecipe(processes=0), tmp_path, progress=False)
    with pytest.raises(DensecodeError, match="processes"):
        build_multitask(MultitaskRecipe(processes=2), tmp_path, progress=False, device="cuda")


@pytest.mark.slow
def test_two_process_build_is_bit_for_bit_reproducible(tmp_path):
    """The toy five-task recipe built twice with 2 processes gives the same bytes; it records its process count."""
    import json

    from densecode.embedded.build_multitask import MULTITASK_TOY, MultitaskRecipe, build_multitask

    for name in ("a", "b"):
        build_multitask(MultitaskRecipe(**{**MULTITASK_TOY, "processes": 2}), tmp_path / name, seed=0, progress=False)
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    info = json.loads((tmp_path / "a" / "build_info.json").read_text())
    assert info["recipe"]["processes"] == 2 and info["environment"]["processes"] == 2
