"""Byte-level BPE tokenizer for densecode-tiny.

Byte-level, so every string (any indentation, any unicode) round-trips exactly;
small vocabulary, so the embedding matrix stays cheap and SynCode's mask store
builds in seconds. `<|endoftext|>` is EOS, BOS, UNK and PAD at once (GPT-2 style).
"""

from __future__ import annotations

from collections.abc import Iterable

from densecode.embedded import EOS_TOKEN


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096):
    """Train a byte-level BPE on `texts`; return a `PreTrainedTokenizerFast` (left padding)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # add_prefix_space=False: a prompt and its response are tokenized separately and
    # concatenated; no space may be invented at the junction.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
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
