"""MicroCoder-GRPO fidelity (issue #22): each point's rule on real samples, components and trainer pieces."""

import functools
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from densecode.config import GRPOConfig
from densecode.rewards.base import ComponentOutput, LocatedError
from densecode.rl.grpo import (
    GRPOAlgorithm,
    cut_token_index,
    judged_incorrect_despite_cut,
    outcome_of,
    sequence_rewards,
)
from densecode.rl.temperature import TemperatureController

FENCED_PROMPT = "Write add(a, b) returning a + b.\n```python\n"
ADD_TESTS = {"tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _sample(tok, response, truncated, task=ADD_TESTS, prompt=FENCED_PROMPT):
    from densecode.rewards import make_sample

    ids = tok(response, add_special_tokens=False)["input_ids"]
    s = make_sample(prompt, ids, tok, task, truncated=truncated)
    assert s.response == response
    return s


# ------------------------------------------------------------------ 1. judged incorrect despite the cut

CUT_CORRECT = "def add(a, b):\n    return a + b\n\n\ndef helper(values):\n    return [v for v in"
CUT_RUNTIME_ERROR = "def add(a, b):\n    return a + c\n\n\ndef helper(values):\n    return values\n\n\nz = 1"
CUT_SYNTAX_ERROR = "def add(a, b):\n    return a +* b\n\n\ndef helper(values):\n    return [v for v in"
FINISHED_WRONG_CUT_IN_PROSE = "def add(a, b):\n    return a - b\n```\nThis returns the sum of a and"
FINISHED_RIGHT_CUT_IN_PROSE = "def add(a, b):\n    return a + b\n```\nThis returns the sum of a and"
FINISHED_WRONG = "def add(a, b):\n    return a - b\n```\n"


@pytest.fixture(scope="module")
def judged(tok):
    """Real syntax + tests components (sandbox) on six responses to one task."""
    sandbox = pytest.importorskip("densecode.sandbox")
    if not hasattr(sandbox, "AssertJob"):
        pytest.skip("densecode.sandbox has no AssertJob")
    from densecode.rewards.syntax import SyntaxComponent
    from densecode.rewards.unit_tests import TestsComponent

    cases = [(CUT_CORRECT, True), (CUT_RUNTIME_ERROR, True), (CUT_SYNTAX_ERROR, True),
             (FINISHED_WRONG_CUT_IN_PROSE, True), (FINISHED_RIGHT_CUT_IN_PROSE, True), (FINISHED_WRONG, False)]
    samples = [_sample(tok, text, cut) for text, cut in cases]
    outputs = {"syntax": SyntaxComponent()(samples), "tests": TestsComponent(timeout=60.0)(samples)}
    return samples, outputs


def _verdict(samples, outputs, i):
    return judged_incorrect_despite_cut(samples[i], {name: outs[i] for name, outs in outputs.items()})


def test_cut_off_correct_response_is_not_judged_incorrect(judged):
    samples, outputs = judged
    # The cut itself makes the program fail every test (it does not parse): that is no evidence.
    assert outputs["tests"][0].outcome == 0.0 and outputs["tests"][0].incorrect
    assert outputs["syntax"][0].parsed and not outputs["syntax"][0].incorrect  # incomplete at the cut is forgiven
    assert _verdict(samples, outputs, 0) is None


def test_cut_off_wrong_so_far_is_judged_incorrect(judged):
    samples, outputs = judged
    # A NameError raised on line 2, finished long before the cut.
    assert outputs["tests"][1].ran_cleanly is False and outputs["tests"][1].errors
    assert _verdict(samples, outputs, 1) == "error_before_cut"
    # A syntax error on line 2 (the unclosed bracket at the cut does not hide it).
    assert outputs["syntax"][2].parsed is False and outputs["syntax"][2].errors
    assert _verdict(samples, outputs, 2) == "error_before_cut"


def test_code_finished_before_the_cut_is_judged_by_its_tests(judged):
    samples, outputs = judged
    assert _verdict(samples, outputs, 3) == "finished_wrong"  # wrong code, cut in the prose after it
    assert _verdict(samples, outputs, 4) is None  # right code, cut in the prose after it


def test_masking_keeps_wrong_truncated_and_masks_cut_off_correct(judged):
    samples, outputs = judged
    n = len(samples)
    padded = n + 2  # groups of 4: two more copies of the untruncated finished-wrong response
    mask = torch.ones(padded, 4)
    rows = list(range(n)) + [5, 5]

    def batch():
        return SimpleNamespace(
            response_mask=mask, prompt_index=torch.tensor([0] * 4 + [1] * 4), rewards=None,
            sequence_rewards=torch.tensor([0.0] * padded), truncated=[samples[r].truncated for r in rows],
            temperature=1.0, responses=[SimpleNamespace(token_ids=samples[r].token_ids) for r in rows],
            samples=[samples[r] for r in rows],
            reward_outputs=SimpleNamespace(outputs={k: [v[r] for r in rows] for k, v in outputs.items()}, weights={}),
        )

    # rho = 1: every eligible response is masked
    algo = GRPOAlgorithm(GRPOConfig(group_size=4, truncation_rho=1.0, sequence_reward="outcome"))
    b = batch()
    stats = algo.compute_advantages(b)
    masked = [bool(b.advantages[i].abs().sum() == 0) for i in range(n)]
    # outcome (pass rate) per response: 0, 0, 0, 0, 1, 0 -> group 0 (rows 0-3) has no spread (advantages 0),
    # so check the mask via the counts and group 1 (rows 4, 5, 5, 5): row 4 masked, row 5 (untruncated) not.
    assert stats["grpo/truncated"] == 5 and stats["grpo/eligible"] == 2 and stats["grpo/masked"] == 2
    assert stats["grpo/truncated_incorrect_error_before_cut"] == 2
    assert stats["grpo/truncated_incorrect_finished_wrong"] == 1
    assert masked[4] and not masked[5] and b.advantages[5, 0] < 0
    # The rule before issue #22: the cut-off correct response counts as incorrect (its tests failed).
    prev = GRPOAlgorithm(GRPOConfig(group_size=4, truncation_rho=1.0, truncation_evidence="any_verdict"))
    stats_prev = prev.compute_advantages(batch())
    assert stats_prev["grpo/eligible"] == 1 and stats_prev["grpo/truncated_incorrect_any_verdict"] == 4


def test_cut_token_and_parse_errors_of_runners_are_no_runtime_evidence(tok):
    from densecode.rewards import SimFeedback
    from densecode.rewards.sim import SimComponent

    spans = [(0, 4), (4, 5), (5, 9)]  # "abcd", "\n", "efgh"
    assert cut_token_index("abcd\nefgh", spans) == 1
    assert cut_token_index("abcdefgh", [(0, 8)]) == 0
    sample = _sample(tok, "x = [\n(\ny", True, task={}, prompt="")  # cut on line 3
    last = sample.n_tokens - 1

    def sim(reason):  # the sim component's output for a simulator reporting `reason` on program line 1
        class Backend:
            def evaluate(self, programs, tasks):
                return [SimFeedback(0.0, [(1, -0.25, reason)], outcome=0.0, incorrect=True)]

        return SimComponent(Backend())([sample])[0]

    # A simulator reporting the unclosed bracket's SyntaxError on line 1: nothing ran, not evidence.
    assert sim("SyntaxError: '[' was never closed").errors == []
    robot = sim("robot error in pick: nothing to pick")
    assert len(robot.errors) == 1 and robot.errors[0].tokens[1] <= cut_token_index(sample.response, sample.token_spans)
    assert judged_incorrect_despite_cut(sample, {"sim": robot}) == "error_before_cut"
    on_cut_line = ComponentOutput(np.zeros(sample.n_tokens), incorrect=True,
                                  errors=[LocatedError((last, last + 1), "robot error")])
    assert judged_incorrect_despite_cut(sample, {"sim": on_cut_line}) is None
    # A clean run that failed the checks of a program cut inside its code: no evidence either.
    failed_checks = ComponentOutput(np.zeros(sample.n_tokens), outcome=0.0, incorrect=True, ran_cleanly=True)
    assert judged_incorrect_despite_cut(sample, {"sim": failed_checks}) is None
    # A component that locates no error (lint) gives none
    assert judged_incorrect_despite_cut(sample, {"lint": ComponentOutput(np.zeros(sample.n_tokens))}) is None


# ------------------------------------------------------------------ 2. outcome sequence reward


def test_outcome_reward_does_not_prefer_the_terse_answer():
    # Two correct answers; credit (0.7 per token) lands on code tokens only, the second has more prose.
    mask = torch.tensor([[1.0] * 8, [1.0] * 8])
    dense = torch.tensor([[0.7] * 4 + [0.0] * 4, [0.7] * 8])
    outputs = [{"tests": ComponentOutput(np.zeros(8), outcome=1.0)} for _ in range(2)]
    batch = SimpleNamespace(rewards=dense * mask, response_mask=mask, sequence_rewards=None, responses=[0, 0])
    mean = sequence_rewards(batch, "mean", outputs)
    assert mean[1] > mean[0]  # the per-token mean ranks the terse (all-code) answer higher
    assert sequence_rewards(batch, "outcome", outputs).tolist() == [1.0, 1.0]


def test_outcome_of_reads_the_typed_verdict():
    def out(**verdict):
        return ComponentOutput(np.zeros(1), **verdict)

    assert outcome_of({"tests": out(outcome=0.5), "lint": out()}) == 0.5
    assert outcome_of({"tests": out()}) is None  # a task without tests
    assert outcome_of({"sim": out(outcome=0.25), "custom": out(outcome=0.75)}) == 0.5  # several: their mean
    assert outcome_of({"kl": out(kl=0.1)}) is None
    batch = SimpleNamespace(rewards=None, response_mask=None, sequence_rewards=None, responses=[0])
    with pytest.raises(ValueError, match="no verifiable outcome"):
        sequence_rewards(batch, "outcome", [{"lint": ComponentOutput(np.zeros(1))}])


# ------------------------------------------------------------------ 4. temperature: initial choice, step down


def _run(ctl, diversities, unparsable=None):
    temps = []
    for step, div in enumerate(diversities):
        temps.append(ctl.temperature_for_step(step))
        ctl.update(div, None if unparsable is None else unparsable[step])
    return temps


def test_initial_diversity_chooses_the_starting_stage(caplog):
    low = TemperatureController(stages=[0.6, 1.2, 1.8], switch_steps=[100, 200], floor=0.05, window=3,
                                initial_levels=[0.5, 0.3])
    with caplog.at_level(logging.INFO, logger="densecode.rl.temperature"):
        assert _run(low, [0.4] * 5) == [0.6] * 3 + [1.2] * 2  # 0.4 is below 0.5 only: stage 1
    assert "initial diversity" in low.last_reason and "initial diversity" in caplog.text
    high = TemperatureController(stages=[0.6, 1.2], switch_steps=[100], floor=0.05, window=3, initial_levels=[0.5])
    assert _run(high, [0.8] * 5) == [0.6] * 5 and not high.changes
    # A falling first window adds a stage (trend -0.1/step < -0.05).
    falling = TemperatureController(stages=[0.6, 1.2, 1.8], switch_steps=[100, 200], floor=0.05, window=3,
                                    min_drop=1.0, initial_levels=[0.5, 0.3], initial_falling_slope=0.05)
    assert _run(falling, [0.5, 0.4, 0.3, 0.3]) == [0.6, 0.6, 0.6, 1.8]  # level 0.4: stage 1, falling: 2
    # The choice is made once: a later window below the levels goes through the ordinary rules only.
    assert _run(TemperatureController(stages=[0.6, 1.2], switch_steps=[100], floor=0.05, window=2, min_drop=1.0,
                                      initial_levels=[0.5]), [0.9, 0.9, 0.4, 0.4, 0.4]) == [0.6] * 5


def test_step_down_when_diversity_turns_chaotic():
    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[2], floor=0.05, window=3, ceiling=0.9)
    temps = _run(ctl, [0.5, 0.5, 0.95, 0.95, 0.95, 0.5, 0.5, 0.5, 0.5])
    # raised by the schedule at step 2; the window at 1.2 (steps 2-4) is above the ceiling -> back to 0.6,
    # and the passed switch at step 2 is not taken again.
    assert temps == [0.6, 0.6, 1.2, 1.2, 1.2, 0.6, 0.6, 0.6, 0.6]
    assert "ceiling" in ctl.last_reason and [c["temperature"] for c in ctl.changes] == [1.2, 0.6]


def test_step_down_when_unparsable_share_rises():
    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[0], floor=0.05, window=2, unparsable_rise=0.2)
    unparsable = [0.1, 0.1, 0.2, 0.4, 0.5, 0.5]
    temps = _run(ctl, [0.5] * 6, unparsable)
    # baseline 0.1 (steps 0-1); levels 0.15, 0.3 (rise 0.2 after step 3) -> step 4 samples at 0.6
    assert temps == [1.2, 1.2, 1.2, 1.2, 0.6, 0.6]
    assert "unparsable" in ctl.last_reason
    # off by default: the same history keeps the stage
    keep = TemperatureController(stages=[0.6, 1.2], switch_steps=[0], floor=0.05, window=2)
    assert _run(keep, [0.5] * 6, unparsable) == [1.2] * 6


def test_controller_state_roundtrip_keeps_applied_switches():
    import json

    ctl = TemperatureController(stages=[0.6, 1.2], switch_steps=[2], floor=0.05, window=3, ceiling=0.9)
    _run(ctl, [0.5, 0.5, 0.95, 0.95, 0.95])
    copy = TemperatureController(stages=[0.6, 1.2], switch_steps=[2], floor=0.05, window=3, ceiling=0.9)
    copy.load_state_dict(json.loads(json.dumps(ctl.state_dict())))
    assert copy.stage == 0 and copy.temperature_for_step(10) == 0.6


def test_temperature_settings_are_validated():
    with pytest.raises(ValueError, match="ceiling"):
        TemperatureController(floor=0.5, ceiling=0.4)
    with pytest.raises(ValueError, match="initial_levels"):
        TemperatureController(stages=[0.6, 1.2], switch_steps=[1], initial_levels=[0.5, 0.4])
    with pytest.raises(ValueError, match="must not increase"):
        TemperatureController(stages=[0.6, 1.2, 1.8], switch_steps=[1, 2], initial_levels=[0.3, 0.5])


# ------------------------------------------------------------------ 5. the sampled stop token


def _two_eos_model(tiny_model_dir, forced):
    """The tiny model with a second end token `forced` that it always samples first."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.generation_config.eos_token_id = [tok.eos_token_id, forced]
    original = model.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        out = original(*args, **kwargs)
        out.logits[..., forced] += 1e4
        return out

    model.forward = forward
    return model, tok


def test_generation_records_the_sampled_end_token(tiny_model_dir):
    from densecode.rl.rollout import sample_responses

    forced = 7
    model, tok = _two_eos_model(tiny_model_dir, forced)
    assert tok.eos_token_id != forced
    out = sample_responses(model, tok, ["def f():\n"], n=2, max_new_tokens=4, temperature=1.0, top_p=1.0, top_k=0,
                           grammar="off", stop=[], batch_size=2, seed=0)
    assert [(r.finish_reason, r.stop_token_id, r.token_ids) for r in out] == [("eos", forced, [])] * 2


def test_trainer_appends_the_sampled_end_token_not_the_tokenizers(tiny_model_dir, tmp_path):
    from densecode.config import load_config
    from densecode.rewards import RewardBatch
    from densecode.rl.trainer import Trainer

    forced = 7
    model, tok = _two_eos_model(tiny_model_dir, forced)

    class Prompts:
        def train_batch(self, n, seed):
            return ["def f():\n"] * n, [{} for _ in range(n)]

    def reward_fn(samples):
        return RewardBatch([np.zeros(s.n_tokens, dtype=np.float32) for s in samples], {}, {}, {}, {})

    cfg = load_config(None, ["algo.name=grpo", "algo.grpo.group_size=2", "train.batch_size=1",
                             "generation.max_new_tokens=4", "algo.grpo.sequence_reward=mean", "reward.weights.kl=0"])
    algo = GRPOAlgorithm.from_config(cfg.algo, cfg.generation)
    trainer = Trainer(cfg, model=model, tokenizer=tok, task_source=Prompts(), reward_fn=reward_fn, algo=algo,
                      run_dir=tmp_path / "run", progress=False)
    batch, _ = trainer.rollout(0)
    assert [r.token_ids for r in batch.responses] == [[forced], [forced]]
    assert batch.response_ids[:, 0].tolist() == [forced, forced]


# ------------------------------------------------------------------ 6. the KL controller's estimator


def test_adaptive_kl_controller_is_fed_the_rewards_estimator():
    from densecode.rewards.kl import KLComponent
    from densecode.rl.kl import AdaptiveKLController, reward_kl

    logp = np.log(np.array([0.5, 0.2, 0.9], dtype=np.float64))
    ref = np.log(np.array([0.1, 0.6, 0.8], dtype=np.float64))
    s = SimpleNamespace(logprobs=logp, ref_logprobs=ref, n_tokens=3)
    k3 = KLComponent("k3")([s, s])
    expected_k3 = float(np.sum(np.expm1(ref - logp) - (ref - logp)))
    k1 = float(np.sum(logp - ref))
    measured = reward_kl(SimpleNamespace(outputs={"kl": k3}))
    assert measured == pytest.approx(expected_k3, rel=1e-5) and abs(measured - k1) > 0.1
    assert reward_kl(SimpleNamespace(outputs={})) is None
    ctl = AdaptiveKLController(0.2, target=1.0, horizon=10)
    ctl.update(measured, 1)
    assert ctl.value == pytest.approx(0.2 * (1 + np.clip(expected_k3 - 1, -0.2, 0.2) / 10))


def test_trainer_feeds_the_controller_the_reward_kl(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.config import load_config
    from densecode.rewards import RewardBatch
    from densecode.rewards.kl import KLComponent
    from densecode.rl.ppo import PPOAlgorithm
    from densecode.rl.trainer import Trainer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)

    class Prompts:
        def train_batch(self, n, seed):
            return ["def f():\n"] * n, [{} for _ in range(n)]

    kl_component = KLComponent("k3")
    seen = []

    def reward_fn(samples):
        outs = kl_component(samples)
        seen.append(outs)
        return RewardBatch([0.1 * o.values for o in outs], {}, {}, {"kl": outs}, {}, weights={"kl": 0.1})

    cfg = load_config(None, ["model.value_model=shared", "algo.ppo.adaptive_kl=true", "algo.ppo.target_kl=0.5",
                             "algo.ppo.kl_horizon=4",
                             "train.batch_size=2", "generation.max_new_tokens=6", "algo.ppo.epochs=2",
                             "train.lr=1e-2", "reward.weights.kl=0.1", "domain=code"])
    trainer = Trainer(cfg, model=model, tokenizer=tok, task_source=Prompts(), reward_fn=reward_fn,
                      algo=PPOAlgorithm.from_config(cfg.algo, cfg.generation), run_dir=tmp_path / "run", progress=False)
    with torch.no_grad():  # move the policy off the reference so that k1 and k3 differ
        g = torch.Generator().manual_seed(0)
        for p in trainer.unwrapped.policy.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    beta0 = trainer.kl_ctl.value
    st = trainer.train_step(0)
    measured = float(np.mean([o.kl for o in seen[-1]]))
    assert st["objective/kl_reward"] == pytest.approx(measured) and measured > 0
    assert abs(st["objective/kl"] - measured) > 1e-3  # the k1 number it was fed before
    err = float(np.clip(measured / 0.5 - 1, -0.2, 0.2))
    assert st["objective/kl_coef"] == pytest.approx(beta0 * (1 + err * 2 / 4))


# ------------------------------------------------------------------ 7. no KL weight in a GRPO reward by accident


def test_grpo_with_a_reward_kl_weight_is_a_clear_error(capsys, tiny_model_dir, tmp_path):
    from densecode.cli import main

    common = ["train", "--model", str(tiny_model_dir), "--no-progress", "--steps", "1",
              "--set", "train.num_threads=1", "--set", "train.eval_every=0", "--set", "algo.name=grpo"]
    # robotics-gae.yaml is a PPO config with reward.weights.kl 0.2
    rc = main(common + ["--config", "robotics-gae", "--output-dir", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert rc == 2 and "reward.weights.kl=0" in err and "allow_reward_kl" in err


def test_grpo_reward_kl_allowed_on_request(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from densecode.config import load_config
    from densecode.errors import DensecodeError
    from densecode.rl.trainer import Trainer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    kw = {"model": model, "tokenizer": tok, "task_source": None, "reward_fn": None, "run_dir": tmp_path / "r",
          "progress": False}
    cfg = load_config("robotics-gae", ["algo.name=grpo"])  # a PPO config with reward.weights.kl 0.2
    with pytest.raises(DensecodeError, match="beta = 0"):
        Trainer(cfg, algo=GRPOAlgorithm.from_config(cfg.algo, cfg.generation), **kw)
    cfg = load_config("robotics-gae", ["algo.name=grpo", "algo.grpo.allow_reward_kl=true"])
    trainer = Trainer(cfg, algo=GRPOAlgorithm.from_config(cfg.algo, cfg.generation), **kw)
    assert trainer.reference is not None  # the reward's KL needs reference log-probs


# ------------------------------------------------------------------ config: the PPO/GRPO split


def test_old_algo_keys_name_their_replacement(tmp_path):
    from densecode.config import load_config
    from densecode.errors import ConfigError

    for old, new in (("algo.ppo_epochs=2", "algo.ppo.epochs"), ("algo.grpo_kl_coef=0.1", "algo.grpo.beta"),
                     ("algo.kl_coef=0.1", "reward.weights.kl"), ("algo.group_size=4", "algo.grpo.group_size"),
                     ("algo.temperature_schedule={stages: [1.0]}", "algo.grpo.temperature_schedule")):
        with pytest.raises(ConfigError, match=f"'{old.split('=')[0]}' was renamed: use {new}"):
            load_config(None, [old])
    path = tmp_path / "old.yaml"
    path.write_text("algo:\n  name: grpo\n  dense_in_grpo: true\n")
    with pytest.raises(ConfigError, match=r"old.yaml: key 'algo.dense_in_grpo' was renamed: use algo.grpo.dense"):
        load_config(path)


def test_algo_sections_are_typed():
    from densecode.config import load_config
    from densecode.errors import ConfigError

    cfg = load_config(None, ["algo.grpo.temperature_schedule={stages: [0.9]}", "algo.grpo.num_iterations=2"])
    assert cfg.algo.grpo.temperature_schedule.stages == [0.9] and cfg.algo.grpo.num_iterations == 2
    with pytest.raises(ConfigError, match="algo.grpo.temperature_schedule.window' expects an integer"):
        load_config(None, ["algo.grpo.temperature_schedule.window=wide"])
    with pytest.raises(ConfigError, match="unknown key 'algo.grpo.temperature_schedule.stage'"):
        load_config(None, ["algo.grpo.temperature_schedule={stage: [1.0]}"])
    with pytest.raises(ConfigError, match="algo.grpo.sequence_reward' must be one of outcome, mean, sum"):
        load_config(None, ["algo.grpo.sequence_reward=max"])
    with pytest.raises(ConfigError, match="unknown key 'algo.ppo.group_size'"):
        load_config(None, ["algo.ppo.group_size=4"])


# ------------------------------------------------------------------ 3. the paper's repetition test can fire


def test_repetition_window_that_can_never_fire_warns():
    import warnings

    from densecode.config import load_config

    for name in ("robotics-grpo", "code-grpo"):  # the shipped configs: 2 x 64 <= max_new_tokens 128
        cfg = load_config(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert GRPOAlgorithm.from_config(cfg.algo, cfg.generation).cfg.repetition_test == "paper"
    cfg = load_config("robotics-grpo", ["generation.max_new_tokens=80"])
    with pytest.warns(UserWarning, match="no response can be repetitive; set repetition_window <= 40"):
        GRPOAlgorithm.from_config(cfg.algo, cfg.generation)
    cfg = load_config("robotics-grpo", ["generation.max_new_tokens=80", "algo.grpo.repetition_test=any_period"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GRPOAlgorithm.from_config(cfg.algo, cfg.generation)


@pytest.mark.parametrize("domain", ["robotics", "code", "codegen"])
def test_algo_grpo_has_a_grpo_config_per_domain(domain):
    from densecode.training import resolve_config
    from densecode.rewards import effective_weights

    args = SimpleNamespace(config=None, overrides=[], domain=domain, model=None, algo="grpo", resume=None,
                           output_dir=None, steps=None)
    cfg, path, _ = resolve_config(args)
    assert str(path).endswith(f"{domain}-grpo.yaml") and cfg.algo.name == "grpo"
    assert cfg.algo.grpo.sequence_reward == "outcome" and cfg.algo.grpo.truncation_evidence == "cut_proof"
    assert effective_weights(cfg.reward, cfg.domain)["kl"] == 0.0  # MicroCoder: beta = 0
