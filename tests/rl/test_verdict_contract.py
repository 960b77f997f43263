"""The reward → optimiser contract (#42): a component's verdict is typed fields of its ComponentOutput and its
statistics come from its own `metrics`, so a new component (defined here, plugged in by the config's
`reward.components.<name>.class`) reaches GRPO's pass/fail and the logged metrics with no edit anywhere else."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from densecode.rewards.base import ComponentOutput, LocatedError, RewardComponent


class ParityComponent(RewardComponent):
    """Passes when the response's first token id is even: +1 on its last token; a failure is located on token 0."""

    def __call__(self, samples):
        outs = []
        for s in samples:
            passed = bool(s.n_tokens) and s.token_ids[0] % 2 == 0
            values = np.zeros(s.n_tokens, dtype=np.float32)
            if s.n_tokens:
                values[-1] = float(passed)
            errors = [] if passed or not s.n_tokens else [LocatedError((0, 1), "odd first token")]
            outs.append(ComponentOutput(values, [], {"even": float(passed)}, outcome=float(passed),
                                        incorrect=not passed, errors=errors))
        return outs

    def metrics(self, outputs):
        return {"rollout/parity_pass_rate": float(np.mean([o.outcome for o in outputs]))}


def test_a_new_components_located_error_is_grpos_evidence_despite_the_cut():
    from densecode.rl.grpo import judged_incorrect, judged_incorrect_despite_cut

    sample = SimpleNamespace(response="ab\ncd", token_spans=[(0, 2), (2, 3), (3, 5)], token_ids=[3, 4, 5],
                             n_tokens=3, code_token_mask=lambda: np.ones(3, dtype=bool))
    (out,) = ParityComponent()([sample])
    assert out.incorrect and judged_incorrect({"parity": out})
    # Its error on token 0 lies on the line finished before the cut (the cut line starts at token 1).
    assert judged_incorrect_despite_cut(sample, {"parity": out}) == "error_before_cut"


@pytest.mark.timeout(300)
def test_a_new_components_verdict_reaches_grpo_and_its_metrics_the_log(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.config import load_config
    from densecode.rewards import build_assembler
    from densecode.rl.grpo import GRPOAlgorithm
    from densecode.rl.trainer import Trainer

    class Prompts:
        def train_batch(self, n, seed):
            return ["x = "] * n, [{} for _ in range(n)]

        def evaluate(self, *args, **kwargs):
            return {}

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    # Only the new component scores (the code recipe's own components are switched off by weight 0).
    cfg = load_config(None, [
        "domain=code", "algo.name=grpo", "algo.grpo.group_size=4", "train.batch_size=2", "train.steps=2",
        "generation.max_new_tokens=4", "train.eval_every=0", "train.save_every=0", "train.rollouts_every=1",
        "train.log_reference_kl=false", "algo.grpo.truncation_evidence=any_verdict", "algo.grpo.repetition_window=2",
        "algo.grpo.temperature_schedule={stages: [1.0]}",
        "reward.components={parity: {class: 'tests.rl.test_verdict_contract:ParityComponent'}}",
        "reward.weights={parity: 1.0, lint: 0.0, syntax: 0.0, dfg: 0.0, tests: 0.0, kl: 0.0}",
    ])
    reward_fn = build_assembler(cfg.reward, "code")
    assert reward_fn.active() == ["parity"]
    trainer = Trainer(cfg, model=model, tokenizer=tok, task_source=Prompts(), reward_fn=reward_fn,
                      algo=GRPOAlgorithm.from_config(cfg.algo, cfg.generation), run_dir=tmp_path / "run",
                      progress=False)
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rollouts = [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    seen_cut_wrong = 0
    for row in rows:
        step = [r for r in rollouts if r["step"] == row["step"]]
        verdicts = [r["verdicts"]["parity"] for r in step]
        passed = [v["outcome"] for v in verdicts]
        assert len(step) == 8 and set(passed) <= {0.0, 1.0}
        # its metrics and info scalars are logged ...
        assert row["rollout/parity_pass_rate"] == pytest.approx(np.mean(passed))
        assert row["reward/parity/even"] == pytest.approx(np.mean(passed))
        # ... its outcome is GRPO's r_i (sequence_reward: outcome) and the rollouts' task success ...
        assert row["grpo/reward_mean"] == pytest.approx(np.mean(passed))
        assert row["rollout/task_success"] == pytest.approx(np.mean(passed))
        # ... and its `incorrect` is GRPO's verdict on the truncated responses (kept, never masked).
        cut_wrong = sum(r["truncated"] and v["incorrect"] for r, v in zip(step, verdicts))
        assert row["grpo/truncated_incorrect"] == cut_wrong == row["grpo/truncated_incorrect_any_verdict"]
        seen_cut_wrong += cut_wrong
    assert seen_cut_wrong > 0  # the run did meet truncated responses the component judged wrong
