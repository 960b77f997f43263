"""What the domain tests share: samples built from hand-cut tokens."""

from densecode.rewards import Sample


def pieces_sample(prompt: str, pieces: list[str], task: dict, eos: bool = False) -> Sample:
    """A sample whose tokens are the given texts, so a test knows which token holds which word (with `eos`, an EOS
    token with an empty span at the end)."""
    spans, pos = [], 0
    for p in pieces:
        spans.append((pos, pos + len(p)))
        pos += len(p)
    if eos:
        spans.append((pos, pos))
    return Sample(prompt=prompt, response="".join(pieces), token_ids=list(range(len(spans))), token_spans=spans,
                  code_regions=[], task=task)
