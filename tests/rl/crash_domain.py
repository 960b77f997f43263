"""A toy domain for the crash-safety test whose reward runs every response in the sandbox.

The tiny random test model writes programs that do not parse, and parse errors never reach the sandbox (robotics
and code judge them in-process), so this domain wraps each response in a string literal: every sample is one
sandboxed program, and its verdict depends only on the response text (deterministic, as the test needs).
Used as `--domain crash_domain:SandboxEchoDomain` with tests/rl/ on PYTHONPATH.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from densecode.domains import Domain


class SandboxEchoDomain(Domain):
    name = "sandbox-echo"
    default_weights: ClassVar[dict[str, float]] = {"sandboxed": 1.0, "kl": 0.05}
    components: ClassVar[dict[str, str]] = {"sandboxed": f"{__name__}:SandboxedParity"}

    def tasks(self, split, n, seed):
        return [{"prompt": f"def f{(seed + i) % 7}():\n    return ", "task_id": f"{split}-{seed}-{i}"} for i in range(n)]

    def score(self, tasks, responses):
        return [{"outcome": "success" if len(r) % 2 == 0 else "failure", "score": float(len(r) % 2 == 0)}
                for r in responses]


class SandboxedParity:
    """+1 on the last token when the sandboxed program finds the response's length even."""

    name = "sandboxed"

    def __call__(self, samples):
        from densecode.rewards.base import ComponentOutput
        from densecode.sandbox import AssertJob, get_default_pool

        jobs = [AssertJob(code=f"s = {s.response!r}\n", tests=["assert len(s) % 2 == 0"], timeout_s=20.0)
                for s in samples]
        outs = []
        for s, res in zip(samples, get_default_pool().run(jobs)):
            values = np.zeros(s.n_tokens, dtype=np.float32)
            passed = res.outcome == "pass" or (res.n_tests > 0 and res.n_passed == res.n_tests)
            if passed and s.n_tokens:
                values[-1] = 1.0
            outs.append(ComponentOutput(values, [], {"passed": float(passed)}))
        return outs
