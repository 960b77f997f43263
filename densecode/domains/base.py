"""The `Domain` interface: everything the trainer, `densecode eval` and `densecode explain` need to know about a
kind of task, in one registered object.

A domain owns
- its tasks: `tasks(split, n, seed) -> list[dict]`, deterministic, with disjoint train / validation / test splits;
  every task dict carries its `prompt` plus whatever its reward components read (`tests`, `reference`, ...);
- its prompt format and stop strings (`stop`), and its chat form (`chat_messages`): `tasks.prompt_style` picks
  one (docs/prompts.md); `use_tokenizer` resolves it once the model's tokenizer is known;
- its reward recipe: `default_weights` and `default_component_options` (merged under the config's `reward:`),
  extra reward components it defines (`components`: name -> "module:Class"), and the simulator backend the `sim`
  component calls (`simulator()`);
- its evaluation: `score(tasks, responses)` gives one outcome record per response, `metrics(records)` the numbers
  logged as `eval/*`; `evaluate(model, tokenizer, n=, seed=)` (used by the trainer) samples and scores a held-out split;
- its options: `Options`, a dataclass that types the config's `tasks:` section (unknown keys and wrong types are
  errors naming the key and the file, like every other section).

The trainer sees a domain only through two narrow protocols: a task source (`train_batch`, `evaluate`) and the reward
function built from the domain's recipe (densecode.domains.build_reward_fn). Adding a domain touches no other file:
subclass `Domain`, decorate it with `@register_domain`, and make its module importable (an entry point in the
`densecode.domains` group, or `domain: "package.module:Class"` in a config).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from densecode.errors import DensecodeError
from densecode.prompts import (
    PromptStyle,
    as_chat_task,
    chat_prompt,
    fenced,
    is_chat_task,
    resolve_prompt_style,
)
from densecode.rl.protocols import TaskSource


@dataclass
class DomainOptions:
    """Options every domain understands (the config's `tasks:` section); domains subclass this."""

    # Offset added to each step's task seed: change it to draw other training tasks.
    train_seed: int = 0
    # Seed of the held-out eval draw (fixed, so every eval sees the same tasks).
    eval_seed: int = 12345
    eval_split: str = "test"  # the split held-out evals draw from (train | validation | test)
    eval_temperature: float = 0.0  # eval decoding temperature; 0 = greedy
    eval_max_new_tokens: int | None = None  # eval response limit; null = generation.max_new_tokens
    # A second eval pass at this temperature (fixed seed, the generation top_p), logged as sampled_*: RL first
    # improves the sampling distribution, which greedy shows only once an argmax flips. null = no second pass.
    eval_sampled_temperature: float | None = None
    # How tasks reach the model (docs/prompts.md): chat = the task as a user turn through the tokenizer's chat
    # template (TRL's conversational format; the answer's code is its ```python block, else all of it);
    # completion = the task's own text, which the response continues; auto = chat when the tokenizer has a chat
    # template (densecode-tiny has none: completion).
    prompt_style: PromptStyle = "auto"
    # Chat only: the assistant turn is pre-filled with this text, e.g. "```python\n" (or densecode eval's MBPP
    # prefix), so the model writes only the code and the answer ends at the block's closing fence ("\n```"):
    # shorter rollouts, and the format `densecode eval --benchmark mbpp` judges. "" = the model writes the whole
    # turn. Ignored with completion prompts.
    chat_answer_prefix: str = ""


CLOSING_FENCE = "\n```"


def opens_code_block(text: str) -> bool:
    """Does `text` end inside a markdown code block (an odd number of ``` fences)?"""
    return text.count("```") % 2 == 1


def draw_tasks(pool: list[dict], split: str, n: int, seed: int) -> list[dict]:
    """Tasks from a fixed pool: training draws `n` with replacement (seeded); a held-out split gives its first `n`
    (all with n <= 0), so every eval sees the same tasks. Copies, so callers may add keys."""
    if split == "train":
        rng = random.Random(seed)
        return [dict(pool[rng.randrange(len(pool))]) for _ in range(n)] if pool else []
    return [dict(t) for t in (pool[:n] if n > 0 else pool)]


def options_from_mapping(cls: type, data: dict | None, source: str = "tasks") -> Any:
    """An options dataclass from a plain mapping (for code that builds a domain without a YAML file)."""
    from densecode.config import apply_mapping

    opts = cls()
    apply_mapping(opts, dict(data or {}), source, prefix="tasks.")
    return opts


class Domain(TaskSource):
    """Base class of every domain. Subclasses set the class attributes and implement `tasks` and `score`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Options: ClassVar[type] = DomainOptions
    # Reward recipe: weights of the components (a weight of 0 switches one off) and their options.
    default_weights: ClassVar[dict[str, float]] = {}
    default_component_options: ClassVar[dict[str, dict]] = {}
    # Reward components this domain defines beyond densecode's (name -> "package.module:Class").
    components: ClassVar[dict[str, str]] = {}
    stop: ClassVar[list[str]] = []
    # The eval metric the progress bar and summaries lead with.
    headline_metric: ClassVar[str] = "success_rate"
    # The chat form's request, put above the task's own prompt (shown as a code block) in the user turn.
    chat_instruction: ClassVar[str] = ("Complete the Python code below. Reply with the complete code in one "
                                       "```python code block.")

    def __init__(self, options: Any = None, *, generation: Any = None, base_dir: str | Path | None = None,
                 name: str | None = None):
        if options is None or isinstance(options, dict):
            options = options_from_mapping(self.Options, options)
        if not isinstance(options, self.Options):
            raise DensecodeError(f"domain {self.name!r}: options must be a {self.Options.__name__}, "
                                 f"got {type(options).__name__}")
        self.options = options
        self.generation = generation
        self.base_dir = Path(base_dir) if base_dir is not None else None
        if name:
            self.name = name
        self.tokenizer: Any = None
        # Resolved by use_tokenizer; until then auto is completion (no tokenizer, no template).
        self.prompt_style = "completion" if self.options.prompt_style == "auto" else self.options.prompt_style

    # ------------------------------------------------------------------ prompts

    def use_tokenizer(self, tokenizer: Any, model: str | None = None) -> str:
        """Resolve `tasks.prompt_style` for the model's tokenizer (train, eval and explain call this once the
        tokenizer is loaded, before the first task is drawn); returns "chat" or "completion"."""
        style = resolve_prompt_style(self.options.prompt_style, tokenizer, model=model)
        if style == "chat" and getattr(self.generation, "grammar", "off") == "constrain":
            raise DensecodeError("generation.grammar: constrain needs completion prompts (a chat answer starts with "
                                 "prose the Python grammar rejects): set tasks.prompt_style: completion or "
                                 "generation.grammar: off")
        self.tokenizer, self.prompt_style = tokenizer, style
        self.__dict__.pop("_eval_cache", None)  # drawn under the earlier style
        return style

    def chat_request(self, task: dict) -> str:
        """The user turn of one task: the domain's instruction, then its own prompt as a code block."""
        return f"{self.chat_instruction}\n\n{fenced(task['prompt'])}"

    def chat_messages(self, task: dict) -> list[dict]:
        """The task as chat messages (TRL's conversational format): one user turn."""
        return [{"role": "user", "content": self.chat_request(task)}]

    def style_tasks(self, tasks: list[dict]) -> list[dict]:
        """Tasks as the model sees them: in chat style `prompt` becomes the chat template's text (the domain's own
        text stays in `completion_prompt`, and `prompt_style: chat` tells rewards and scoring)."""
        if self.prompt_style != "chat":
            return tasks
        if self.tokenizer is None:
            raise DensecodeError(f"domain {self.name!r}: tasks.prompt_style chat needs the model's tokenizer "
                                 "(call domain.use_tokenizer(tokenizer) first)")
        prefix = self.options.chat_answer_prefix
        return [t if is_chat_task(t) else as_chat_task(t, chat_prompt(self.tokenizer, self.chat_messages(t)) + prefix)
                for t in tasks]

    def stop_strings(self, configured: list[str] | None = None) -> list[str]:
        """Where a response is cut. Chat: at the model's end-of-turn token only (completion stops such as "\\n#"
        or "\\n```" would cut the answer's code block), or at the block's closing fence when
        `tasks.chat_answer_prefix` opened one. Completion: `configured` or the domain's own."""
        if self.prompt_style == "chat":
            return [CLOSING_FENCE] if opens_code_block(self.options.chat_answer_prefix) else []
        return list(configured or self.stop)

    def response_program(self, task: dict, response: str) -> str:
        """The program of a response: the prompt + response (completion), the answer's code (chat)."""
        if not is_chat_task(task):
            return task["prompt"] + response
        from densecode.rewards.sample import program_of, text_sample

        return program_of(text_sample(task["prompt"], response, task))[0]

    # ------------------------------------------------------------------ tasks

    def prepare(self) -> None:
        """Load and check what training needs (task files, ...), so bad input fails before the model loads."""

    def tasks(self, split: str, n: int, seed: int) -> list[dict]:  # pragma: no cover - interface
        """`n` task dicts of `split` (train / validation / test), deterministic in `seed`; each has a `prompt`."""
        raise NotImplementedError

    def train_batch(self, n: int, seed: int) -> tuple[list[str], list[dict]]:
        tasks = self.style_tasks(self.tasks("train", n, seed + int(self.options.train_seed)))
        return [t["prompt"] for t in tasks], tasks

    def eval_tasks(self, n: int) -> list[dict]:
        cache = self.__dict__.setdefault("_eval_cache", {})
        if n not in cache:
            cache[n] = self.style_tasks(self.tasks(self.options.eval_split, n, int(self.options.eval_seed)))
        return cache[n]

    # ------------------------------------------------------------------ rewards

    def simulator(self) -> Any:
        """The SimulatorBackend the `sim` reward component calls (None: this domain has no simulator)."""
        return None

    def lint_builtins(self) -> list[str]:
        """Names the lint component treats as defined (a robot API, a plug-in's API)."""
        return []

    def component_options(self) -> dict[str, dict]:
        opts = {k: dict(v) for k, v in self.default_component_options.items()}
        builtins = self.lint_builtins()
        if builtins:
            opts.setdefault("lint", {}).setdefault("builtins", list(builtins))
        return opts

    # ------------------------------------------------------------------ eval

    def score(self, tasks: list[dict], responses: list[str]) -> list[dict]:  # pragma: no cover - interface
        """One record per response: at least `outcome` (a class name, "success" for a solved task) and `score`."""
        raise NotImplementedError

    def canonical_response(self, task: dict) -> str | None:
        """The response that solves `task` (for `--canonical` evals and checks), if the domain knows one."""
        return task.get("canonical")

    def metrics(self, records: list[dict]) -> dict[str, float]:
        """eval/* numbers from score() records: success rate, mean score, the share of each outcome class."""
        n = max(len(records), 1)
        out = {"n_tasks": float(len(records)),
               "success_rate": sum(r.get("outcome") == "success" for r in records) / n,
               "score": float(np.mean([float(r.get("score", 0.0)) for r in records])) if records else 0.0}
        for outcome in sorted({str(r.get("outcome")) for r in records}):
            out[f"outcome/{outcome}"] = sum(str(r.get("outcome")) == outcome for r in records) / n
        return out

    def generate(self, model, tokenizer, prompts: list[str], *, temperature: float, seed: int) -> list[str]:
        """Eval decoding: one completion per prompt with the config's generation settings
        (densecode.eval.held_out.pass_spec: the EvalSpec `densecode eval`'s sampling runs)."""
        from densecode.eval.held_out import complete, pass_spec
        from densecode.rl.settings import SamplingParams

        spec = pass_spec(self.name, self.generation, self.options, temperature=temperature, seed=seed)
        stop = self.stop_strings(list(SamplingParams.from_config(self.generation).stop))
        return complete(spec, model, tokenizer, prompts, stop)

    def evaluate(self, model, tokenizer, *, n: int, seed: int) -> dict[str, float]:
        """Held-out metrics of each pass of densecode.eval.held_out.held_out_passes: greedy (or
        `eval_temperature`) at `seed` and, if set, a sampled pass at `eval_seed` (its metrics prefixed `sampled_`).

        The per-task outcomes behind them stay in `last_eval_rows` (see `eval_task_rows`) until the next call."""
        from densecode.eval.held_out import held_out_passes

        tasks = self.eval_tasks(n)
        prompts = [t["prompt"] for t in tasks]
        out: dict[str, float] = {}
        self.last_eval_rows = []
        for p in held_out_passes(self.name, self.generation, self.options, seed=seed):
            records = self.score(tasks, self.generate(model, tokenizer, prompts, temperature=p.spec.temperature,
                                                      seed=p.spec.seed))
            metrics = self.metrics(records)
            if p.name == "sampled":
                metrics = {f"sampled_{k}": v for k, v in metrics.items() if k in self.sampled_metric_names}
            out.update(metrics)
            self.last_eval_rows.append(self.eval_task_rows(p.name, p.spec.temperature, records))
        return out

    def eval_task_rows(self, pass_name: str, temperature: float, records: list[dict]) -> dict:
        """One eval pass's per-task outcomes (the trainer writes them to eval_tasks.jsonl): for each task, in eval
        order, its id, outcome class and its value of the headline metric, `metrics([record])[headline]` (the
        headline metrics are means over tasks, so these average to the logged eval number). Paired comparisons
        of runs (benchmarks/experiments/dense_vs_sparse.py) resample these tasks."""
        metric = self.headline_metric
        values = []
        for r in records:
            one = self.metrics([r])
            values.append(float(one.get(metric, one.get("score", 0.0))))
        return {"pass": pass_name, "temperature": float(temperature), "metric": metric,
                "task_ids": [None if r.get("task_id") is None else str(r.get("task_id")) for r in records],
                "outcomes": [str(r.get("outcome")) for r in records], "values": values}

    # metrics repeated for the sampled pass
    sampled_metric_names: ClassVar[tuple[str, ...]] = ("success_rate", "score")

    # ------------------------------------------------------------------ misc

    @classmethod
    def option_fields(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls.Options)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
