"""What the launcher records about a live migration (upstream's ``kubevirt.migration``).

One record per launcher: the source's (uid, start, mode, abort status, result) or the
target's (what came with the incoming domain, plus its end). It lives in memory, where
every domain status the launcher reports carries it, and in the domain's
``<metadata><kubevirt><migration>``, written whenever no migration job holds the domain
(before the job starts, so the target's incoming XML carries it, and after it ends).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import TypeVar

from virt_domain import (
    KUBEVIRT_NAMESPACE,
    KubeVirtMetadata,
    MigrationMetadata,
    XmlError,
    format_xml,
    parse_xml,
)

__all__ = [
    "KUBEVIRT_METADATA_KEY",
    "KUBEVIRT_METADATA_TAG",
    "AbortStatus",
    "MigrationMode",
    "MigrationRecord",
    "merge_into_metadata",
    "record_from_metadata",
]

#: libvirt's metadata API names our element by namespace URI and prefix.
KUBEVIRT_METADATA_KEY = "kubevirt"
KUBEVIRT_METADATA_TAG = "{" + KUBEVIRT_NAMESPACE + "}kubevirt"


class AbortStatus(enum.Enum):
    """An abort's progress (upstream's MigrationAbortStatus words)."""

    NONE = ""
    IN_PROGRESS = "InProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class MigrationMode(enum.Enum):
    """How the migration moves memory (upstream's MigrationMode words)."""

    PRE_COPY = "PreCopy"
    POST_COPY = "PostCopy"
    PAUSED = "Paused"


@dataclass(frozen=True)
class MigrationRecord:
    """One migration as this launcher saw it; timestamps are UTC, to the second."""

    uid: str
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None
    completed: bool = False
    failed: bool = False
    failure_reason: str = ""
    abort_status: AbortStatus = AbortStatus.NONE
    mode: MigrationMode = MigrationMode.PRE_COPY

    @property
    def finished(self) -> bool:
        """The result is in (upstream: endTimestamp set); nothing may overwrite it."""
        return self.end is not None

    def replace(self, **changes: object) -> MigrationRecord:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_metadata(self) -> MigrationMetadata:
        """The record as the domain XML's ``<migration>`` element."""
        return MigrationMetadata(
            uid=self.uid or None,
            start_timestamp=_format_time(self.start),
            end_timestamp=_format_time(self.end),
            completed=self.completed,
            failed=self.failed,
            failure_reason=self.failure_reason or None,
            abort_status=self.abort_status.value or None,
            mode=self.mode.value,
        )

    @classmethod
    def from_metadata(cls, meta: MigrationMetadata) -> MigrationRecord:
        """The record an element holds; unknown words fall back to the defaults."""
        return cls(
            uid=meta.uid or "",
            start=_parse_time(meta.start_timestamp),
            end=_parse_time(meta.end_timestamp),
            completed=meta.completed,
            failed=meta.failed,
            failure_reason=meta.failure_reason or "",
            abort_status=_member(AbortStatus, meta.abort_status, AbortStatus.NONE),
            mode=_member(MigrationMode, meta.mode, MigrationMode.PRE_COPY),
        )


def _format_time(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)
    except ValueError:
        return None


_E = TypeVar("_E", bound=enum.Enum)


def _member(kind: type[_E], value: str | None, default: _E) -> _E:
    try:
        return kind(value)
    except ValueError:
        return default


def _parse(element: str) -> KubeVirtMetadata | None:
    # libvirt's metadata API hands the element back with its children in no namespace
    # (only a prefix declared); they are ours, so they are read as the kubevirt one's.
    try:
        root = ET.fromstring(element)
    except ET.ParseError:
        return None
    for node in root.iter():
        if not node.tag.startswith("{"):
            node.tag = "{" + KUBEVIRT_NAMESPACE + "}" + node.tag
    try:
        return parse_xml(KubeVirtMetadata, ET.tostring(root), tag=KUBEVIRT_METADATA_TAG)
    except XmlError:
        return None


def record_from_metadata(element: str) -> MigrationRecord | None:
    """The migration in a ``<kubevirt>`` metadata element (libvirt's metadata API's
    answer), or None when it holds none or cannot be read."""
    meta = _parse(element)
    if meta is None or meta.migration is None:
        return None
    return MigrationRecord.from_metadata(meta.migration)


def merge_into_metadata(element: str | None, record: MigrationRecord) -> str:
    """The ``<kubevirt>`` element ``element`` (None: an empty one) with ``record`` in it;
    everything else the element holds (uid, grace period) is kept."""
    meta = (_parse(element) if element else None) or KubeVirtMetadata()
    meta.migration = record.to_metadata()
    return format_xml(meta, tag=KUBEVIRT_METADATA_TAG)
