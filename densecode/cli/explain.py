"""`densecode explain`: render per-token rewards of rollouts (or scored `densecode generate` output) as HTML."""

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



def configure(parser) -> None:
    from densecode.config import add_config_arguments

    parser.add_argument("--in", dest="input", required=True,
                        help="rollouts JSONL (from training) or a `densecode generate` output (then pass --model)")
    parser.add_argument("--out", required=True, help="HTML file to write")
    parser.add_argument("--model", default=None, help="model whose tokenizer scores a generate output")
    parser.add_argument("--limit", type=int, default=0, help="render only the first N samples (0: all)")
    parser.add_argument("--step", default="last",
                        help="training step to show: a number, 'last' (default: the newest step in the file) or 'all'")
    parser.add_argument("--title", default="densecode reward explorer")
    add_config_arguments(parser)


def run(args) -> int:
    rows = read_jsonl(args.input)
    steps = [r.get("step") for r in rows if r.get("step") is not None]
    if args.step != "all" and steps:
        if args.step == "last":
            want = max(steps)
        else:
            try:
                want = int(args.step)
            except ValueError:
                raise DensecodeError(f"--step must be a number, 'last' or 'all'; got {args.step!r}") from None
        rows = [r for r in rows if r.get("step") == want]
        if not rows:
            raise DensecodeError(f"{args.input}: no samples with step {want} (steps in the file: "
                                 f"{min(steps)}..{max(steps)})")
    if args.limit:
        rows = rows[: args.limit]
    if all("components" in r for r in rows):
        records = rows
    elif all("prompt" in r for r in rows):
        if not args.model:
            raise DensecodeError(f"{args.input} holds generations without rewards: pass --model (its tokenizer) "
                                 "and --config (domain, weights) to score them, or give a rollouts file")
        records = score_generations(rows, args.model, args.config, args.overrides)
    else:
        raise DensecodeError(f"{args.input}: lines are neither rollout records nor generations (need 'components' or 'prompt')")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(records, args.title), encoding="utf-8")
    print(f"wrote {out} ({len(records)} samples)")
    return 0
