"""Two CPU processes under accelerate: a tiny PPO run where both processes end with identical weights.

accelerate 1.15's `launch --cpu --num_processes 2` starts ONE process (its CPU path only
fans out through mpirun); the multi-process CPU launch is
`ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2` (torchrun + gloo).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()


@pytest.mark.slow
def test_two_process_cpu_run_ends_with_identical_weights(tiny_model_dir, tmp_path):
    accelerate = Path(sys.executable).parent / "accelerate"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE.parents[2]), ACCELERATE_USE_CPU="1")
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29517",
           str(HERE), str(tiny_model_dir), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    digests = {p.name: p.read_text().split() for p in tmp_path.glob("rank*.txt")}
    assert sorted(digests) == ["rank0.txt", "rank1.txt"], digests
    (h0, start0, world0), (h1, start1, world1) = digests["rank0.txt"], digests["rank1.txt"]
    assert world0 == world1 == "2"
    assert start0 == start1  # both started from the same weights
    assert h0 == h1  # identical weights after training
    assert h0 != start0  # ...and training changed them
    # The two processes sampled different prompts' responses (different seeds), yet stay in sync.
    assert (tmp_path / "metrics.jsonl").is_file()


def _digest(module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _main(model_dir: str, out: str) -> None:
    import torch

    from accelerate import Accelerator

    from densecode.models import load_model_and_tokenizer
    from densecode.rl.ppo import PPOAlgorithm
    from densecode.rl.trainer import Trainer
    from tests.helpers import TargetReward, TargetTokenTask, make_cfg

    torch.set_num_threads(1)
    # The Accelerator first: a bare PartialState() created earlier (e.g. to pick a device)
    # would ignore ACCELERATE_USE_CPU and pin the process to non-distributed mode.
    accelerator = Accelerator()
    cfg = make_cfg(model_dir, out, "train.batch_size=8")
    model, tok = load_model_and_tokenizer(cfg.model, None, device=accelerator.device, for_training=True)
    tr = Trainer(cfg, model=model, tokenizer=tok, task_source=TargetTokenTask(), reward_fn=TargetReward(),
                 algo=PPOAlgorithm.from_config(cfg.algo, cfg.generation), run_dir=out, progress=False,
                 accelerator=accelerator)
    start = _digest(tr.unwrapped)
    tr.train(steps=3)
    acc = tr.accelerator
    Path(out, f"rank{acc.process_index}.txt").write_text(f"{_digest(tr.unwrapped)} {start} {acc.num_processes}\n")


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
