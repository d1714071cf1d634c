"""A toy leader-elected controller, run as a subprocess by test_leader_election.py.

It annotates ConfigMaps labelled toy=1 with its identity and logs every reconcile's
start and end (CLOCK_MONOTONIC is machine-wide, so logs of two replicas compare).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

from kube_runtime import (
    CONFIGMAPS,
    Controller,
    KubeLeaseApi,
    LeaderElectionConfig,
    LeaderElector,
    RestListWatch,
    SharedInformer,
    WorkQueue,
    connect,
)

__all__ = ["main"]


def _logger(path: Path) -> Any:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(*fields: object) -> None:
        # One write per line with O_APPEND: lines never interleave or tear.
        os.write(fd, (" ".join(str(f) for f in (*fields, time.monotonic())) + "\n").encode())

    return write


async def run(kubeconfig: str, namespace: str, identity: str, log_path: Path) -> None:
    log = _logger(log_path)
    client = await connect(kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    informer: SharedInformer[Any] = SharedInformer(
        RestListWatch(client, CONFIGMAPS, namespace=namespace, label_selector="toy=1"),
        name="toy",
    )
    current: list[WorkQueue[str]] = []
    informer.add_handler(lambda e: current[-1].add(e.key) if current else None)

    async def reconcile(key: str) -> None:
        log("start", identity, key)
        await asyncio.sleep(0.2)  # a reconcile that takes a while widens any overlap
        raw = informer.get_raw(key)
        if raw is not None:
            name = raw["metadata"]["name"]
            patch = {"metadata": {"annotations": {"toy/reconciled-by": identity}}}
            await client.merge_patch(CONFIGMAPS, name, patch, namespace)
        log("end", identity, key)

    async def lead(lost: asyncio.Event) -> None:
        log("lead", identity, "-")
        queue: WorkQueue[str] = WorkQueue("toy")
        current.append(queue)
        for key in informer.store:
            queue.add(key)  # level-triggered: a new leader looks at everything
        controller_stop = asyncio.Event()
        controller = asyncio.ensure_future(
            Controller("toy", queue, reconcile, workers=3, informers=[informer]).run(
                controller_stop
            )
        )
        try:
            await lost.wait()
        finally:
            controller_stop.set()
            await controller
            log("unlead", identity, "-")

    elector = LeaderElector(
        KubeLeaseApi(client, namespace, "toy-controller"),
        LeaderElectionConfig(identity, lease_duration=6, renew_deadline=4, retry_period=1),
        on_started_leading=lead,
    )
    informer_task = asyncio.ensure_future(informer.run(stop))
    try:
        await informer.wait_for_sync(30)
        log("ready", identity, "-")
        await elector.run(stop)
    finally:
        stop.set()
        await informer_task
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--log", required=True, type=Path)
    args = parser.parse_args()
    asyncio.run(run(args.kubeconfig, args.namespace, args.identity, args.log))


if __name__ == "__main__":
    main()
