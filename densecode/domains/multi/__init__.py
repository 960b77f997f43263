"""The `multi` domain: several registered domains trained as one (ASTOR, joint, curriculum; docs/multitask.md)."""

from densecode.domains.multi.domain import MultiDomain
from densecode.domains.multi.options import SCHEDULES, AstorOptions, MultiOptions
from densecode.domains.multi.scheduler import TaskScheduler

__all__ = ["SCHEDULES", "AstorOptions", "MultiDomain", "MultiOptions", "TaskScheduler"]
