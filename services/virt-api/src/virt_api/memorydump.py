"""The memorydump/removememorydump subresources, as upstream's pkg/virt-api/rest/memorydump.go.

Pure: reading the request body, checking the claim against the VMI, and planning the JSON
patch of the VM's `status.memoryDumpRequest` (the only field these calls own). The patch
replaces the request behind a `test` of its current value, so a concurrent change (the
controller moving the phase on) fails the patch (409) instead of being overwritten.
Phases, sizes and the fs overhead are the shared contract's (`kubevirt_api.memorydump`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_runtime import JsonPatchOp
from kubevirt_api.memorydump import MemoryDumpPhase, expected_claim_bytes
from kubevirt_api.quantity import Quantity, QuantityError

from .lifecycle import Conflict, Invalid

__all__ = [
    "NO_DUMP_BODY",
    "MemoryDumpRequest",
    "check_claim",
    "choose_claim",
    "parse_memory_dump",
    "plan_memory_dump",
    "plan_remove_memory_dump",
]

#: upstream's 400 for a memorydump call without a body.
NO_DUMP_BODY = "Request with no body"
_PATH = "/status/memoryDumpRequest"
_KILO = 1000


@dataclass(frozen=True, slots=True)
class MemoryDumpRequest:
    """What the caller asked: the claim to dump into ("" means the associated one)."""

    claim_name: str


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_memory_dump(body: Mapping[str, Any]) -> MemoryDumpRequest | Invalid:
    """VirtualMachineMemoryDumpRequest {claimName}; its status fields (phase, remove, …)
    are virt-api's and the controller's to set, so they are ignored as upstream does."""
    if "dryRun" in body:
        # The request type has no dryRun: refuse rather than dump for real.
        return Invalid("dryRun is not supported by memorydump")
    claim = body.get("claimName", "")
    if claim is None:
        claim = ""
    if not isinstance(claim, str):
        return Invalid("claimName must be a string (the PersistentVolumeClaim's name)")
    return MemoryDumpRequest(claim)


def _current(vm: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = _map(vm.get("status")).get("memoryDumpRequest")
    return found if isinstance(found, Mapping) else None


def choose_claim(vm: Mapping[str, Any], request: MemoryDumpRequest) -> str | Invalid | Conflict:
    """The claim to dump into: the one asked, else the VM's associated one (upstream's
    validateMemoryDumpRequest); a second claim while one is associated is a Conflict."""
    current = _current(vm)
    associated = str(current.get("claimName") or "") if current is not None else ""
    if not request.claim_name:
        if current is None:
            return Invalid("Memory dump requires claim name to be set")
        return associated
    if current is not None and associated != request.claim_name:
        return Conflict(
            f"can't request memory dump for pvc [{request.claim_name}] while pvc "
            f"[{associated}] is still associated as the memory dump pvc"
        )
    return request.claim_name


def _quantity(value: object, what: str) -> Quantity:
    """A quantity of a stored object; absent is zero (as Go's Memory()/Storage())."""
    try:
        return Quantity.parse(value if value is not None else 0)
    except QuantityError as error:
        raise ValueError(f"{what} is not a quantity: {error}") from error


def check_claim(pvc: Mapping[str, Any], vmi: Mapping[str, Any]) -> Conflict | None:
    """Whether the claim can hold the VMI's dump: a Filesystem claim, writable, and at least
    `expected_claim_bytes` of the VMI's memory request; a Conflict in upstream's words.
    ValueError when a stored quantity is not one (virt-api's 500, not the caller's)."""
    spec = _map(pvc.get("spec"))
    if spec.get("volumeMode") == "Block":
        return Conflict("pvc should be filesystem pvc")
    modes = spec.get("accessModes")
    # upstream refuses any claim that lists ReadOnlyMany (IsReadOnlyAccessMode).
    if isinstance(modes, list) and "ReadOnlyMany" in modes:
        return Conflict("pvc access mode can't be read only")
    requests = _map(_map(spec.get("resources")).get("requests"))
    storage = _quantity(requests.get("storage"), "the claim's storage request")
    memory_raw = _map(
        _map(_map(_map(vmi.get("spec")).get("domain")).get("resources")).get("requests")
    ).get("memory")
    memory = _quantity(memory_raw, "the VMI's memory request")
    # upstream compares the claim rounded up to kB, and shows the expected size in the
    # memory request's notation (binary unless it was written in decimal).
    size = -(-storage.to_int() // _KILO) * _KILO
    binary = memory_raw is None or (isinstance(memory_raw, str) and memory_raw.endswith("i"))
    expected = expected_claim_bytes(memory.to_int())
    if size < expected:
        have = Quantity.from_value(size)
        want = Quantity.from_value(expected, binary=binary)
        return Conflict(f"pvc size [{have}] should be bigger then [{want}]")
    return None


def _patch(vm: Mapping[str, Any], value: Mapping[str, Any]) -> list[JsonPatchOp]:
    """Test the request as read (null when absent: a test of a missing member against null
    passes, as upstream relies on), then replace or add it."""
    current = _current(vm)
    return [
        {"op": "test", "path": _PATH, "value": current},
        {"op": "replace" if current is not None else "add", "path": _PATH, "value": dict(value)},
    ]


def plan_memory_dump(vm: Mapping[str, Any], claim_name: str) -> list[JsonPatchOp] | Conflict:
    """The patch asking for a dump into `claim_name` (phase Associating); a Conflict while a
    removal or another dump is under way (upstream's addMemoryDumpRequest)."""
    current = _current(vm)
    if current is not None:
        phase = current.get("phase")
        if phase == MemoryDumpPhase.DISSOCIATING:
            return Conflict(
                f"can't dump memory for pvc [{claim_name}] a remove memory dump request "
                "is in progress"
            )
        if phase not in (MemoryDumpPhase.COMPLETED, MemoryDumpPhase.FAILED):
            return Conflict(f"memory dump request for pvc [{claim_name}] already in progress")
    return _patch(vm, {"claimName": claim_name, "phase": MemoryDumpPhase.ASSOCIATING.value})


def plan_remove_memory_dump(vm: Mapping[str, Any]) -> list[JsonPatchOp] | Conflict:
    """The patch dissociating the VM's memory-dump claim (phase Dissociating, remove);
    a Conflict without one or with a removal already asked (removeMemoryDumpRequest)."""
    current = _current(vm)
    name = str(_map(vm.get("metadata")).get("name") or "")
    if current is None:
        return Conflict(f"can't remove memory dump association for vm {name}, no association found")
    claim = str(current.get("claimName") or "")
    if current.get("remove") is True:
        return Conflict(f"memory dump remove request for pvc [{claim}] already exists")
    return _patch(
        vm,
        {"claimName": claim, "phase": MemoryDumpPhase.DISSOCIATING.value, "remove": True},
    )
