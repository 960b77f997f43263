"""Sandboxed execution of untrusted (generated) code, honest judges and an API bridge.

    from densecode.sandbox import SandboxPool, AssertJob
    with SandboxPool() as pool:
        [result] = pool.run([AssertJob(code, ["assert f(1) == 2"])])

See docs/sandbox.md for what each protection does and does not guarantee.
"""

from densecode.sandbox.defaults import (
    configure_default_pool,
    get_default_pool,
    pool_from_config,
)
from densecode.sandbox.jobs import (
    API_OUTCOMES,
    OUTCOMES,
    ApiError,
    ApiHandler,
    ApiJob,
    ApiRunResult,
    AssertJob,
    FunctionCallJob,
    JudgeResult,
    Limits,
    SandboxError,
    StdioJob,
)
from densecode.sandbox.pool import SandboxPool

__all__ = [
    "API_OUTCOMES", "OUTCOMES", "ApiError", "ApiHandler", "ApiJob", "ApiRunResult", "AssertJob",
    "FunctionCallJob", "JudgeResult", "Limits", "SandboxError", "SandboxPool", "StdioJob", "configure_default_pool",
    "get_default_pool", "pool_from_config",
]
