"""`codegen`: write a function from a description and signature; hidden asserts judge it in the sandbox.

    generator.py  seeded tasks from families.py (32 families over strings, lists, dicts, arithmetic, loops,
                  conditionals, recursion, sorting/searching, small classes; levels 1-3), split by a hash
    loader.py     real tasks (MBPP, MBPP+, prompt+tests rows), each canonical answer checked in the sandbox at load
    domain.py     the registered Domain (`--domain codegen`) with the code recipe (tests, syntax, lint, dfg, kl)
"""

from densecode.domains.codegen.domain import CodegenDomain, CodegenOptions

__all__ = ["CodegenDomain", "CodegenOptions"]
