"""Prompt styles: how a task's text reaches the model (docs/prompts.md).

- `completion`: the task's own prompt, text the response continues (`def task_program():\\n`, a docstring, ...).
  What densecode-tiny is trained on and what base models expect.
- `chat`: TRL's conversational format. The domain turns the task into messages (`Domain.chat_messages`) and the
  tokenizer's chat template renders them with one generation prompt,
  `tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)`. The answer is a whole
  assistant turn: its code is its first ```python block, else the whole answer (`densecode.eval.extract`).
- `auto`: chat when the tokenizer has a chat template, else completion.

A chat task keeps the model's prompt in `prompt`, the domain's own text in `completion_prompt`, and says
`prompt_style: "chat"` so that reward regions (`densecode.rewards.sample`) and scoring take the answer's code.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from densecode.errors import ConfigError, DensecodeError

PromptStyle = Literal["auto", "chat", "completion"]
PROMPT_STYLES: tuple[str, ...] = typing.get_args(PromptStyle)
STYLE_KEY = "prompt_style"  # the task key a chat task carries
COMPLETION_PROMPT_KEY = "completion_prompt"


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def resolve_prompt_style(style: str, tokenizer: Any, *, what: str = "tasks.prompt_style",
                         model: str | None = None) -> str:
    """"chat" or "completion" for `style` under `tokenizer`; chat without a template is an error naming `what`."""
    if style not in PROMPT_STYLES:
        raise ConfigError(f"key '{what}' must be one of {', '.join(PROMPT_STYLES)}; got {style!r}")
    if style == "auto":
        return "chat" if has_chat_template(tokenizer) else "completion"
    if style == "chat" and not has_chat_template(tokenizer):
        of = f" of {model}" if model else ""
        raise DensecodeError(f"{what}: chat, but the tokenizer{of} has no chat template; use completion "
                             "(or auto, which picks completion for it)")
    return style


def _added_prefix(tokenizer: Any) -> list[int]:
    """The ids the tokenizer puts before any text by itself (a BOS), found by encoding with and without them."""
    if not callable(tokenizer):  # a stand-in that only renders templates (tests) encodes nothing
        return []
    probe = "a"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe)["input_ids"]
    for k in range(len(full) - len(plain) + 1):
        if full[k:k + len(plain)] == plain:
            return list(full[:k])
    return []


def chat_prompt(tokenizer: Any, messages: list[dict]) -> str:
    """The chat template's text for `messages` with one generation prompt, as densecode's encoders take it.

    Rollouts and `generate` encode a prompt with the tokenizer's defaults (`tokenizer(text)`, which adds the
    tokenizer's own BOS). A template that writes that BOS itself would then start with two (the doubled
    `<|im_start|>` of docs/models.md), so the template's leading copy is left out here: encoding the result with
    the defaults gives exactly `tokenizer(template_text, add_special_tokens=False)`.
    """
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prefix = _added_prefix(tokenizer)
    if prefix:
        lead = tokenizer.decode(prefix)
        if lead and text.startswith(lead):
            text = text[len(lead):]
    return text


def generation_prompt(tokenizer: Any) -> str:
    """The text the template adds for `add_generation_prompt=True` (e.g. "<|im_start|>assistant\\n"); "" when none."""
    if not has_chat_template(tokenizer):
        return ""
    messages = [{"role": "user", "content": "x"}]
    with_prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    without = tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=False)
    return with_prompt[len(without):] if with_prompt.startswith(without) else ""


def ends_in_generation_prompt(tokenizer: Any, prompt: str) -> bool:
    """Was `prompt` rendered by this tokenizer's chat template (it ends where the assistant's turn starts)?"""
    tail = generation_prompt(tokenizer)
    return bool(tail.strip()) and prompt.endswith(tail)


def is_chat_task(task: dict | None) -> bool:
    return bool(task) and task.get(STYLE_KEY) == "chat"


def as_chat_task(task: dict, prompt: str) -> dict:
    """`task` with the model's chat prompt in `prompt` and its own text kept in `completion_prompt`."""
    return {**task, COMPLETION_PROMPT_KEY: task["prompt"], "prompt": prompt, STYLE_KEY: "chat"}


def completion_prompt_of(task: dict) -> str:
    """The domain's own prompt text of a task, chat or not."""
    return task.get(COMPLETION_PROMPT_KEY, task.get("prompt", ""))


def fenced(text: str, lang: str = "python") -> str:
    """`text` in a markdown code block (the user turn shows the task's code this way)."""
    return f"```{lang}\n{text.rstrip()}\n```"
