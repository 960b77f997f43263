"""Byte-level BPE tokenizer for densecode-tiny.

Byte-level, so every string (any indentation, any unicode) round-trips exactly;
small vocabulary, so the embedding matrix stays cheap and SynCode's mask store
builds in seconds. `<|endoftext|>` is EOS, BOS, UNK and PAD at once (GPT-2 style).
"""

from __future__ import annotations

from collections.abc import Iterable

from densecode.embedded import EOS_TOKEN


# The "code" pre-tokenizer: a word is one piece whatever precedes it (GPT-2's splits glue a leading space to a word,
# so `items` in `def f(items):` and ` items` in `for x in items` are different tokens and a small model must learn to
# copy each name twice); a newline takes the next line's indentation with it; punctuation and operators take the
# spaces around them (` = `, `, `); every digit is its own piece, so numbers are spelled the same way everywhere.
CODE_PIECES = r"\n[ \n]*|[A-Za-z_]+|[0-9]| ?[^\sA-Za-z_0-9]+ ?| +"
PRETOKENIZERS = ("gpt2", "code")


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096, pretokenizer: str = "gpt2"):
    """Train a byte-level BPE on `texts`; return a `PreTrainedTokenizerFast` (left padding).

    `pretokenizer`: "gpt2" (GPT-2's word splits; densecode-tiny's) or "code" (`CODE_PIECES`).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # add_prefix_space=False: a prompt and its response are tokenized separately and
    # concatenated; no space may be invented at the junction.
    if pretokenizer == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    elif pretokenizer == "code":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(CODE_PIECES), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        raise ValueError(f"unknown pretokenizer {pretokenizer!r} (one of {', '.join(PRETOKENIZERS)})")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN, unk_token=EOS_TOKEN, pad_token=EOS_TOKEN,
        # Decoding must give back the exact source text (no " ," cleanup).
        clean_up_tokenization_spaces=False,
    )
    # Left padding: batched generation appends to the right end of every row.
    fast.padding_side = "left"
    fast.model_max_length = 1_000_000  # the model's n_positions is the real limit
    return fast
