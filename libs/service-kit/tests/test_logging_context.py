"""Bound context follows the task that bound it, and survives asyncio.to_thread."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from service_kit import (
    bind_context,
    bound_context,
    clear_context,
    configure_logging,
    get_context,
    get_logger,
    unbind_context,
)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


async def test_concurrent_tasks_keep_their_own_context() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    log = get_logger("reconcile")
    both_bound = asyncio.Barrier(2)

    async def reconcile(name: str) -> None:
        bind_context(namespace="default", name=name)
        await both_bound.wait()
        log.info("reconciled")

    await asyncio.gather(reconcile("vm-a"), reconcile("vm-b"))
    assert sorted((line["namespace"], line["name"]) for line in lines(out)) == [
        ("default", "vm-a"),
        ("default", "vm-b"),
    ]


async def test_context_survives_to_thread() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    bind_context(uid="1234")

    def blocking_libvirt_call() -> None:
        get_logger("libvirt").info("defined")

    await asyncio.to_thread(blocking_libvirt_call)
    [line] = lines(out)
    assert line["uid"] == "1234"


def test_bound_context_restores_previous_values() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    bind_context(name="outer")
    with bound_context(name="inner", step="sync"):
        get_logger("x").info("inside")
    get_logger("x").info("after")
    inside, after = lines(out)
    assert (inside["name"], inside["step"]) == ("inner", "sync")
    assert after["name"] == "outer"
    assert "step" not in after


def test_unbind_and_clear() -> None:
    bind_context(a="1", b="2")
    unbind_context("a")
    assert dict(get_context()) == {"b": "2"}
    clear_context()
    assert dict(get_context()) == {}
