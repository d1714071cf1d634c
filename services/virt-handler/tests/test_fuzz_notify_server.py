"""The Notify server fed malformed messages over its unix socket: every call gets an answer.

The socket is in the launcher pod's sockets dir, so a compromised launcher may send any
bytes as a DomainEvent or a KubernetesEvent. Each call must end with a status; one that
decodes must not end in UNKNOWN/INTERNAL; nothing reaches the sink that is not this VMI's;
the server keeps serving. FUZZ_GRPC sets the calls per run (default 300).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from virt_handler import NotifyService, VmiIdentity
from virt_handler.notify import DomainSink
from virt_rpc import HandshakeService, HelloRequest, serve_unix
from virt_rpc.rawcall import RawCodec, judge, malformed_requests, raw_unary, unary_methods, wire

CALLS = int(os.environ.get("FUZZ_GRPC", "300"))
ME = VmiIdentity("ns", "vm", "11111111-1111-1111-1111-111111111111")
REF = wire([(1, wire([(1, b"ns"), (2, b"vm"), (3, ME.uid.encode())]))])


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_malformed_events_get_a_status_and_the_server_lives_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    seen: list[VmiIdentity] = []

    async def on_event(vmi: VmiIdentity, kind: str, reason: str, message: str) -> None:
        seen.append(vmi)

    notify = NotifyService(ME, DomainSink(lambda vmi, event: seen.append(vmi), on_event))
    hello = HandshakeService("virt-handler", "test")
    methods = {**unary_methods(notify), **unary_methods(hello)}
    directory = tempfile.mkdtemp(prefix="kv-fuzz-")  # short: a socket path fits 107 bytes
    path = Path(directory, "domain-notify-pipe.sock")

    async def start() -> tuple[Any, Channel]:
        return await serve_unix([notify, hello], path), Channel(path=str(path), codec=RawCodec())

    server, channel = loop.run_until_complete(start())
    tally: dict[str, int] = {}
    bad: list[tuple[str, bytes, str]] = []

    @settings(
        max_examples=CALLS, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(method=st.sampled_from(sorted(methods)), payload=malformed_requests(REF))
    def call(method: str, payload: bytes) -> None:
        reply = loop.run_until_complete(raw_unary(channel, method, payload))
        tally[reply.status.name] = tally.get(reply.status.name, 0) + 1
        why = judge(methods[method], payload, reply)
        if why is not None and len(bad) < 5:
            bad.append((method, payload, why))

    try:
        call()
        alive = loop.run_until_complete(
            raw_unary(
                channel, "/kubevirtpy.launcher.handshake.Handshake/Hello", bytes(HelloRequest())
            )
        )
    finally:
        channel.close()
        server.close()
        loop.run_until_complete(server.wait_closed())
        path.unlink(missing_ok=True)
        os.rmdir(directory)
    print(f"\nNotify server: {sum(tally.values())} malformed calls, by status {tally}", flush=True)
    assert not bad, bad
    assert alive.status is Status.OK
    assert all(vmi == ME for vmi in seen)
