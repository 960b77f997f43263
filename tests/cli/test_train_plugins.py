"""`densecode train` on a custom gymnasium simulator (configs/warehouse.yaml) and the GRPO default config."""

import json
from types import SimpleNamespace

from densecode.cli import main
from densecode.training import resolve_config


def _args(**kw):
    base = dict(config=None, overrides=[], domain=None, model=None, algo=None, resume=None, output_dir=None,
                steps=None)
    base.update(kw)
    return SimpleNamespace(**base)


def test_algo_grpo_starts_from_the_domain_grpo_config():
    cfg, path, _ = resolve_config(_args(domain="robotics", algo="grpo"))
    assert str(path).endswith("robotics-grpo.yaml")
    assert cfg.algo.name == "grpo" and cfg.algo.grpo.group_size == 4  # the recipe's 4 responses per prompt
    cfg, path, _ = resolve_config(_args(domain="robotics"))
    assert str(path).endswith("robotics.yaml") and cfg.algo.name == "ppo"


def test_plugin_domain_trains_end_to_end(tiny_model_dir, tmp_path):
    run = tmp_path / "wh"
    rc = main(["train", "--domain", "warehouse", "--model", str(tiny_model_dir), "--steps", "2", "--no-progress",
               "--output-dir", str(run), "--set", "train.batch_size=4", "--set", "train.eval_every=2",
               "--set", "train.eval_tasks=4", "--set", "train.save_every=2"])
    assert rc == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in train] == [1, 2]
    # the plug-in's own simulator scored the rollouts and the held-out split
    assert "reward/sim/token_mean" in train[0] and "eval/success" in evals[-1]
    assert (run / "summary.md").read_text().count("success") >= 1
    assert (run / "checkpoints").is_dir()
    # the last step's samples and per-token rewards are kept for the reward explorer
    assert main(["explain", "--in", str(run / "rollouts.jsonl"), "--out", str(run / "report.html")]) == 0
    assert "<html" in (run / "report.html").read_text().lower()



def test_robosim_backend_options_from_config():
    import pytest

    from densecode.config import load_config
    from densecode.errors import DensecodeError
    from densecode.training import build_reward_fn

    cfg = load_config("robotics", ["tasks.sim={mode: dynamic, clean_credit: 0.0}"])
    sim = build_reward_fn(cfg).components["sim"].simulator
    assert sim.mode == "dynamic" and sim.clean_credit == 0.0
    default = build_reward_fn(load_config("robotics")).components["sim"].simulator  # configs/robotics.yaml's scoring
    assert (default.clean_credit, default.check_credit, default.error_penalty) == (0.0, 0.5, -0.25)
    assert sim.check_credit == 0.5  # --set merges into the file's tasks.sim mapping
    with pytest.raises(DensecodeError, match="tasks.sim"):
        build_reward_fn(load_config("robotics", ["tasks.sim={credit: 1}"]))
