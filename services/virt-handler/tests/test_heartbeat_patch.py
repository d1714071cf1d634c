"""The heartbeat writes exactly two keys, on the handler's own node."""

from __future__ import annotations

from datetime import UTC, datetime

from virt_handler import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL, heartbeat_patch


def test_only_the_heartbeat_annotation_and_schedulable_label_are_written() -> None:
    patch = heartbeat_patch(datetime(2026, 11, 29, 22, 0, 1, tzinfo=UTC), True)
    assert patch == {
        "metadata": {
            "annotations": {HEARTBEAT_ANNOTATION: "2026-11-29T22:00:01Z"},
            "labels": {SCHEDULABLE_LABEL: "true"},
        }
    }


def test_a_node_that_is_not_ready_is_not_schedulable() -> None:
    patch = heartbeat_patch(datetime(2026, 1, 1, tzinfo=UTC), False)
    assert patch["metadata"]["labels"] == {SCHEDULABLE_LABEL: "false"}
