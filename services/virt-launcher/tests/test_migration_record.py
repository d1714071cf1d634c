"""The migration record: Domain.migration on the wire, ``<migration>`` in the domain XML."""

from __future__ import annotations

import datetime

from virt_launcher.cmd_server import to_migration
from virt_launcher.migration_record import (
    AbortStatus,
    MigrationMode,
    MigrationRecord,
    merge_into_metadata,
    record_from_metadata,
)
from virt_rpc import MigrationAbortStatus
from virt_rpc import MigrationMode as WireMode

START = datetime.datetime(2026, 12, 1, 11, 0, 0, tzinfo=datetime.UTC)
END = datetime.datetime(2026, 12, 1, 11, 0, 9, tzinfo=datetime.UTC)
RECORD = MigrationRecord(
    uid="m-1",
    start=START,
    end=END,
    failed=True,
    failure_reason="Live migration aborted",
    abort_status=AbortStatus.SUCCEEDED,
    mode=MigrationMode.PAUSED,
)


def test_a_record_survives_the_domain_metadata_and_keeps_what_else_is_there() -> None:
    element = merge_into_metadata(
        '<kubevirt xmlns="http://kubevirt.io"><uid>vmi</uid></kubevirt>', RECORD
    )
    assert "<uid>vmi</uid>" in element
    assert "<startTimestamp>2026-12-01T11:00:00Z</startTimestamp>" in element
    assert "<abortStatus>Succeeded</abortStatus>" in element
    assert record_from_metadata(element) == RECORD


def test_libvirts_answer_with_unqualified_children_is_read_too() -> None:
    # virDomainGetMetadata gives the element back with only a prefix declared.
    answer = (
        '<kubevirt xmlns:kubevirt="http://kubevirt.io"><uid>vmi</uid>'
        "<migration><uid>m-1</uid><completed/><mode>PreCopy</mode></migration></kubevirt>"
    )
    assert record_from_metadata(answer) == MigrationRecord(uid="m-1", completed=True)
    assert "<uid>vmi</uid>" in merge_into_metadata(answer, RECORD)


def test_no_migration_in_the_metadata_is_none() -> None:
    assert (
        record_from_metadata('<kubevirt xmlns="http://kubevirt.io"><uid>v</uid></kubevirt>') is None
    )
    assert record_from_metadata("not xml") is None


def test_the_record_on_the_wire() -> None:
    wire = to_migration(RECORD)
    assert (wire.uid, wire.start_timestamp, wire.end_timestamp) == ("m-1", START, END)
    assert wire.failed
    assert not wire.completed
    assert wire.failure_reason == "Live migration aborted"
    assert wire.abort_status == MigrationAbortStatus.SUCCEEDED
    assert wire.mode == WireMode.PAUSED
