"""`densecode generate`: sample completions to JSONL, optionally SynCode-checked.

Prompts file: JSONL with a "prompt" field per line (other fields are ignored), or
a JSONL of plain JSON strings, or plain text with one prompt per line (a line is
taken as is, without its newline; multi-line prompts need JSONL).

Each output line: prompt, prompt_index, sample_index, completion, token_ids,
logprobs, grammar_verdicts (null with --grammar off), finish_reason
(eos | stop | length), grammar_fallbacks.

Flags given on the command line win over `--config` / `--set generation.*`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from densecode.config import add_config_arguments, load_config
from densecode.errors import DensecodeError


def configure(parser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--model", default=None, help="model dir, densecode-tiny, or hub id (default: model.name_or_path)")
    parser.add_argument("--prompts", required=True, help="JSONL with a 'prompt' field, or text with one prompt per line")
    parser.add_argument("--out", required=True, help="output JSONL path")
    parser.add_argument("--grammar", choices=("off", "check", "constrain"), default=None,
                        help="SynCode Python grammar: off, check (record verdicts), constrain (mask rejected tokens)")
    parser.add_argument("--n", type=int, default=1, help="samples per prompt (default 1)")
    parser.add_argument("--temperature", type=float, default=None, help="0 = greedy (default generation.temperature)")
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--stop", action="append", default=None, help="stop string (repeatable; Python escapes like \\n work)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--device", default=None, help="torch device (default: what accelerate picks)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def read_prompts(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise DensecodeError(f"prompts file not found: {path} (pass a JSONL with a 'prompt' field or a text file)")
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise DensecodeError(f"prompts file {path} is empty")
    try:
        json_mode = isinstance(json.loads(first), (dict, str))
    except json.JSONDecodeError:
        json_mode = False
    if not json_mode:
        return [line for line in lines if line.strip()]
    from densecode.jsonl import numbered, read_jsonl

    prompts = []
    for where, item in numbered(path, read_jsonl(path, what="prompts", strings=True,
                                                 hint="one JSON object with a 'prompt' string per line")):
        if isinstance(item, dict):
            if not isinstance(item.get("prompt"), str):
                raise DensecodeError(f"{where}: expected a string field 'prompt' (keys: {', '.join(item)})")
            item = item["prompt"]
        prompts.append(item)
    return prompts


def read_prompt_tasks(path: str | Path) -> list[dict | None]:
    """Per prompt of a JSONL prompts file, the task it came from: the row's `task` mapping, else its other fields
    (a file of task dicts, e.g. from `densecode check --write-tasks`); None for plain-text prompts. Carried into
    the output so that `densecode explain --config` scores each completion on its own task (a simulator's world)."""
    from densecode.jsonl import read_jsonl

    try:
        rows = read_jsonl(path, what="prompts", strings=True)
    except DensecodeError:
        return []  # a plain-text prompts file: no tasks
    out = []
    for row in rows:
        if not isinstance(row, dict):
            out.append(None)
            continue
        task = row["task"] if isinstance(row.get("task"), dict) else {k: v for k, v in row.items() if k != "prompt"}
        out.append(task or None)
    return out


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


def run(args) -> int:
    cfg = load_config(args.config, args.overrides)
    gen = cfg.generation
    if args.model:
        cfg.model.name_or_path = args.model
    prompts = read_prompts(args.prompts)
    tasks = read_prompt_tasks(args.prompts)
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)

    from densecode.generation import generate
    from densecode.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.lora if cfg.lora.enabled else None, device=args.device)
    pick = lambda flag, default: default if flag is None else flag
    stop = [_unescape(s) for s in args.stop] if args.stop is not None else gen.stop
    started = time.perf_counter()
    results = generate(
        model, tokenizer, prompts, n=args.n,
        max_new_tokens=pick(args.max_new_tokens, gen.max_new_tokens),
        temperature=pick(args.temperature, gen.temperature),
        top_p=pick(args.top_p, gen.top_p), top_k=pick(args.top_k, gen.top_k),
        grammar=pick(args.grammar, gen.grammar), stop=stop,
        batch_size=pick(args.batch_size, gen.batch_size), seed=args.seed if args.seed is not None else cfg.train.seed,
        progress=not args.no_progress, grammar_options={"code_prefix": gen.grammar_code_prefix},
    )
    elapsed = time.perf_counter() - started
    with out.open("w", encoding="utf-8") as fh:
        for g in results:
            row = g.to_dict()
            if g.prompt_index < len(tasks) and tasks[g.prompt_index] is not None:
                row["task"] = tasks[g.prompt_index]
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tokens = sum(len(g.token_ids) for g in results)
    summary = f"wrote {len(results)} completions to {out} ({tokens} tokens, {tokens / max(elapsed, 1e-9):.1f} tok/s)"
    checked = [v for g in results for v in (g.grammar_verdicts or []) if v is not None]
    if checked:
        summary += f"; grammar accepted {sum(checked)}/{len(checked)} tokens"
        summary += f", parser fallbacks {sum(g.grammar_fallbacks for g in results)}"
    print(summary, file=sys.stderr)
    return 0
