"""virt-launcher as a process, driven the way virt-handler drives it.

A real libvirtd (session mode, unprivileged) and QEMU under TCG boot the tiny
guest from a kernelBoot VMI; the test reads the guest's marker from the serial
console socket and checks every command's Notify events. The launcher runs with
blocking-call detection on, and so does this test process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from virt_rpc import (
    DomainEvent,
    DomainEventType,
    DomainReason,
    DomainState,
    GetDomainRequest,
    GetDomainStatsRequest,
    GetQemuVersionRequest,
    KubernetesEvent,
    PingRequest,
    ShutdownRequest,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def domain_is(state: DomainState, reason: DomainReason | None = None) -> Callable[[Any], bool]:
    def matches(item: Any) -> bool:
        return (
            isinstance(item, DomainEvent)
            and item.domain is not None
            and item.domain.state == state
            and (reason is None or item.domain.reason == reason)
        )

    return matches


def sync_request(launcher: Any, **spec: Any) -> SyncVirtualMachineRequest:
    return SyncVirtualMachineRequest(
        vmi=launcher.ref,
        vmi_json=launcher.vmi_json(**spec),
        options=SyncOptions(use_emulation=True, serial_console_log=True),
    )


async def boot(launcher: Any, serial_reader: Callable[..., Any], marker: str) -> None:
    """Have a running guest: left running by an earlier test, or synced and booted now."""
    current = await launcher.cmd.get_domain(GetDomainRequest())
    if current.domain is not None and current.domain.state == DomainState.PAUSED:
        await launcher.cmd.unpause(VmiRequest(vmi=launcher.ref))
        return
    if current.domain is not None and current.domain.state == DomainState.RUNNING:
        return
    reply = await launcher.cmd.sync_virtual_machine(sync_request(launcher))
    assert reply.domain is not None
    assert reply.domain.state == DomainState.RUNNING
    await serial_reader(launcher.serial_socket, marker)


async def test_qemu_is_probed_before_the_first_sync(launcher: Any) -> None:
    # libvirt caches a probed emulator's capabilities in the launcher's libvirt dir; the
    # launcher asks for them once connected, so the first define need not wait for QEMU.
    cache = launcher.base / "lv" / "cache" / "libvirt" / "qemu" / "cache" / "capabilities"
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(lambda: any(cache.glob("*.xml"))):
        assert time.monotonic() < deadline, f"no probed capabilities in {cache} within 60s"
        await asyncio.sleep(0.05)
    current = await launcher.cmd.get_domain(GetDomainRequest())
    assert current.domain is None, "the probe ran before any domain was defined"
    # `python -m virt_launcher` started libvirtd and the probe before its own imports.
    while (probed := await asyncio.to_thread(_logged, launcher.log, "emulator probed")) is None:
        assert time.monotonic() < deadline, "the launcher never logged its probe"
        await asyncio.sleep(0.05)
    assert probed.get("head_start_error") is None
    assert isinstance(probed.get("head_start"), float), probed


def _logged(log: Path, message: str) -> dict[str, Any] | None:
    """The first JSON log line of ``log`` with this message."""
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("msg") == message:
                return entry
    return None


async def test_sync_boots_the_guest_to_its_marker(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await launcher.cmd.ping(PingRequest())
    launcher.notify.forget()

    reply = await launcher.cmd.sync_virtual_machine(sync_request(launcher))

    assert reply.domain.name == "default_tiny"
    assert reply.domain.state == DomainState.RUNNING
    console = await serial_reader(launcher.serial_socket, tiny_guest.marker)
    assert tiny_guest.marker in console
    added, _ = await launcher.notify.expect(
        lambda i: isinstance(i, DomainEvent) and i.type == DomainEventType.ADDED
    )
    assert added.vmi.uid == launcher.uid
    started, _ = await launcher.notify.expect(domain_is(DomainState.RUNNING, DomainReason.BOOTED))
    assert started.sequence > added.sequence
    # A second sync of the unchanged VMI leaves the running guest alone.
    again = await launcher.cmd.sync_virtual_machine(sync_request(launcher))
    assert again.domain.uuid == reply.domain.uuid
    assert again.domain.state == DomainState.RUNNING


async def test_a_running_guest_reports_statistics_and_qemu_version(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)

    reply = await launcher.cmd.get_domain_stats(GetDomainStatsRequest())
    version = await launcher.cmd.get_qemu_version(GetQemuVersionRequest())

    assert reply.stats is not None
    assert reply.stats.cpu_time_ns > 0
    assert [v.id for v in reply.stats.vcpus] == [0]
    assert reply.stats.memory is not None
    assert reply.stats.memory.actual_balloon_kib == 128 * 1024
    assert version.version.count(".") == 2
    assert version.version.split(".")[0].isdigit()


async def test_pause_and_unpause_are_notified(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    launcher.notify.forget()

    paused = await launcher.cmd.pause(VmiRequest(vmi=launcher.ref))
    assert paused.domain.state == DomainState.PAUSED
    await launcher.notify.expect(domain_is(DomainState.PAUSED, DomainReason.USER))

    resumed = await launcher.cmd.unpause(VmiRequest(vmi=launcher.ref))
    assert resumed.domain.state == DomainState.RUNNING
    await launcher.notify.expect(domain_is(DomainState.RUNNING, DomainReason.UNPAUSED))


async def test_shutdown_powers_the_guest_off_through_acpi(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    launcher.notify.forget()

    await launcher.cmd.shutdown(ShutdownRequest(vmi=launcher.ref, grace_period_seconds=120))

    stopped, before = await launcher.notify.expect(domain_is(DomainState.SHUTOFF), within=120)
    assert stopped.domain.reason == DomainReason.GUEST_SHUTDOWN
    assert not [i for i in before if isinstance(i, KubernetesEvent)]


async def test_reset_reboots_the_guest_without_a_stop(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    launcher.notify.forget()

    reply = await launcher.cmd.reset(VmiRequest(vmi=launcher.ref))

    assert reply.domain.state == DomainState.RUNNING
    # The guest boots again: its marker shows up once more on the console.
    await serial_reader(launcher.serial_socket, tiny_guest.marker)
    await launcher.cmd.pause(VmiRequest(vmi=launcher.ref))
    _, before = await launcher.notify.expect(domain_is(DomainState.PAUSED))
    assert not [i for i in before if domain_is(DomainState.SHUTOFF)(i)]
    await launcher.cmd.unpause(VmiRequest(vmi=launcher.ref))


async def test_soft_reboot_restarts_the_guest_without_a_stop(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    launcher.notify.forget()

    await launcher.cmd.soft_reboot(VmiRequest(vmi=launcher.ref))

    # The guest powers off on the ACPI button; libvirt starts it again in place.
    await serial_reader(launcher.serial_socket, tiny_guest.marker)
    await launcher.cmd.pause(VmiRequest(vmi=launcher.ref))
    _, before = await launcher.notify.expect(domain_is(DomainState.PAUSED))
    assert not [i for i in before if domain_is(DomainState.SHUTOFF)(i)]
    await launcher.cmd.unpause(VmiRequest(vmi=launcher.ref))


async def test_kill_is_notified(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    launcher.notify.forget()

    killed = await launcher.cmd.kill(VmiRequest(vmi=launcher.ref))

    assert killed.domain.state == DomainState.SHUTOFF
    await launcher.notify.expect(domain_is(DomainState.SHUTOFF, DomainReason.DESTROYED))


async def test_a_guest_that_ignores_shutdown_is_destroyed_after_the_grace_period(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    current = await launcher.cmd.get_domain(GetDomainRequest())
    if current.domain is not None and current.domain.state != DomainState.SHUTOFF:
        await launcher.cmd.kill(VmiRequest(vmi=launcher.ref))
    # Without ACPI the guest has no power button: it cannot obey a shutdown.
    request = sync_request(launcher)
    vmi = launcher.vmi()
    vmi["spec"]["domain"]["firmware"]["kernelBoot"]["kernelArgs"] += " acpi=off"
    request.vmi_json = json.dumps(vmi)
    await launcher.cmd.sync_virtual_machine(request)
    await serial_reader(launcher.serial_socket, tiny_guest.marker)
    launcher.notify.forget()

    await launcher.cmd.shutdown(ShutdownRequest(vmi=launcher.ref, grace_period_seconds=3))

    notice, _ = await launcher.notify.expect(lambda i: isinstance(i, KubernetesEvent))
    assert notice.reason == "ShutdownGracePeriodExceeded"
    await launcher.notify.expect(domain_is(DomainState.SHUTOFF, DomainReason.DESTROYED))


async def test_a_paused_guest_cannot_be_shut_down_gracefully(
    launcher: Any, serial_reader: Callable[..., Any], tiny_guest: Any
) -> None:
    await boot(launcher, serial_reader, tiny_guest.marker)
    await launcher.cmd.pause(VmiRequest(vmi=launcher.ref))

    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.shutdown(ShutdownRequest(vmi=launcher.ref, grace_period_seconds=30))

    assert refused.value.status is Status.FAILED_PRECONDITION
    assert "paused" in str(refused.value.message)
    await launcher.cmd.unpause(VmiRequest(vmi=launcher.ref))


async def test_requests_for_another_vmi_are_refused(launcher: Any) -> None:
    other = VmiRef(namespace="default", name="tiny", uid="00000000-0000-0000-0000-000000000000")

    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.pause(VmiRequest(vmi=other))

    assert refused.value.status is Status.FAILED_PRECONDITION
    assert launcher.uid in str(refused.value.message)


async def test_a_vmi_that_cannot_be_converted_is_refused_with_its_field_path(
    launcher: Any,
) -> None:
    request = sync_request(launcher)
    vmi = launcher.vmi()
    vmi["spec"]["domain"]["firmware"]["kernelBoot"]["container"]["kernelPath"] = "../vmlinuz"
    request.vmi_json = json.dumps(vmi)

    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.sync_virtual_machine(request)

    assert refused.value.status is Status.INVALID_ARGUMENT
    assert "spec.domain.firmware.kernelBoot.container.kernelPath" in str(refused.value.message)


async def test_malformed_json_is_refused(launcher: Any) -> None:
    request = sync_request(launcher)
    request.vmi_json = "{not json"

    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.sync_virtual_machine(request)

    assert refused.value.status is Status.INVALID_ARGUMENT
    assert "vmi_json" in str(refused.value.message)
