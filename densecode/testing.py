"""Tiny offline models for tests and benchmarks.

`make_tiny_model(dir)` trains a small byte-level BPE tokenizer on a fixed Python
corpus and saves it with a randomly initialised GPT-2 causal LM, so tests need
no hub and no embedded asset. Deterministic for a given seed.
"""

from __future__ import annotations

from pathlib import Path

_CORPUS = [
    "def task_program():\n    go_to('kitchen')\n    if is_in_room('apple'):\n        pick('apple')\n",
    "def add(a, b):\n    return a + b\n",
    "for room in get_all_rooms():\n    go_to(room)\n    say('hello')\n",
    "x = [i * 2 for i in range(10)]\nprint(sum(x))\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
    "import math\nresult = math.sqrt(16)\nassert result == 4.0\n",
    "while True:\n    break\ntry:\n    pass\nexcept ValueError as e:\n    raise\n",
    "answer = ask('Alice', 'Do you want tea?', ['yes', 'no'])\nplace('cup')\n",
    "# comment line\ns = \"string\" + 'other' + f\"{x}\"\nd = {'k': 1, 'v': [1, 2.5, None, True]}\n",
    "café = 'naïve résumé ✓'\n",
]


def make_tiny_model(path: str | Path, *, vocab_size: int = 384, n_layer: int = 2, n_embd: int = 64,
                    n_head: int = 2, n_positions: int = 512, seed: int = 0) -> Path:
    """Write a tiny GPT-2 + byte-level BPE tokenizer to `path`; return the path."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.padding_side = "left"
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(fast), n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                        n_head=n_head, bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id,
                        pad_token_id=fast.eos_token_id)
    model = GPT2LMHeadModel(config)
    model.save_pretrained(path)
    return path
