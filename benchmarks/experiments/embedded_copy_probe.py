"""How well does a model copy names from a robotics instruction into its program?

Teacher-forced on the reference programs of the held-out RoboSim test split: for every
`go_to("ROOM")`, `pick/place/is_in_room("OBJECT")` and `ask("PERSON", ...)` in a reference,
the probability the model gives the name's first token, and whether that token is its
argmax. This is the skill that decides most robotics failures of densecode-tiny (a wrong
room in `go_to` is a robot-execution error), and the reason for the build's stage 2.

    .venv/bin/python -m benchmarks.experiments.embedded_copy_probe --model densecode-tiny --tasks 300
"""

from __future__ import annotations

import argparse
import re
import statistics

PATTERNS = {
    "room": r'go_to\("([^"]+)"\)',
    "object": r'(?:pick|place|is_in_room)\("([^"]+)"\)',
    "person": r'ask\("([^"]+)"',
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="densecode-tiny")
    p.add_argument("--tasks", type=int, default=300)
    args = p.parse_args()

    import densecode_robosim.tasks as rt
    import torch

    from densecode.config import ModelConfig
    from densecode.models import load_model_and_tokenizer

    torch.set_num_threads(1)
    model, tok = load_model_and_tokenizer(ModelConfig(name_or_path=args.model))[:2]
    model.eval()
    found: dict[str, list[tuple[float, bool]]] = {k: [] for k in PATTERNS}
    for task in rt.generate_tasks("test", args.tasks, seed=0):
        prompt = rt.format_prompt(task.instruction)
        enc = tok(prompt + task.reference, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        for kind, pattern in PATTERNS.items():
            for m in re.finditer(pattern, task.reference):
                if m.group(1) == "person":  # "is anyone here" checks, not a name from the instruction
                    continue
                char = len(prompt) + m.start(1)
                i = next((j for j, (a, b) in enumerate(offsets) if a <= char < b), None)
                if i:
                    found[kind].append((float(logp[i - 1, ids[i]].exp()), int(logp[i - 1].argmax()) == ids[i]))
    print(f"{args.model}: {args.tasks} held-out references (teacher-forced)")
    print(f"{'name':<8} {'n':>5} {'mean p(right)':>14} {'right is argmax':>16}")
    for kind, rows in found.items():
        if rows:
            print(f"{kind:<8} {len(rows):>5} {statistics.fmean(r[0] for r in rows):>14.3f} "
                  f"{statistics.fmean(r[1] for r in rows):>16.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
