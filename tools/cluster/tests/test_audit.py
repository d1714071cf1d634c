"""The audit log reader: which client wrote what, and whether a write changed anything."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from kv_cluster.audit import audit_policy, read_audited_writes


def _event(
    verb: str,
    resource: str,
    *,
    subresource: str = "",
    code: int = 200,
    guarded_by: str = "",
    after: str = "",
    stage: str = "ResponseComplete",
    phase: str = "",
) -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource, "namespace": "default", "name": "vm1"}
    if subresource:
        ref["subresource"] = subresource
    event: dict[str, Any] = {
        "kind": "Event",
        "stage": stage,
        "verb": verb,
        "user": {"username": "system:serviceaccount:kubevirt:kubevirt-handler"},
        "objectRef": ref,
        "responseStatus": {"code": code},
        "stageTimestamp": "2026-12-03T05:00:00.000000Z",
    }
    if guarded_by:
        event["requestObject"] = {"metadata": {"resourceVersion": guarded_by}}
    if after:
        event["responseObject"] = {"metadata": {"resourceVersion": after}}
        if phase:
            event["responseObject"]["status"] = {"phase": phase}
    return event


def _log(path: Path, events: list[dict[str, Any]], torn: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + torn)


def test_a_guarded_patch_that_left_the_version_as_it_was_changed_nothing(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    _log(
        log,
        [
            _event(
                "patch", "virtualmachineinstances", guarded_by="10", after="11", phase="Running"
            ),
            _event("patch", "virtualmachineinstances", guarded_by="11", after="11"),
            _event("patch", "virtualmachineinstances", guarded_by="9", code=409),
            _event("patch", "pods", subresource="status", after="12"),
        ],
    )
    writes, _ = read_audited_writes(log)
    assert [(w.resource, w.code, w.changed_nothing) for w in writes] == [
        ("virtualmachineinstances", 200, False),
        ("virtualmachineinstances", 200, True),
        ("virtualmachineinstances", 409, False),
        ("pods/status", 200, False),
    ]
    assert writes[0].user == "system:serviceaccount:kubevirt:kubevirt-handler"
    assert (writes[0].namespace, writes[0].name) == ("default", "vm1")
    assert (writes[0].phase, writes[3].phase) == ("Running", "")
    assert writes[0].epoch == dt.datetime(2026, 12, 3, 5, tzinfo=dt.UTC).timestamp()


def test_reading_on_from_an_offset_skips_what_was_read_and_waits_for_a_torn_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    first = _event("create", "pods", code=201, after="5")
    torn = json.dumps(_event("delete", "pods"))[:40]
    _log(log, [first, _event("patch", "pods", stage="RequestReceived")], torn=torn)

    writes, offset = read_audited_writes(log)
    assert [w.verb for w in writes] == ["create"]  # the RequestReceived stage is not a write

    with log.open("a") as more:
        more.write(json.dumps(_event("delete", "pods"))[40:] + "\n")
    writes, _ = read_audited_writes(log, offset)
    assert [w.verb for w in writes] == ["delete"]


def test_a_missing_log_reads_as_no_writes(tmp_path: Path) -> None:
    assert read_audited_writes(tmp_path / "absent.log", 7) == ([], 7)


def test_the_policy_records_writes_to_kubevirt_objects_and_pods_and_nothing_else() -> None:
    rules = audit_policy()["rules"]
    assert rules[-1] == {"level": "None"}
    recorded = rules[0]
    assert set(recorded["verbs"]) == {"create", "update", "patch", "delete"}
    groups = {r["group"] for r in recorded["resources"]}
    assert groups == {"", "kubevirt.io", "snapshot.kubevirt.io", "export.kubevirt.io"}
