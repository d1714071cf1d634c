"""The protocol loads dateutil only when a Timestamp is parsed from a JSON string:
regenerate moves betterproto2's module-level import into that one call."""

from __future__ import annotations

import datetime
import subprocess
import sys

import pytest
from virt_rpc.generated.google.protobuf import Timestamp
from virt_rpc.regenerate import _defer_dateutil


def test_the_protocol_messages_do_not_load_dateutil() -> None:
    probe = (
        "import sys, virt_rpc; virt_rpc.Domain; "
        "import virt_rpc.generated.google.protobuf; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dateutil'))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


def test_a_timestamp_is_still_parsed_from_its_json_string() -> None:
    parsed = Timestamp.from_dict("2026-01-02T03:04:05.250+01:00")

    assert parsed.to_datetime() == datetime.datetime(
        2026, 1, 2, 2, 4, 5, 250000, tzinfo=datetime.UTC
    )


def test_generated_code_of_another_shape_is_refused_not_half_rewritten() -> None:
    source = (
        "import dateutil.parser\n"
        "            dt = dateutil.parser.isoparse(value)\n"
        "            dt = dateutil.parser.isoparse(value)\n"
    )
    with pytest.raises(RuntimeError, match="cannot defer"):
        _defer_dateutil(source, "x.py")
