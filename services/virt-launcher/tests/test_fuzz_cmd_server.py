"""The Cmd server fed malformed messages over its unix socket: every call gets an answer.

A compromised virt-handler (or anything that reaches the sockets dir) may send any bytes
as any method's request. Each call must end with a status; a request that decodes must
not end in UNKNOWN/INTERNAL (an exception our code did not mean); the server keeps
serving. FUZZ_GRPC sets the calls per run (default 300).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from grpclib.client import Channel
from grpclib.const import Status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from virt_domain import ConverterOptions
from virt_launcher import DomainManager, DomainReason, DomainState, DomainStatus
from virt_launcher.cmd_server import CmdService
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.dhcp import DhcpServers
from virt_launcher.identity import VmiIdentity, VmiUid
from virt_rpc import HandshakeService, HelloRequest, HelloResponse, serve_unix
from virt_rpc.rawcall import RawCodec, judge, malformed_requests, raw_unary, unary_methods, wire

CALLS = int(os.environ.get("FUZZ_GRPC", "300"))
STATUS = DomainStatus("ns_vm", "u", DomainState.RUNNING, DomainReason.BOOTED)
# Field 1 of every request is the VMI reference: this launcher's, so calls get past it.
REF = wire([(1, wire([(1, b"ns"), (2, b"vm"), (3, b"uid-1")]))])


class Manager:
    """A domain that answers every command."""

    async def sync(self, domain_xml: str) -> DomainStatus:
        return STATUS

    async def status(self) -> DomainStatus | None:
        return STATUS

    async def domain_xml(self) -> str | None:
        return "<domain type='qemu'><name>ns_vm</name></domain>"

    async def stats(self) -> tuple[dict[str, object], str] | None:
        return {"state.state": 1}, "<domain/>"

    async def hypervisor_version(self) -> str:
        return "7.2.0"

    async def command(self, *args: Any, **kwargs: Any) -> DomainStatus:
        return STATUS

    pause = unpause = reset = soft_reboot = kill = delete = shutdown = command


class Dhcp:
    async def ensure(self, vmi: Any, networks: Any) -> None:
        return None


def build(vmi: Mapping[str, Any], options: ConverterOptions) -> str:
    if vmi.get("spec", {}).get("bad"):
        raise VmiRejectedError("spec.bad", "must not be set")
    return "<domain/>"


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_malformed_requests_get_a_status_and_the_server_lives_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    cmd = CmdService(
        VmiIdentity("ns", "vm", VmiUid("uid-1")),
        cast(DomainManager, Manager()),
        build,
        default_grace_period=30,
        dhcp=cast(DhcpServers, Dhcp()),
    )
    cmd.mark_ready()
    hello = HandshakeService("virt-launcher", "test")
    methods = {**unary_methods(cmd), **unary_methods(hello)}
    directory = tempfile.mkdtemp(prefix="kv-fuzz-")  # short: a socket path fits 107 bytes
    path = Path(directory, "launcher-sock")

    async def start() -> tuple[Any, Channel]:
        return await serve_unix([cmd, hello], path), Channel(path=str(path), codec=RawCodec())

    server, channel = loop.run_until_complete(start())
    tally: dict[str, int] = {}
    bad: list[tuple[str, bytes, Any]] = []

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
    print(f"\nCmd server: {sum(tally.values())} malformed calls, by status {tally}", flush=True)
    assert not bad, bad
    assert alive.status is Status.OK
    assert HelloResponse.parse(alive.data).component == "virt-launcher"
