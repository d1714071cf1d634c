"""The heartbeat beats every second until the node is ready, then every interval."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kube_runtime import KubeClient, ManualClock
from virt_handler import SCHEDULABLE_LABEL
from virt_handler.heartbeat import Heartbeat


class NodeClient:
    def __init__(self) -> None:
        self.beats: list[tuple[str, str]] = []

    async def merge_patch(self, resource: Any, name: str, body: Any, *_: Any) -> Any:
        self.beats.append((name, body["metadata"]["labels"][SCHEDULABLE_LABEL]))
        return {}


async def test_beats_follow_readiness_on_the_injected_clock_and_end_unschedulable() -> None:
    clock, client, ready = ManualClock(), NodeClient(), [False]
    heartbeat = Heartbeat(
        cast(KubeClient, client), "node-1", lambda: ready[0], interval=30, clock=clock
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(heartbeat.run(stop))

    await clock.advance(0)
    await clock.advance(1)
    assert client.beats == [("node-1", "false"), ("node-1", "false")]  # soon, while not ready
    ready[0] = True
    await clock.advance(1)
    await clock.advance(29)
    assert len(client.beats) == 3
    await clock.advance(1)
    assert client.beats[-1] == ("node-1", "true")
    assert len(client.beats) == 4

    stop.set()
    await asyncio.wait_for(task, 5)
    assert client.beats[-1] == ("node-1", "false")
