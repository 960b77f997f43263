"""How RoboEval prompts reach the model: CodeBotler's prompt protocol or densecode's `# Instruction:` format.

- `codebotler` (the paper's protocol): the checkout's code-generation prompt
  file (`code_generation/prompt_prefix.py`: the robot API's documentation and
  worked examples) followed by `# <instruction>` and `def task_program():`,
  the shape of the examples in that file.
- `instruction`: densecode's training format, `# Instruction: <instruction>`
  then `def task_program():` (what densecode's robotics models are trained on).

`auto` picks `codebotler` when the checkout's prompt file is found, else
`instruction`; the report records which was used and from which file.
"""

from __future__ import annotations

from pathlib import Path

from densecode.errors import DensecodeError
from densecode_robosim.tasks import PROGRAM_HEADER, format_prompt

PROMPT_STYLES = ("auto", "codebotler", "instruction")


def codebotler_prompt(prefix: str, instruction: str) -> str:
    """The prefix (its trailing empty comment line dropped), a blank line, `# instruction`, the header."""
    lines = prefix.rstrip().split("\n")
    while lines and lines[-1].strip() in ("", "#"):
        lines.pop()
    return "\n".join(lines) + "\n\n# " + instruction + "\n" + PROGRAM_HEADER


def resolve_style(style: str, prefix_path: Path | None, data: str | None = None) -> tuple[str, str | None]:
    """(style used, prompt prefix text or None)."""
    if style not in PROMPT_STYLES:
        raise DensecodeError(f"RoboEval prompt style must be one of {', '.join(PROMPT_STYLES)}; got {style!r}")
    if style == "instruction" or (style == "auto" and prefix_path is None):
        return "instruction", None
    if prefix_path is None:
        raise DensecodeError(
            f"--prompt-style codebotler needs the checkout's code_generation/prompt_prefix.py, not found from "
            f"--data {data}: pass the checkout's root (or its benchmark/ folder), or use --prompt-style instruction")
    return "codebotler", prefix_path.read_text(encoding="utf-8")


def build_prompt(style: str, prefix: str | None, instruction: str) -> str:
    if style == "codebotler":
        assert prefix is not None
        return codebotler_prompt(prefix, instruction)
    return format_prompt(instruction)
