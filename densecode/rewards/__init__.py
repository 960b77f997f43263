"""Dense token-level rewards: one float per generated token, from every feedback source.

    from densecode.rewards import make_sample, build_assembler
    samples = [make_sample(prompt, ids, tokenizer, task) for ...]
    batch = build_assembler(cfg.reward, cfg.domain, simulator=backend)(samples)
    batch.total[i]            # per-token total reward of sample i
    batch.components["lint"]  # weighted per-token values; batch.raw for unweighted

Components: syntax, lint, tests, dfg, sim, kl (see each module's docstring).
`densecode explain` renders a rollouts file as an HTML page (explain.py).
"""

from densecode.rewards.assembler import (
    ROBOT_API,
    RewardAssembler,
    RewardBatch,
    build_assembler,
    default_weights,
    effective_weights,
)
from densecode.rewards.base import (
    REGISTRY,
    ComponentOutput,
    RewardComponent,
    SimFeedback,
    SimulatorBackend,
)
from densecode.rewards.sample import (
    ProgramMap,
    Sample,
    find_code_regions,
    make_sample,
    program_of,
    token_spans_for,
)

__all__ = [
    "REGISTRY",
    "ROBOT_API",
    "ComponentOutput",
    "ProgramMap",
    "RewardAssembler",
    "RewardBatch",
    "RewardComponent",
    "Sample",
    "SimFeedback",
    "SimulatorBackend",
    "build_assembler",
    "default_weights",
    "effective_weights",
    "find_code_regions",
    "make_sample",
    "program_of",
    "token_spans_for",
]
