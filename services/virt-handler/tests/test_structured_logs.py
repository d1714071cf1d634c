"""virt-handler logs through service_kit: one JSON object a line, facts as fields."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from service_kit import configure_logging

if TYPE_CHECKING:
    from conftest import Node


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    configure_logging("info", component="virt-handler", stream=stream)
    yield stream
    configure_logging("info", component="virt-handler")  # back to stderr


def _records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


async def test_a_guest_start_is_logged_as_json_with_fields(
    node: Node, log_lines: io.StringIO
) -> None:
    await node.guest_running()
    records = _records(log_lines)
    phases = [r for r in records if r["msg"] == "vmi phase"]
    assert phases, records
    assert (phases[-1]["namespace"], phases[-1]["name"], phases[-1]["phase"]) == (
        "ns",
        "vm",
        "Running",
    )
    assert phases[-1]["component"] == "virt-handler"
    connected = next(r for r in records if r["msg"] == "connected to the launcher")
    assert isinstance(connected["protocol"], int)
    assert not [r for r in records if "%s" in r["msg"] or "%d" in r["msg"]]
