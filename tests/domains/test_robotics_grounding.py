"""The robotics `grounding` component: a place/object literal the instruction does not name, located on its tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from densecode.config import RewardConfig
from densecode.domains.robotics import RoboticsDomain
from densecode.domains.robotics_grounding import GroundingComponent, main, ungrounded_literals
from densecode.rewards import build_assembler, make_sample
from densecode.rl.credit import findings_token_rewards, outcome_advantages

INSTRUCTION = "Go to the break room, grab the stapler, and bring it back to me."
PROMPT = f"# Instruction: {INSTRUCTION}\ndef task_program():\n"
TASK = {"instruction": INSTRUCTION}


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def sample_of(tok, response, prompt=PROMPT, task=TASK, **kw):
    ids = tok(response, add_special_tokens=False)["input_ids"]
    s = make_sample(prompt, ids, tok, dict(task), **kw)
    assert s.response == response
    return s


def test_only_the_unnamed_literal_gets_the_value_on_its_own_tokens(tok):
    right = '    start = get_current_location()\n    go_to("break room")\n    pick("stapler")\n    go_to(start)\n'
    wrong = right.replace('go_to("break room")', 'go_to("copy room")')
    out_right, out_wrong = GroundingComponent()([sample_of(tok, right), sample_of(tok, wrong)])
    assert not out_right.diagnostics and not out_right.values.any()
    assert out_right.info["ungrounded_names"] == 0.0
    (d,) = out_wrong.diagnostics
    s = sample_of(tok, wrong)
    a, b = d["span"]
    assert s.response[a:b] == '"copy room"'
    assert d["tokens"] == [min(s.tokens_in_range(a, b)), max(s.tokens_in_range(a, b)) + 1]
    hit = np.zeros(s.n_tokens, dtype=bool)
    hit[d["tokens"][0]:d["tokens"][1]] = True
    assert out_wrong.values[hit].sum() == pytest.approx(-1.0)  # split: the literal's tokens share the value
    assert not out_wrong.values[~hit].any()
    assert out_wrong.info["ungrounded_names"] == 1.0


def test_matching_ignores_case_and_judges_only_place_and_object_literals():
    program = ('def task_program():\n    go_to("Break Room")\n    pick(obj)\n    say("Lucas is not here")\n'
               '    ask("Lucas", "Coffee?", ["yes", "no"])\n    place(f"{obj}")\n    go_to("lobby")\n')
    assert [f[:2] for f in ungrounded_literals(program, INSTRUCTION)] == [("go_to", "lobby")]
    assert ungrounded_literals("def task_program(:\n    go_to('lobby')\n", INSTRUCTION) == []
    # columns are characters, not UTF-8 bytes
    (found,) = ungrounded_literals('def f():\n    say("é"); go_to("lobby")\n', "")
    assert found[3] == len('    say("é"); go_to(')


def test_unparsable_code_and_chat_answers(tok):
    (broken,) = GroundingComponent()([sample_of(tok, '    go_to("copy room"\n')])
    assert not broken.diagnostics
    chat = {"instruction": INSTRUCTION, "prompt_style": "chat"}
    answer = 'Here:\n```python\ndef task_program():\n    go_to("copy room")\n```\n'
    (out,) = GroundingComponent()([sample_of(tok, answer, prompt="Write it.", task=chat)])
    (d,) = out.diagnostics
    assert answer[d["span"][0]:d["span"][1]] == '"copy room"'


def test_reference_programs_name_only_what_the_instruction_names(capsys):
    assert main(["--tasks", "200", "--split", "validation"]) == 0
    assert ", 0 not named by the instruction" in capsys.readouterr().out


def test_the_robotics_domain_builds_it_when_weighted_and_outcome_local_credit_reads_it(tok):
    assert "grounding" not in build_assembler(RewardConfig(), RoboticsDomain()).components  # off by default
    asm = build_assembler(RewardConfig(weights={"grounding": 1.0, "lint": 0.0, "syntax": 0.0, "sim": 0.0,
                                                "kl": 0.0}), RoboticsDomain())
    assert isinstance(asm.components["grounding"], GroundingComponent)
    wrong = sample_of(tok, '    go_to("copy room")\n')
    right = sample_of(tok, '    go_to("break room")\n')
    batch = asm([wrong, right])
    n, length = 2, max(wrong.n_tokens, right.n_tokens)
    findings = findings_token_rewards(batch, n, length, spread="each")
    assert findings["grounding"][0].min() == -1.0 and not findings["grounding"][1].any()
    mask = torch.zeros(n, length)
    mask[0, :wrong.n_tokens], mask[1, :right.n_tokens] = 1, 1
    adv, _ = outcome_advantages(torch.tensor([0.0, 0.0]), torch.tensor([0, 0]), mask, credit="outcome+local",
                                findings=findings, dense_scale=0.5)
    located = findings["grounding"][0] != 0
    assert (adv[0][located] < 0).all() and not adv[0][~located].any() and not adv[1].any()


def test_rollout_counts_read_verdicts_and_older_sim_counts(tmp_path, capsys):
    import json

    rows = [{"response": '    go_to("copy room")\n', "task": TASK, "verdicts": {"sim": {"outcome": 0.0}}},
            {"response": '    go_to("break room")\n', "task": TASK, "verdicts": {"sim": {"outcome": 1.0}}},
            {"response": '    go_to("break room")\n', "task": TASK, "info": {"sim": {"runs": 2.0, "successes": 1.0}}}]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--rollouts", str(path)]) == 0
    assert "1 of 3 responses name a place/object the instruction does not (0 of them succeeded); 2 do not " \
           "(1 succeeded)" in capsys.readouterr().out
