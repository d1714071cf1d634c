"""The per-pod Notify service accepts only its own VMI's events, in order."""

from __future__ import annotations

import grpclib
import pytest
from virt_handler import NotifyService, VmiIdentity
from virt_handler.notify import DomainSink
from virt_rpc import (
    Domain,
    DomainEvent,
    DomainEventType,
    DomainState,
    KubernetesEvent,
    KubernetesEventType,
    VmiRef,
)

ME = VmiIdentity("ns", "vm", "11111111-1111-1111-1111-111111111111")


def _service() -> tuple[NotifyService, list[DomainEvent], list[tuple[str, str, str]]]:
    domains: list[DomainEvent] = []
    notices: list[tuple[str, str, str]] = []

    async def on_event(vmi: VmiIdentity, kind: str, reason: str, message: str) -> None:
        notices.append((kind, reason, message))

    sink = DomainSink(lambda vmi, event: domains.append(event), on_event)
    return NotifyService(ME, sink), domains, notices


def _event(seq: int, ref: VmiRef | None = None) -> DomainEvent:
    return DomainEvent(
        vmi=ref or VmiRef(namespace=ME.namespace, name=ME.name, uid=ME.uid),
        type=DomainEventType.MODIFIED,
        domain=Domain(name="ns_vm", state=DomainState.RUNNING),
        sequence=seq,
    )


async def test_events_of_another_vmi_are_refused() -> None:
    service, domains, _ = _service()
    other = VmiRef(namespace="ns", name="vm", uid="22222222-2222-2222-2222-222222222222")
    with pytest.raises(grpclib.GRPCError, match="this socket serves ns/vm"):
        await service.handle_domain_event(_event(1, other))
    assert domains == []


async def test_repeated_or_reordered_events_are_dropped() -> None:
    service, domains, _ = _service()
    for seq in (2, 3, 3, 2, 4):
        await service.handle_domain_event(_event(seq))
    assert [e.sequence for e in domains] == [2, 3, 4]


async def test_a_restarted_launcher_counts_from_one_again() -> None:
    service, domains, _ = _service()
    await service.handle_domain_event(_event(7))
    await service.handle_domain_event(_event(1))
    assert [e.sequence for e in domains] == [7, 1]


async def test_kubernetes_events_need_a_camel_case_reason() -> None:
    service, _, notices = _service()
    ref = VmiRef(namespace=ME.namespace, name=ME.name, uid=ME.uid)
    await service.handle_kubernetes_event(
        KubernetesEvent(vmi=ref, type=KubernetesEventType.WARNING, reason="Oops", message="m")
    )
    assert notices == [("Warning", "Oops", "m")]
    with pytest.raises(grpclib.GRPCError, match="reason"):
        await service.handle_kubernetes_event(
            KubernetesEvent(vmi=ref, type=KubernetesEventType.NORMAL, reason="no spaces!")
        )
