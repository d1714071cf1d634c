"""Memory dumps, the VM controller's half: the request's phases and the dump volume."""

from __future__ import annotations

from typing import Any

from virt_controller.memorydump import (
    FAILED_ANNOTATION,
    claim_annotation,
    next_request,
    template_volume_ops,
    vmi_volume_ops,
)

DUMP_VOLUME = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}


def _vmi(volumes: list[Any], status: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "vm", "namespace": "ns", "uid": "u"},
        "spec": {"volumes": volumes},
        "status": {"phase": "Running", "volumeStatus": status or []},
    }


def _request(phase: str, **more: Any) -> dict[str, Any]:
    return {"claimName": "dump", "phase": phase, **more}


ROOT = {"name": "root", "containerDisk": {"image": "x"}}


def test_an_associating_request_adds_the_volume_to_template_and_vmi_then_goes_in_progress() -> None:
    template = {"volumes": [ROOT]}
    vmi = _vmi([ROOT])
    ops = template_volume_ops(_request("Associating"), template, vmi)
    assert ops[-1] == {
        "op": "add",
        "path": "/spec/template/spec/volumes",
        "value": [ROOT, DUMP_VOLUME],
    }
    assert ops[0] == {"op": "test", "path": "/spec/template/spec/volumes", "value": [ROOT]}
    assert vmi_volume_ops(_request("Associating"), vmi)[-1]["value"] == [ROOT, DUMP_VOLUME]
    # With the volume in the template, the request is in progress.
    moved = next_request(_request("Associating"), {"volumes": [ROOT, DUMP_VOLUME]}, vmi)
    assert moved is not None
    assert moved["phase"] == "InProgress"
    # Not running: nothing is added, the request waits.
    stopped = dict(vmi, status={"phase": "Scheduled"})
    assert template_volume_ops(_request("Associating"), template, stopped) == []
    assert vmi_volume_ops(_request("Associating"), stopped) == []


def test_a_completed_dump_unmounts_then_completes_with_the_file_name() -> None:
    entry = {
        "name": "dump",
        "phase": "MemoryDumpCompleted",
        "memoryDumpVolume": {
            "claimName": "dump",
            "targetFileName": "vm-dump-20261202-150000.memory.dump",
            "startTimestamp": "2026-12-02T15:00:00Z",
            "endTimestamp": "2026-12-02T15:00:03Z",
        },
    }
    template = {"volumes": [ROOT, DUMP_VOLUME]}
    vmi = _vmi([ROOT, DUMP_VOLUME], [entry])
    request = next_request(_request("InProgress"), template, vmi)
    assert request == _request(
        "Unmounting",
        fileName="vm-dump-20261202-150000.memory.dump",
        startTimestamp="2026-12-02T15:00:00Z",
        endTimestamp="2026-12-02T15:00:03Z",
    )
    assert claim_annotation(request) == "vm-dump-20261202-150000.memory.dump"
    # Unmounting: the volume leaves the VMI (not the template), and the request is
    # Completed once the volume's status entry is gone.
    assert vmi_volume_ops(request, vmi)[-1]["value"] == [ROOT]
    assert template_volume_ops(request, template, vmi) == []
    assert next_request(request, template, vmi) == request
    done = next_request(request, template, _vmi([ROOT]))
    assert done is not None
    assert done["phase"] == "Completed"
    assert next_request(done, template, _vmi([ROOT])) == done


def test_a_failed_dump_fails_the_request_with_the_message() -> None:
    entry = {
        "name": "dump",
        "phase": "MemoryDumpFailed",
        "message": "Memory dump to pvc dump failed: no space",
        "memoryDumpVolume": {"claimName": "dump", "targetFileName": "f", "endTimestamp": "t"},
    }
    request = next_request(
        _request("InProgress"), {"volumes": [DUMP_VOLUME]}, _vmi([DUMP_VOLUME], [entry])
    )
    assert request is not None
    assert (request["phase"], request["message"]) == (
        "Failed",
        "Memory dump to pvc dump failed: no space",
    )
    assert claim_annotation(request) == FAILED_ANNOTATION


def test_removing_takes_the_volume_out_everywhere_then_ends_the_request() -> None:
    request = _request("Dissociating", remove=True)
    template = {"volumes": [ROOT, DUMP_VOLUME]}
    vmi = _vmi([ROOT, DUMP_VOLUME])
    assert template_volume_ops(request, template, vmi)[-1]["value"] == [ROOT]
    assert vmi_volume_ops(request, vmi)[-1]["value"] == [ROOT]
    still_listed = _vmi([ROOT], [{"name": "dump", "phase": "Detaching"}])
    assert next_request(request, {"volumes": [ROOT]}, still_listed) == request
    assert next_request(request, {"volumes": [ROOT]}, _vmi([ROOT])) is None


def test_an_empty_volume_list_is_tested_as_empty_not_as_absent() -> None:
    # A VM whose last hotplugged volume was removed has `volumes: []`, not none.
    ops = template_volume_ops(_request("Associating"), {"volumes": []}, _vmi([]))
    assert ops[0] == {"op": "test", "path": "/spec/template/spec/volumes", "value": []}
    ops = template_volume_ops(_request("Associating"), {}, _vmi([]))
    assert ops[0] == {"op": "test", "path": "/spec/template/spec/volumes", "value": None}
    assert vmi_volume_ops(_request("Associating"), _vmi([]))[0]["value"] == []
