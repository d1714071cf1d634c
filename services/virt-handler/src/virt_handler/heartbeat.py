"""The node heartbeat: `kubevirt.io/heartbeat` and `kubevirt.io/schedulable` on this node only.

virt-controller schedules launcher pods onto nodes labelled schedulable=true and treats
a node whose heartbeat stopped as lost. The handler writes exactly these two keys with
a merge patch of its own node, and nothing on any other node.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kube_runtime import NODES, ApiError, Clock, KubeClient, SystemClock, sleep_or_stop
from service_kit import get_logger

__all__ = ["HEARTBEAT_ANNOTATION", "SCHEDULABLE_LABEL", "Heartbeat", "heartbeat_patch"]

HEARTBEAT_ANNOTATION = "kubevirt.io/heartbeat"
SCHEDULABLE_LABEL = "kubevirt.io/schedulable"
_log = get_logger(__name__)


def heartbeat_patch(now: datetime, schedulable: bool) -> dict[str, Any]:
    """The merge patch for this node: the two keys and nothing else."""
    return {
        "metadata": {
            "annotations": {HEARTBEAT_ANNOTATION: now.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "labels": {SCHEDULABLE_LABEL: "true" if schedulable else "false"},
        }
    }


class Heartbeat:
    """Patches the node every `interval` seconds while running."""

    def __init__(
        self,
        client: KubeClient,
        node: str,
        ready: Callable[[], bool],
        interval: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.clock = clock or SystemClock()
        self.node = node
        self.ready = ready
        self.interval = interval
        self.beats = 0

    async def beat(self) -> bool:
        """One heartbeat (errors are logged; the next beat retries); returns readiness sent."""
        ready = self.ready()
        try:
            await self.client.merge_patch(
                NODES, self.node, heartbeat_patch(self.clock.now(), ready)
            )
            self.beats += 1
        except (TimeoutError, ApiError, OSError) as error:
            _log.warning("heartbeat failed", node=self.node, error=str(error))
            return False
        return ready

    async def run(self, stop: asyncio.Event) -> None:
        """Beat until `stop`; a last beat marks the node unschedulable on the way out."""
        while not stop.is_set():
            ready = await self.beat()
            # Until the node is ready, look again soon so it becomes schedulable quickly.
            await sleep_or_stop(self.clock, self.interval if ready else 1.0, stop)
        with contextlib.suppress(Exception):
            await self.client.merge_patch(
                NODES, self.node, heartbeat_patch(self.clock.now(), False)
            )
