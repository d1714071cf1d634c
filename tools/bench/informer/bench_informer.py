"""Informer throughput and memory: events/s and resident memory per cached object.

    uv run python tools/bench/informer/bench_informer.py [--counts 1000,10000] [--kubeconfig F]

Against a real API server (the local kv-cluster unless --kubeconfig/$KUBECONFIG say
otherwise) it creates N ConfigMaps in a scratch namespace, then measures
  - sync: paginated list into the cache (objects/s),
  - watch: N ADDED events replayed by the server's watch cache from a resourceVersion
    taken before the creates, through the reflector, store and a handler (events/s),
  - RSS per cached object (a fresh process's resident memory growth / N), with the
    objects as served and with metadata.managedFields dropped by a transform,
and, without any server, the same pipeline fed by an in-memory source (events/s).
Prints figures; never fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import secrets
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kube_runtime import (
    CONFIGMAPS,
    ClientSettings,
    ListPage,
    NullMetrics,
    ReflectorSettings,
    Resource,
    RestListWatch,
    SharedInformer,
    WatchEvent,
    connect,
    drop_managed_fields,
)
from kube_runtime.fakes import FakeListWatch

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def configmap(namespace: str, i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"bench-{i:05}",
            "namespace": namespace,
            "labels": {"app": "bench", "shard": str(i % 16)},
            "annotations": {"bench/created-by": "tools/bench/informer"},
        },
        "data": {"payload": "x" * 200, "index": str(i)},
    }


class ReplayFrom:
    """A source whose 'list' is empty at a fixed old version, so the watch replays all."""

    def __init__(self, inner: RestListWatch, resource_version: str) -> None:
        self.inner = inner
        self.resource_version = resource_version

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        return ListPage([], self.resource_version)

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        async with self.inner.watch(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        ) as events:
            yield events


async def wait_count(counter: list[int], target: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while counter[0] < target:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def bench_server(kubeconfig: Path, count: int) -> dict[str, Any]:
    writer = await connect(kubeconfig, settings=ClientSettings(qps=1000, burst=1000))
    reader = await connect(kubeconfig, settings=ClientSettings(qps=50, burst=100))
    namespace = f"bench-informer-{secrets.token_hex(3)}"
    result: dict[str, Any] = {"objects": count}
    try:
        await writer.create(NAMESPACES, {"metadata": {"name": namespace}})
        before = (await writer.list(CONFIGMAPS, namespace, limit=1))["metadata"]["resourceVersion"]
        gate = asyncio.Semaphore(48)

        async def create(i: int) -> None:
            async with gate:
                await writer.create(CONFIGMAPS, configmap(namespace, i))

        t0 = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        result["create_per_s"] = count / (time.perf_counter() - t0)
        served = await writer.get(CONFIGMAPS, "bench-00000", namespace)
        result["json_bytes_per_object"] = len(json.dumps(served, separators=(",", ":")))

        # Sync and memory, measured in fresh processes so one run's heap cannot hide another's.
        for label, extra in (("", []), ("_stripped", ["--drop-managed-fields"])):
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--sync-child",
                namespace,
                "--kubeconfig",
                str(kubeconfig),
                "--counts",
                str(count),
                *extra,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await child.communicate()
            figures = json.loads(out.decode().strip().splitlines()[-1])
            for key, value in figures.items():
                result[key + label] = value

        # Watch: the server replays every ADDED since `before` through the whole pipeline.
        seen = [0]
        replay: SharedInformer[Any] = SharedInformer(
            ReplayFrom(
                RestListWatch(reader, CONFIGMAPS, namespace=namespace, label_selector="app=bench"),
                before,
            )
        )
        replay.add_handler(lambda e: seen.__setitem__(0, seen[0] + 1))
        stop = asyncio.Event()
        t0 = time.perf_counter()
        task = asyncio.ensure_future(replay.run(stop))
        if await wait_count(seen, count, 300) and replay.reflector.stats.relists_on_expired == 0:
            result["watch_events_per_s"] = count / (time.perf_counter() - t0)
        else:
            result["watch_events_per_s"] = None  # history already outside the watch cache
        stop.set()
        await task
    finally:
        with contextlib.suppress(Exception):
            await writer.request(
                "DELETE", NAMESPACES.path(None, namespace), verb="delete", resource="namespaces"
            )
        await writer.close()
        await reader.close()
    return result


async def sync_child(kubeconfig: Path, namespace: str, count: int, drop: bool) -> None:
    """Runs in a child process: sync an informer, print sync time and RSS growth as JSON."""
    reader = await connect(kubeconfig, settings=ClientSettings(qps=50, burst=100))
    gc.collect()
    rss0 = rss_bytes()
    informer: SharedInformer[Any] = SharedInformer(
        RestListWatch(reader, CONFIGMAPS, namespace=namespace, label_selector="app=bench"),
        reflector_settings=ReflectorSettings(page_size=500),
        transform=drop_managed_fields if drop else None,
    )
    stop = asyncio.Event()
    t0 = time.perf_counter()
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(300)
    sync_s = time.perf_counter() - t0
    gc.collect()
    rss_per_object = (rss_bytes() - rss0) / count
    assert len(informer.store) == count, len(informer.store)
    stop.set()
    await task
    await reader.close()
    print(json.dumps({"sync_s": sync_s, "rss_per_object": rss_per_object}))


async def bench_in_memory(count: int) -> float:
    """Events/s through reflector + store + handler with no network (an in-memory source)."""
    source = FakeListWatch()
    informer: SharedInformer[Any] = SharedInformer(source)
    seen = [0]
    informer.add_handler(lambda e: seen.__setitem__(0, seen[0] + 1))
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(10)
    while source.open_streams == 0:
        await asyncio.sleep(0)  # the reflector opens its watch on the next turns
        assert not task.done()
    t0 = time.perf_counter()
    for i in range(count):
        source.create(f"cm-{i:05}", payload="x" * 200, index=str(i))
    await wait_count(seen, count, 120)
    elapsed = time.perf_counter() - t0
    stop.set()
    await task
    return count / elapsed


def default_kubeconfig() -> Path:
    if os.environ.get("KUBECONFIG"):
        return Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    from kv_cluster import Cluster

    path = Cluster.from_env().kubeconfig
    if not path.exists():
        sys.exit(
            f"no cluster: run `uv run kv-cluster up` (or pass --kubeconfig); {path} is missing"
        )
    return path


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,10000")
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--in-memory-only", action="store_true")
    parser.add_argument("--sync-child", metavar="NAMESPACE", help=argparse.SUPPRESS)
    parser.add_argument("--drop-managed-fields", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    if args.sync_child:
        await sync_child(args.kubeconfig, args.sync_child, counts[0], args.drop_managed_fields)
        return
    _ = NullMetrics  # the default InMemoryMetrics registry is part of what is measured

    for count in counts:
        rate = await bench_in_memory(count)
        print(f"in-memory source  {count:>6} objects: {rate:>9.0f} events/s", flush=True)
    if args.in_memory_only:
        return
    kubeconfig = args.kubeconfig or default_kubeconfig()
    print(f"API server via {kubeconfig}")
    header = (
        f"{'objects':>8} {'create/s':>9} {'sync s':>7} {'sync obj/s':>11} "
        f"{'watch ev/s':>11} {'RSS/object':>11} {'(no mgdFields)':>15} {'JSON/object':>12} "
        f"{'RSS:JSON':>9}"
    )
    print(header)
    for count in counts:
        r = await bench_server(kubeconfig, count)
        watch = f"{r['watch_events_per_s']:.0f}" if r["watch_events_per_s"] else "expired"
        print(
            f"{r['objects']:>8} {r['create_per_s']:>9.0f} {r['sync_s']:>7.2f} "
            f"{count / r['sync_s']:>11.0f} {watch:>11} "
            f"{r['rss_per_object'] / 1024:>8.2f}KiB {r['rss_per_object_stripped'] / 1024:>12.2f}KiB "
            f"{r['json_bytes_per_object']:>10}B "
            f"{r['rss_per_object'] / r['json_bytes_per_object']:>8.1f}x",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
