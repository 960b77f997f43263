"""The reward explorer's library side: rollout records (or `densecode generate` output scored here) -> one HTML
page with every token coloured by its reward. `densecode explain` and `densecode.api.explain` call `explain`."""

from __future__ import annotations

from pathlib import Path

from densecode.errors import DensecodeError
from densecode.rewards.explain import read_jsonl, render_html, rollout_records


def score_generations(rows: list[dict], model: str, config: str | None, overrides: list[str]) -> list[dict]:
    """Turn generate-output rows into rollout records by computing the rewards here."""
    from densecode.config import load_config
    from densecode.domains import build_domain, build_reward_fn
    from densecode.prompts import STYLE_KEY, ends_in_generation_prompt
    from densecode.rewards import make_sample

    cfg = load_config(config, overrides)
    try:
        from transformers import AutoTokenizer

        from densecode.models import resolve_model_path

        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(model)))
    except DensecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any loading failure is the user's model path
        raise DensecodeError(f"cannot load the tokenizer of --model {model!r}: {exc}") from None
    domain = build_domain(cfg)
    # A chat generation's reward regions are its answer's code. `densecode generate` sends prompts as given, so under
    # tasks.prompt_style auto a row is chat when its task says so or its prompt ends in the template's generation
    # prompt; chat / completion decide for every row.
    style = cfg.tasks.prompt_style if cfg.tasks is not None else "auto"
    domain.use_tokenizer(tokenizer, model)
    samples = []
    for number, row in enumerate(rows, 1):
        text = row.get("completion", row.get("response"))
        if not isinstance(row.get("prompt"), str) or not isinstance(text, str):
            raise DensecodeError(f"line {number}: expected 'prompt' and 'completion' (or 'response') strings")
        ids = row.get("token_ids") or tokenizer(text, add_special_tokens=False)["input_ids"]
        task = dict(row.get("task") or {})
        if style == "chat" or (style == "auto" and ends_in_generation_prompt(tokenizer, row["prompt"])):
            task.setdefault(STYLE_KEY, "chat")
        elif style == "completion":
            task.pop(STYLE_KEY, None)
        samples.append(make_sample(row["prompt"], ids, tokenizer, task,
                                   code_regions=cfg.reward.code_regions,
                                   truncated=row.get("finish_reason") == "length",
                                   grammar_verdicts=row.get("grammar_verdicts")))
    # The config's own domain scores them: its simulator, its lint builtins, its weights.
    batch = build_reward_fn(cfg, domain)(samples)
    return rollout_records(samples, batch)


def select_rows(rows: list[dict], step="last", limit: int = 0, source: str = "rollouts") -> list[dict]:
    """The rows of one training step ("last": the newest in the file; a number; "all"), the first `limit` of them."""
    steps = [r.get("step") for r in rows if r.get("step") is not None]
    if step != "all" and steps:
        if step == "last":
            want = max(steps)
        else:
            try:
                want = int(step)
            except ValueError:
                raise DensecodeError(f"--step must be a number, 'last' or 'all'; got {step!r}") from None
        rows = [r for r in rows if r.get("step") == want]
        if not rows:
            raise DensecodeError(f"{source}: no samples with step {want} (steps in the file: "
                                 f"{min(steps)}..{max(steps)})")
    return rows[:limit] if limit else rows


def explain(input_path, out, *, model: str | None = None, config: str | None = None, overrides=(), limit: int = 0,
            step="last", title: str = "densecode reward explorer") -> tuple[Path, int]:
    """Write the HTML page for a rollouts JSONL (from training) or a generate output (scored with `model`'s
    tokenizer and `config`'s domain and weights); (path written, samples shown)."""
    rows = select_rows(read_jsonl(input_path), step, limit, str(input_path))
    if all("components" in r for r in rows):
        records = rows
    elif all("prompt" in r for r in rows):
        if not model:
            raise DensecodeError(f"{input_path} holds generations without rewards: pass --model (its tokenizer) "
                                 "and --config (domain, weights) to score them, or give a rollouts file")
        records = score_generations(rows, model, config, list(overrides))
    else:
        raise DensecodeError(f"{input_path}: lines are neither rollout records nor generations (need 'components' "
                             "or 'prompt')")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(records, title), encoding="utf-8")
    return out, len(records)
