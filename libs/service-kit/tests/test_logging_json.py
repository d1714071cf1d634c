"""Log lines are JSON objects with KubeVirt's keys; stdlib logs come out the same way."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from service_kit import LiveVerbosity, configure_logging, get_logger, level_for_verbosity


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


def test_event_is_one_json_line_with_standard_keys() -> None:
    out = io.StringIO()
    configure_logging("info", component="virt-handler", stream=out)
    get_logger("virt_handler.vm").info("domain started", domain="default_vm1", vcpus=2)
    [line] = lines(out)
    assert line["msg"] == "domain started"
    assert line["level"] == "info"
    assert line["component"] == "virt-handler"
    assert line["logger"] == "virt_handler.vm"
    assert line["domain"] == "default_vm1"
    assert line["vcpus"] == 2
    assert line["timestamp"].endswith("Z")


def test_level_filters_events_below_it() -> None:
    out = io.StringIO()
    configure_logging("warning", stream=out)
    log = get_logger("x")
    log.info("hidden")
    log.warning("shown")
    assert [line["msg"] for line in lines(out)] == ["shown"]


def test_standard_library_logging_is_rendered_as_json() -> None:
    out = io.StringIO()
    configure_logging("debug", component="virt-api", stream=out)
    logging.getLogger("aiohttp.access").info("GET /healthz %s", 200)
    [line] = lines(out)
    assert line["msg"] == "GET /healthz 200"
    assert line["component"] == "virt-api"
    assert line["logger"] == "aiohttp.access"


def test_exception_is_structured_not_a_raw_traceback() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    try:
        raise ValueError("bad disk bus")
    except ValueError:
        get_logger("x").exception("sync failed")
    [line] = lines(out)
    assert line["msg"] == "sync failed"
    assert line["exception"][0]["exc_type"] == "ValueError"
    assert line["exception"][0]["exc_value"] == "bad disk bus"


def test_reconfiguring_does_not_duplicate_lines() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(stream=first)
    configure_logging(stream=second)
    get_logger("x").info("once")
    assert first.getvalue() == ""
    assert [line["msg"] for line in lines(second)] == ["once"]


def test_unknown_level_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"log level 'loud' is not one of: .*debug"):
        configure_logging("loud")


def test_records_go_to_the_current_stderr_even_after_it_was_swapped() -> None:
    """A harness (pytest's capture) swaps and closes sys.stderr; later records must not
    hit the closed stream ("--- Logging error ---") but the one in place now."""
    import io
    import logging
    import sys

    from service_kit import configure_logging

    first, second = io.StringIO(), io.StringIO()
    saved = sys.stderr
    try:
        sys.stderr = first
        configure_logging("info", component="t")
        first.close()
        sys.stderr = second
        logging.getLogger("aiohttp.access").info("after the swap")
    finally:
        sys.stderr = saved
        configure_logging("info")
    assert '"msg": "after the swap"' in second.getvalue()


def test_live_verbosity_raises_and_restores_the_level_without_reconfiguring() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    log = get_logger("x")
    verbosity = LiveVerbosity("info")
    log.debug("before")
    assert verbosity.apply(6) is True
    log.debug("while verbose")
    assert verbosity.apply(6) is False  # the same level: nothing to change
    assert verbosity.apply(None) is True  # the CR no longer sets one: back to the flag's
    log.debug("after")
    messages = [line["msg"] for line in lines(out)]
    assert "before" not in messages
    assert "after" not in messages
    assert "while verbose" in messages
    assert "log level is now debug (verbosity 6)" in messages


@pytest.mark.parametrize(
    ("verbosity", "level"),
    [
        (0, logging.WARNING),
        (1, logging.WARNING),
        (2, logging.INFO),
        (3, logging.INFO),
        (9, logging.DEBUG),
    ],
)
def test_verbosity_levels(verbosity: int, level: int) -> None:
    assert level_for_verbosity(verbosity) == level
