"""`codeio`: given a function and a call, predict the returned value as a Python literal.

    literal.py  the judge (literal_eval + tolerant, order-insensitive equality) and the departure matcher
    values.py   the true value of a call, computed in the sandbox (cached)
    tasks.py    generated tasks (from the codegen families' reference functions) and real ones (MBPP / MBPP+)
    reward.py   the `literal` token reward: credit before the first departing character, the penalty on its token
    domain.py   the registered Domain (`--domain codeio`)
"""

from densecode.domains.codeio.domain import CodeioDomain, CodeioOptions

__all__ = ["CodeioDomain", "CodeioOptions"]
