"""The memory-dump contract: request phases, volume phases, the dump's file and size.

A memory dump rides on volume hotplug (`kubevirt_api.hotplug`). virt-api's
`memorydump` subresource writes the VM's `status.memoryDumpRequest` (phase Associating);
virt-controller adds a `memoryDump` volume to the VM template and the running VMI; the
attachment pod holds the claim; virt-handler binds the claim's directory into the
launcher, asks the launcher for libvirt's core dump and reports the volume's
`memoryDumpVolume`; virt-controller moves the request on and removes the volume again.
Names and rules are upstream KubeVirt's (`pkg/storage/memorydump`, `pkg/virt-api/rest/
memorydump.go`, `pkg/virt-handler/vm.go`).

The request's phases:

    Associating → InProgress → Unmounting → Completed        (or Failed)
    any → Dissociating → (request removed)                    (`removememorydump`)

The volume's phases after the hotplug ones (`MountedToPod`):

    MemoryDumpInProgress → MemoryDumpCompleted                (or MemoryDumpFailed)
"""

from __future__ import annotations

import datetime
import enum
import math

__all__ = [
    "DEFAULT_FS_OVERHEAD",
    "DUMP_OVERHEAD_BYTES",
    "DUMP_SUFFIX",
    "PVC_ANNOTATION",
    "MemoryDumpPhase",
    "MemoryDumpVolumePhase",
    "dump_file_name",
    "expected_claim_bytes",
    "expected_dump_bytes",
    "request_has_completed",
]


class MemoryDumpPhase(enum.StrEnum):
    """`status.memoryDumpRequest.phase` of a VirtualMachine (upstream's MemoryDumpPhase)."""

    ASSOCIATING = "Associating"
    IN_PROGRESS = "InProgress"
    UNMOUNTING = "Unmounting"
    COMPLETED = "Completed"
    DISSOCIATING = "Dissociating"
    FAILED = "Failed"


class MemoryDumpVolumePhase(enum.StrEnum):
    """`status.volumeStatus[].phase` of a memoryDump volume once it is mounted."""

    IN_PROGRESS = "MemoryDumpInProgress"
    COMPLETED = "MemoryDumpCompleted"
    FAILED = "MemoryDumpFailed"


#: Set on the claim to the last dump's file name (or "Memory dump failed").
PVC_ANNOTATION = "kubevirt.io/memory-dump"
#: What every dump file's name ends with; the launcher removes older ones before a dump.
DUMP_SUFFIX = ".memory.dump"
#: Added to the guest's memory request for the dump's headers (upstream: 100 MiB).
DUMP_OVERHEAD_BYTES = 100 * 1024 * 1024
#: The filesystem overhead assumed without CDI's config (upstream: 5.5 %).
DEFAULT_FS_OVERHEAD = 0.055
_MIB = 1024 * 1024


def dump_file_name(vmi: str, volume: str, now: datetime.datetime) -> str:
    """`<vmi>-<volume>-<YYYYMMDD-HHMMSS>.memory.dump`, as upstream names it."""
    return f"{vmi}-{volume}-{now.strftime('%Y%m%d-%H%M%S')}{DUMP_SUFFIX}"


def expected_dump_bytes(memory_request_bytes: int) -> int:
    """How large the dump of a guest with this memory request may be."""
    return memory_request_bytes + DUMP_OVERHEAD_BYTES


def expected_claim_bytes(
    memory_request_bytes: int, fs_overhead: float = DEFAULT_FS_OVERHEAD
) -> int:
    """The smallest claim that holds the dump: the dump's size plus the filesystem's
    overhead, aligned up to 1 MiB (upstream's GetSizeIncludingGivenOverhead)."""
    total = (1 + fs_overhead) * expected_dump_bytes(memory_request_bytes)
    return math.ceil(total / _MIB) * _MIB


def request_has_completed(phase: str | None) -> bool:
    """Whether a request is past its dump (upstream's HasCompleted): any phase but
    Associating and InProgress. A VMI started from the VM then leaves the volume out."""
    return phase is not None and phase not in (
        MemoryDumpPhase.ASSOCIATING,
        MemoryDumpPhase.IN_PROGRESS,
    )
