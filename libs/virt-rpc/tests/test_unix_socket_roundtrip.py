"""Real calls over a unix socket: generated stubs against generated bases via grpclib."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path

import grpclib
import pytest
import virt_rpc
from grpclib.const import Status
from virt_rpc import (
    CmdBase,
    CmdStub,
    Domain,
    DomainEvent,
    DomainEventType,
    DomainReason,
    DomainResponse,
    DomainState,
    GetDomainRequest,
    KubernetesEvent,
    KubernetesEventType,
    NotifyBase,
    NotifyResponse,
    NotifyStub,
    PingRequest,
    PingResponse,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
)

VMI = VmiRef(namespace="default", name="testvmi", uid="0f6a-uid")


class OneGuestLauncher(CmdBase):
    """A launcher stand-in holding one domain in memory."""

    def __init__(self) -> None:
        self.domain: Domain | None = None
        self.options: SyncOptions | None = None

    def _check(self, ref: VmiRef | None) -> None:
        if ref is None or ref.uid != VMI.uid:
            raise grpclib.GRPCError(Status.FAILED_PRECONDITION, "vmi.uid: not the VMI served here")

    async def sync_virtual_machine(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        self._check(message.vmi)
        vmi = json.loads(message.vmi_json)
        self.options = message.options
        self.domain = Domain(
            name=f"{vmi['metadata']['namespace']}_{vmi['metadata']['name']}",
            state=DomainState.RUNNING,
            reason=DomainReason.BOOTED,
        )
        return DomainResponse(domain=self.domain)

    async def pause(self, message: VmiRequest) -> DomainResponse:
        self._check(message.vmi)
        if self.domain is None:
            raise grpclib.GRPCError(Status.FAILED_PRECONDITION, "no domain to pause")
        self.domain.state, self.domain.reason = DomainState.PAUSED, DomainReason.USER
        return DomainResponse(domain=self.domain)

    async def get_domain(self, message: GetDomainRequest) -> DomainResponse:
        return DomainResponse(domain=self.domain)

    async def ping(self, message: PingRequest) -> PingResponse:
        return PingResponse()


class RecordingHandler(NotifyBase):
    def __init__(self) -> None:
        self.events: list[DomainEvent | KubernetesEvent] = []

    async def handle_domain_event(self, message: DomainEvent) -> NotifyResponse:
        self.events.append(message)
        return NotifyResponse()

    async def handle_kubernetes_event(self, message: KubernetesEvent) -> NotifyResponse:
        self.events.append(message)
        return NotifyResponse()


async def test_cmd_calls_reach_the_launcher_and_answer(sock_dir: Path, no_blocking: None) -> None:
    launcher = OneGuestLauncher()
    path = sock_dir / "launcher-sock"
    server = await virt_rpc.serve_unix([launcher], path)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            cmd = CmdStub(channel, timeout=5)
            assert await cmd.ping(PingRequest()) == PingResponse()
            assert (await cmd.get_domain(GetDomainRequest())).domain is None

            vmi_json = json.dumps({"metadata": {"namespace": "default", "name": "testvmi"}})
            synced = await cmd.sync_virtual_machine(
                SyncVirtualMachineRequest(
                    vmi=VMI, vmi_json=vmi_json, options=SyncOptions(use_emulation=True)
                )
            )
            assert synced.domain is not None
            assert synced.domain.name == "default_testvmi"
            assert synced.domain.state is DomainState.RUNNING
            assert launcher.options == SyncOptions(use_emulation=True)

            paused = await cmd.pause(VmiRequest(vmi=VMI))
            assert paused.domain is not None
            assert (paused.domain.state, paused.domain.reason) == (
                DomainState.PAUSED,
                DomainReason.USER,
            )
            current = await cmd.get_domain(GetDomainRequest())
            assert current.domain is not None
            assert current.domain.state is DomainState.PAUSED
    finally:
        server.close()
        await server.wait_closed()


async def test_errors_arrive_as_grpc_status_with_message(sock_dir: Path, no_blocking: None) -> None:
    server = await virt_rpc.serve_unix([OneGuestLauncher()], sock_dir / "launcher-sock")
    try:
        async with await virt_rpc.open_channel(sock_dir / "launcher-sock") as channel:
            cmd = CmdStub(channel, timeout=5)
            other = VmiRef(namespace="default", name="testvmi", uid="someone-else")
            with pytest.raises(grpclib.GRPCError) as err:
                await cmd.pause(VmiRequest(vmi=other))
            assert err.value.status is Status.FAILED_PRECONDITION
            assert err.value.message == "vmi.uid: not the VMI served here"
            # A call the launcher does not implement says so instead of hanging.
            with pytest.raises(grpclib.GRPCError) as err:
                await cmd.kill(VmiRequest(vmi=VMI))
            assert err.value.status is Status.UNIMPLEMENTED
    finally:
        server.close()
        await server.wait_closed()


async def test_notify_carries_domain_and_kubernetes_events(
    sock_dir: Path, no_blocking: None
) -> None:
    handler = RecordingHandler()
    path = sock_dir / "notify-sock"
    server = await virt_rpc.serve_unix([handler], path)
    when = datetime.datetime(2026, 11, 29, 21, 0, 0, 123000, tzinfo=datetime.UTC)
    try:
        async with await virt_rpc.open_channel(path) as channel:
            notify = NotifyStub(channel, timeout=5)
            await asyncio.gather(
                notify.handle_domain_event(
                    DomainEvent(
                        vmi=VMI,
                        type=DomainEventType.MODIFIED,
                        domain=Domain(
                            name="default_testvmi",
                            state=DomainState.SHUTOFF,
                            reason=DomainReason.DESTROYED,
                        ),
                        time=when,
                        sequence=7,
                    )
                ),
                notify.handle_kubernetes_event(
                    KubernetesEvent(
                        vmi=VMI,
                        type=KubernetesEventType.WARNING,
                        reason="ShutdownGracePeriodExceeded",
                        message="guest did not power off in 30s",
                    )
                ),
            )
    finally:
        server.close()
        await server.wait_closed()
    domain_events = [e for e in handler.events if isinstance(e, DomainEvent)]
    k8s_events = [e for e in handler.events if isinstance(e, KubernetesEvent)]
    assert len(domain_events) == 1
    assert len(k8s_events) == 1
    event = domain_events[0]
    assert event.domain is not None
    assert (event.type, event.domain.state, event.domain.reason, event.sequence) == (
        DomainEventType.MODIFIED,
        DomainState.SHUTOFF,
        DomainReason.DESTROYED,
        7,
    )
    assert event.time == when
    assert k8s_events[0].type is KubernetesEventType.WARNING
    assert k8s_events[0].reason == "ShutdownGracePeriodExceeded"
