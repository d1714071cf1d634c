"""What the launcher records about a memory dump (upstream's ``kubevirt.memoryDump``).

One record per launcher, the last dump it started: the file's name and when it started,
then when it ended and how. It lives in memory, where every domain status the launcher
reports carries it (``Domain.memory_dump``); virt-handler compares the file name with
the one it asked for.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass

__all__ = ["DUMP_FAILED", "MemoryDumpRecord", "format_time"]

#: Upstream's FailedDomainMemoryDump: the failure reason's prefix, before libvirt's error.
DUMP_FAILED = "Domain memory dump failed"


@dataclass(frozen=True)
class MemoryDumpRecord:
    """One memory dump as this launcher ran it; timestamps are UTC."""

    file_name: str
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None
    completed: bool = False
    failed: bool = False
    failure_reason: str = ""

    def finish(self, end: datetime.datetime, failure: str | None) -> MemoryDumpRecord:
        """The record once the dump ended at ``end``, failed with ``failure`` or not."""
        return dataclasses.replace(
            self, end=end, completed=True, failed=failure is not None, failure_reason=failure or ""
        )


def format_time(value: datetime.datetime | None) -> str:
    """RFC 3339 in UTC to the second with 'Z' (as metav1.Time); "" for None."""
    if value is None:
        return ""
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
