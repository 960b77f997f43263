"""Trainer end to end on the tiny test model: learning, reward placement, resume, NaN, CLI errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from densecode.errors import DensecodeError
from densecode.models import load_model_and_tokenizer
from densecode.rewards import RewardBatch
from densecode.rl.ppo import PPOAlgorithm
from densecode.rl.rollout import Response
from densecode.rl.trainer import Trainer

from tests.helpers import TargetReward, TargetTokenTask, make_cfg, make_trainer


def test_tiny_model_learns_target_tokens(tiny_model_dir, tmp_path):
    cfg = make_cfg(tiny_model_dir, tmp_path)
    tr = make_trainer(cfg, tmp_path)
    before = tr.evaluate(0)["eval/target_frac"]
    logs = [tr.train_step(s) for s in range(30)]
    after = tr.evaluate(30)["eval/target_frac"]
    assert before < 0.25
    assert after > before + 0.4, (before, after)
    # The update really ran PPO: clipping happened, the critic learnt something.
    assert any(log["ppo/clipfrac"] > 0 for log in logs)
    assert logs[-1]["ppo/explained_variance"] > 0.3
    for key in ("objective/kl", "ppo/approx_kl", "ppo/value_loss", "ppo/entropy", "rollout/response_length",
                "perf/tokens_per_s", "time/generate_s", "time/reward_s", "time/update_s"):
        assert key in logs[-1]


def _scripted_sampler(responses):
    def sampler(model, tokenizer, prompts, **kw):
        return [Response(**r) for r in responses]
    return sampler


def test_dense_rewards_reach_their_token_positions(tiny_model_dir, tmp_path):
    """Each token's reward lands on that token's slot; padding stays 0 (the trainer adds nothing of its own)."""
    cfg = make_cfg(tiny_model_dir, tmp_path, "train.batch_size=2")
    responses = [dict(prompt_index=0, token_ids=[5, 6, 7], finish_reason="length"),
                 dict(prompt_index=1, token_ids=[8], finish_reason="stop")]

    class PositionReward(TargetReward):
        def __call__(self, samples):
            total = [np.array([10.0 * (i + 1) + j for j in range(len(s.token_ids))], dtype=np.float32)
                     for i, s in enumerate(samples)]
            return RewardBatch(total, {}, {}, {}, {})

    class TwoPrompts(TargetTokenTask):
        def train_batch(self, n, seed):
            return ["a = ", "b = "], [{}, {}]

    tr = make_trainer(cfg, tmp_path, reward=PositionReward(), task=TwoPrompts(),
                      sampler=_scripted_sampler(responses))
    batch, _ = tr.rollout(0)
    tr.compute_rewards(batch)
    assert batch.response_ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch.rewards.tolist() == [[10.0, 11.0, 12.0], [20.0, 0.0, 0.0]]
    assert batch.response_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    # The recorded old log-probs are exactly what a fresh forward pass gives (ratio 1 at epoch 0).
    out = tr.unwrapped(batch.input_ids, batch.attention_mask, batch.position_ids, batch.response_ids,
                       temperature=batch.temperature)
    assert torch.allclose(out.logprobs * batch.response_mask, batch.logprobs, atol=1e-5)
    # Left-padded prompts: the scored log-prob of a token does not depend on the batch's padding.
    solo = tr.rollout.__self__  # same trainer
    one = batch.select([1])
    from densecode.rl.rollout import build_batch
    alone = build_batch(tr.tokenizer, ["b = "], [{}], [Response(prompt_index=0, token_ids=[8], finish_reason="stop")],
                        batch.temperature)
    o1 = solo.unwrapped(alone.input_ids, alone.attention_mask, alone.position_ids, alone.response_ids,
                        temperature=batch.temperature)
    assert torch.allclose(o1.logprobs[0, 0], one.logprobs[0, 0], atol=1e-5)


def test_eos_token_is_kept_as_an_action(tiny_model_dir, tmp_path):
    cfg = make_cfg(tiny_model_dir, tmp_path, "train.batch_size=1")
    tr = make_trainer(cfg, tmp_path, sampler=_scripted_sampler([dict(prompt_index=0, token_ids=[5], finish_reason="eos")]))
    batch, _ = tr.rollout(0)
    assert batch.response_ids[0].tolist() == [5, tr.tokenizer.eos_token_id]
    assert batch.response_mask[0].tolist() == [1, 1]


def test_nan_rewards_skip_the_update(tiny_model_dir, tmp_path):
    cfg = make_cfg(tiny_model_dir, tmp_path)
    tr = make_trainer(cfg, tmp_path, reward=TargetReward(poison=True))
    before = {k: v.clone() for k, v in tr.unwrapped.state_dict().items()}
    with pytest.warns(RuntimeWarning, match="skipped"):
        stats = tr.train_step(0)
    assert stats["train/skipped_updates"] == 4  # 2 epochs x 2 minibatches
    after = tr.unwrapped.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def _weights(tr):
    return {k: v.detach().clone() for k, v in tr.unwrapped.state_dict().items()}


def test_resume_reproduces_the_next_step_exactly(tiny_model_dir, tmp_path):
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    cfg_a = make_cfg(tiny_model_dir, run_a)
    tr = make_trainer(cfg_a, run_a)
    tr.train(steps=3)
    w_full = _weights(tr)
    stats_full = [r for r in map(__import__("json").loads, (run_a / "metrics.jsonl").read_text().splitlines())]

    cfg_b = make_cfg(tiny_model_dir, run_b)
    tr1 = make_trainer(cfg_b, run_b)
    tr1.train(steps=2)  # saves checkpoints/step-000002 at the end
    assert (run_b / "checkpoints" / "step-000002" / "model" / "model.safetensors").is_file()
    assert not list((run_b / "checkpoints").glob(".tmp-*"))
    tr2 = make_trainer(cfg_b, run_b)
    tr2.load_checkpoint(run_b)
    assert tr2.state.step == 2
    tr2.train(steps=3)
    w_resumed = _weights(tr2)
    assert w_full.keys() == w_resumed.keys()
    for k in w_full:
        assert torch.equal(w_full[k], w_resumed[k]), k
    stats_res = [r for r in map(__import__("json").loads, (run_b / "metrics.jsonl").read_text().splitlines())]
    last_a = next(r for r in stats_full if r["step"] == 3)
    last_b = next(r for r in stats_res if r["step"] == 3)
    for key in ("ppo/policy_loss", "ppo/value_loss", "reward/sequence_mean", "objective/kl"):
        assert last_a[key] == last_b[key], key
    assert (run_b / "learning_curves.png").is_file() and (run_b / "summary.md").is_file()


def test_held_out_evals_do_not_change_training(tiny_model_dir, tmp_path):
    """An eval every step samples with its own seed: the weights after training are those of a run with no eval,
    so eval_every changes only how often the held-out curve is drawn (configs/robotics.yaml relies on it)."""
    runs = {}
    for every in (0, 1):
        run = tmp_path / f"every{every}"
        tr = make_trainer(make_cfg(tiny_model_dir, run, f"train.eval_every={every}"), run)
        tr.train(steps=2)
        runs[every] = (_weights(tr), run)
    assert "eval/target_frac" in (runs[1][1] / "metrics.jsonl").read_text()
    for k, w in runs[0][0].items():
        assert torch.equal(w, runs[1][0][k]), k


def test_resume_dir_without_checkpoint_is_a_clear_error(tmp_path):
    from densecode.rl.trainer import resolve_checkpoint

    with pytest.raises(DensecodeError, match="no checkpoint"):
        resolve_checkpoint(tmp_path)


def test_cli_errors_are_clear(tmp_path, capsys):
    from densecode.cli import main

    rc = main(["train", "--domain", "code", "--output-dir", str(tmp_path / "r"), "--set",
               f"tasks.path={tmp_path}/missing.jsonl"])
    assert rc == 2
    assert "missing.jsonl: file not found" in capsys.readouterr().err
    rc = main(["train", "--domain", "robotics", "--model", str(tmp_path / "nope"), "--output-dir",
               str(tmp_path / "r2")])
    assert rc == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "--domain", "chess", "--output-dir", str(tmp_path / "r3")]) == 2
    assert "unknown domain 'chess'" in capsys.readouterr().err


def _make_lora_trainer(cfg, run_dir, value_model="shared"):
    from densecode.config import LoraConfig

    torch.manual_seed(0)
    lora = LoraConfig(enabled=True, r=4, alpha=8, dropout=0.0, target_modules=["c_attn"])
    model, tok = load_model_and_tokenizer(cfg.model, lora, device="cpu", for_training=True)
    critic = None
    if value_model == "separate":
        critic, _ = load_model_and_tokenizer(cfg.model, lora, device="cpu", for_training=True)
    algo = PPOAlgorithm.from_config(cfg.algo, cfg.generation)
    return Trainer(cfg, model=model, tokenizer=tok, task_source=TargetTokenTask(), reward_fn=TargetReward(),
                   algo=algo, run_dir=run_dir, progress=False, critic=critic)


def test_lora_reference_is_the_adapter_disabled_base(tiny_model_dir, tmp_path):
    cfg = make_cfg(tiny_model_dir, tmp_path, "lora.enabled=true", "model.value_model=separate")
    tr = _make_lora_trainer(cfg, tmp_path, value_model="separate")
    assert tr.reference.shares_weights  # no second copy of the policy weights
    assert tr.unwrapped.critic is not None
    base_before = {k: v.clone() for k, v in tr.unwrapped.policy.named_parameters() if "lora_" not in k}
    batch0, _ = tr.rollout(0)
    for s in range(3):
        tr.train_step(s)
    # Base weights frozen; the policy moved away from the reference; the reference did not move.
    for k, v in tr.unwrapped.policy.named_parameters():
        if "lora_" not in k:
            assert torch.equal(v, base_before[k]), k
    args = (batch0.input_ids, batch0.attention_mask, batch0.position_ids, batch0.response_ids)
    ref_again = tr.reference.logprobs(tr.unwrapped.policy, *args, temperature=batch0.temperature)
    assert torch.allclose(ref_again * batch0.response_mask, batch0.ref_logprobs, atol=1e-6)
    # Before training the policy WAS the reference (LoRA B starts at 0)...
    assert torch.allclose(batch0.logprobs, batch0.ref_logprobs, atol=1e-6)
    # ...and after three steps it is not.
    new = tr.unwrapped(*args, temperature=batch0.temperature).logprobs * batch0.response_mask
    assert not torch.allclose(new, batch0.logprobs, atol=1e-4)
    path = tr.save_checkpoint()
    assert (path / "model" / "adapter_model.safetensors").is_file()
    assert (path / "critic" / "adapter_model.safetensors").is_file()
    tr2 = _make_lora_trainer(cfg, tmp_path, value_model="separate")
    tr2.load_checkpoint(path)
    w1, w2 = tr.unwrapped.state_dict(), tr2.unwrapped.state_dict()
    for k in w1:
        assert torch.equal(w1[k], w2[k]), k


def test_ctrl_c_finishes_the_step_saves_and_stops(tiny_model_dir, tmp_path):
    import os
    import signal

    class InterruptingReward(TargetReward):
        calls = 0

        def __call__(self, samples):
            InterruptingReward.calls += 1
            if InterruptingReward.calls == 2:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of step 2
            return super().__call__(samples)

    # A suite started from a shell that ignores SIGINT (nohup, `&` in a non-interactive shell) inherits SIG_IGN;
    # the test is about Ctrl-C as a user's terminal delivers it, so it starts from Python's default handler.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cfg = make_cfg(tiny_model_dir, tmp_path)
        tr = make_trainer(cfg, tmp_path, reward=InterruptingReward())
        result = tr.train(steps=10)
        assert result["interrupted"] and result["step"] == 2
        from densecode.rl.trainer import resolve_checkpoint

        assert resolve_checkpoint(tmp_path).name == "step-000002"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the trainer put back what it found
    finally:
        signal.signal(signal.SIGINT, outer)


def _full_disk(match, after: int = 0):
    """Wraps open / torch.save: ENOSPC from the (after+1)-th call on a path ending in `match` onwards."""
    import errno
    import os

    calls = {"n": 0}

    def wrap(real):
        def fake(*a, **kw):
            paths = [str(x) for x in a[:2] if isinstance(x, (str, os.PathLike))]  # open(path), torch.save(obj, path)
            if any(p.endswith(match) for p in paths):
                calls["n"] += 1
                if calls["n"] > after:
                    raise OSError(errno.ENOSPC, "No space left on device", paths[0])
            return real(*a, **kw)
        return fake
    return wrap


def _assert_resumes_from_step_2(cfg, tmp_path):
    from densecode.rl.trainer import resolve_checkpoint

    assert resolve_checkpoint(tmp_path).name == "step-000002"
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    tr = make_trainer(cfg, tmp_path)
    tr.load_checkpoint(tmp_path)
    assert tr.state.step == 2
    assert tr.train(steps=3)["step"] == 3
    import json

    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]  # the failed session's rows after the checkpoint are gone, none is torn


def test_a_full_disk_while_logging_is_one_clear_error_and_the_last_checkpoint_resumes(tiny_model_dir, tmp_path,
                                                                                      monkeypatch):
    import builtins

    import densecode.rl.run_dir as run_dir_mod

    cfg = make_cfg(tiny_model_dir, tmp_path, "train.save_every=2")
    tr = make_trainer(cfg, tmp_path)
    monkeypatch.setattr(run_dir_mod, "open", _full_disk("metrics.jsonl", after=2)(builtins.open), raising=False)
    with pytest.raises(DensecodeError) as err:
        tr.train(steps=4)  # steps 1, 2 logged, checkpoint step-2, then the disk is full at step 3's row
    msg = str(err.value)
    assert "metrics.jsonl" in msg and "No space left on device" in msg and "step-000002" in msg
    assert f"--resume {tmp_path}" in msg
    monkeypatch.undo()
    _assert_resumes_from_step_2(cfg, tmp_path)


def test_a_full_disk_while_checkpointing_keeps_the_last_good_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    cfg = make_cfg(tiny_model_dir, tmp_path, "train.save_every=2")
    tr = make_trainer(cfg, tmp_path)
    monkeypatch.setattr(torch, "save", _full_disk("optimizer.pt", after=1)(torch.save))
    with pytest.raises(DensecodeError) as err:
        tr.train(steps=4)  # step-2 is saved; step 4's save runs out of space
    msg = str(err.value)
    assert "step-000004" in msg and "No space left on device" in msg and "step-000002" in msg and "is kept" in msg
    monkeypatch.undo()
    assert not (tmp_path / "checkpoints" / "step-000004").exists()
    _assert_resumes_from_step_2(cfg, tmp_path)
