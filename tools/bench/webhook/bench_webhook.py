"""Webhook throughput and latency: AdmissionReviews/s and p50/p99, closed or open loop.

    uv run python tools/bench/webhook/bench_webhook.py [--concurrency 16] [--seconds 5]
    uv run python tools/bench/webhook/bench_webhook.py --rate 500 [--seconds 5]

virt-api's real app (VMI create validation with a valid VMI, VMI mutation, and VMI create
validation of an invalid VMI) next to a bare aiohttp route that echoes the request body,
served over loopback to an aiohttp client.

- Closed loop (default): one process, one event loop, `--concurrency` requests in flight.
  Prints each rate and its ratio to the echo route's.
- Open loop (`--rate N`): the server in its own process pinned to CPU 0, the load
  generator here pinned to CPU 1, sending N requests a second at fixed times whatever
  the answers do; each latency is measured from the request's planned send time, so a
  stalled server shows in it (no coordinated omission). Prints p50/p99 and the ratio of
  each p99 to the echo route's.

Never fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import time
from multiprocessing.connection import Connection
from typing import Any, cast

import aiohttp
from aiohttp import web
from kube_runtime import KubeClient
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app

VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "bench", "namespace": "default"},
    "spec": {
        "domain": {
            "devices": {
                "disks": [
                    {"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 1},
                    {"name": "cloudinit", "disk": {"bus": "virtio"}},
                ],
                "interfaces": [{"name": "default", "masquerade": {}}],
            },
            "cpu": {"cores": 2},
            "resources": {
                "requests": {"memory": "1Gi", "cpu": "1"},
                "limits": {"memory": "2Gi", "cpu": "2"},
            },
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {"name": "root", "containerDisk": {"image": "quay.io/kubevirt/fedora"}},
            {
                "name": "cloudinit",
                "cloudInitNoCloud": {"userData": "#cloud-config\npassword: fedora\n"},
            },
        ],
    },
}


def review(obj: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "bench",
                "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
                "resource": {
                    "group": "kubevirt.io",
                    "version": "v1",
                    "resource": "virtualmachineinstances",
                },
                "operation": "CREATE",
                "object": obj,
                "userInfo": {"username": "bench"},
            },
        }
    ).encode()


class _NoHandler:
    async def command(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("not used")

    async def guest_os_info(self, *args: Any) -> Any:
        raise RuntimeError("not used")

    async def open_stream(self, *args: Any) -> Any:
        raise RuntimeError("not used")

    async def agent_report(self, *args: Any) -> Any:
        raise RuntimeError("not used")

    async def screenshot(self, *args: Any) -> Any:
        raise RuntimeError("not used")


class _NoApi:
    """Stands in for kube_runtime's KubeClient: the benched webhooks never call the API."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"KubeClient.{name} is not used by the benched webhooks")


async def _echo(request: web.Request) -> web.Response:
    return web.json_response(await request.json())


async def measure(
    session: aiohttp.ClientSession, url: str, body: bytes, concurrency: int, seconds: float
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    headers = {"Content-Type": "application/json"}

    async def worker() -> None:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status}")
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(latencies) / (time.perf_counter() - started), latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _app() -> web.Application:
    async def config() -> ClusterConfig:
        return ClusterConfig()

    app = build_app(
        AdmissionContext(cluster_config=config),
        SubresourceContext(cast(KubeClient, _NoApi()), FrontProxyConfig(), _NoHandler()),
    )
    app.router.add_post("/echo", _echo)
    return app


async def _start(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


def _cases() -> list[tuple[str, str, bytes]]:
    invalid = json.loads(json.dumps(VMI))
    invalid["spec"]["domain"]["devices"]["disks"][0]["disk"]["bus"] = "ide"
    invalid["spec"]["hostname"] = "Not_Valid"
    return [
        ("echo (bare aiohttp route)", "/echo", review(VMI)),
        ("validate VMI create, allowed", "/virtualmachineinstances-validate-create", review(VMI)),
        (
            "validate VMI create, denied",
            "/virtualmachineinstances-validate-create",
            review(invalid),
        ),
        ("mutate VMI (defaults + JSON patch)", "/virtualmachineinstances-mutate", review(VMI)),
    ]


async def main(concurrency: int, seconds: float) -> None:
    runner, port = await _start(_app())
    base = f"http://127.0.0.1:{port}"
    print(
        f"concurrency {concurrency}, {seconds:.0f}s per case, one process ({os.cpu_count()} CPUs on the machine)"
    )
    print(f"{'case':38} {'reviews/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'vs echo':>8}")
    echo_rate = 0.0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        for name, path, body in _cases():
            await measure(session, base + path, body, concurrency, 0.5)  # warm up
            rate, latencies = await measure(session, base + path, body, concurrency, seconds)
            echo_rate = echo_rate or rate
            print(
                f"{name:38} {rate:10.0f} {pct(latencies, 0.5):8.2f} {pct(latencies, 0.99):8.2f} {rate / echo_rate:8.2f}"
            )
    await runner.cleanup()


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {cpu})


def _serve(conn: Connection) -> None:
    """The server process: virt-api's app and the echo route until told to stop."""
    _pin(0)

    async def serve() -> None:
        runner, port = await _start(_app())
        conn.send(port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await runner.cleanup()

    asyncio.run(serve())


async def open_loop(
    session: aiohttp.ClientSession, url: str, body: bytes, rate: float, seconds: float
) -> list[float]:
    """Latencies of `rate * seconds` requests sent at fixed times, from each planned time."""
    headers = {"Content-Type": "application/json"}
    start = time.perf_counter() + 0.05
    latencies: list[float] = []

    async def one(index: int) -> None:
        planned = start + index / rate
        await asyncio.sleep(max(0.0, planned - time.perf_counter()))
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{url}: HTTP {response.status}")
        latencies.append(time.perf_counter() - planned)

    await asyncio.gather(*(one(i) for i in range(int(rate * seconds))))
    return latencies


async def main_open_loop(rate: float, seconds: float) -> None:
    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(theirs,))
    server.start()
    try:
        port = await asyncio.get_running_loop().run_in_executor(None, ours.recv)
        _pin(1)
        base = f"http://127.0.0.1:{port}"
        print(
            f"open loop: {rate:.0f} reviews/s for {seconds:.0f}s per case; server on CPU 0, "
            f"load generator on CPU 1 ({os.cpu_count()} CPUs on the machine)"
        )
        print(f"{'case':38} {'p50 ms':>8} {'p99 ms':>8} {'p99 vs echo':>12}")
        echo_p99 = 0.0
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for name, path, body in _cases():
                await open_loop(session, base + path, body, rate, 0.5)  # warm up
                latencies = await open_loop(session, base + path, body, rate, seconds)
                p99 = pct(latencies, 0.99)
                echo_p99 = echo_p99 or p99
                print(f"{name:38} {pct(latencies, 0.5):8.2f} {p99:8.2f} {p99 / echo_p99:12.2f}")
    finally:
        ours.send("stop")
        server.join(10)
        if server.is_alive():
            server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="open loop: reviews per second (0: closed loop)"
    )
    args = parser.parse_args()
    if args.rate > 0:
        asyncio.run(main_open_loop(args.rate, args.seconds))
    else:
        asyncio.run(main(args.concurrency, args.seconds))
