"""Live migration between two real launchers on this machine, as between two pods.

Each launcher runs in a mount namespace of its own where its directories are the pod's
(/var/run/kubevirt, /var/run/libvirt ...), so the domain XML names the same paths on
both sides. A plain unix relay plays virt-handler's proxy (test code only, no TLS): it
listens on the source pod's migration proxy sockets and connects each connection to the
target pod's libvirt socket or QEMU's incoming stream sockets, through
``/proc/<target launcher>/root``, as the handler does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from kubevirt_api.migrations import FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION
from virt_domain import read_iso
from virt_domain.launcher_pod import (
    LIBVIRT_RUNTIME,
    LIBVIRT_SOCKET,
    MIGRATION_BLOCK_PORT,
    MIGRATION_MEMORY_PORT,
    MIGRATION_PROXY_DIR,
    PUBLIC,
    migration_proxy_socket,
)
from virt_rpc import (
    DomainEvent,
    DomainReason,
    DomainState,
    GetDomainRequest,
    MigrateRequest,
    MigrationAbortStatus,
    MigrationMode,
    MigrationOptions,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRequest,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

GUEST_TICK_ARG = "kvpy.tick"
GUEST_TICK = "KUBEVIRT-PY-GUEST-UPTIME"
QEMU_UID = 107
CLOUD_INIT_ISO = "private/cloud-init/default/tiny/noCloud.iso"
DISK_IMAGE = "public/container-disks/disk0/disk.img"
OVERLAY = "ephemeral/disk-data/disk0/disk.qcow2"
EMPTY_DISK = "ephemeral/empty-disks/scratch.qcow2"


def _vmi(launcher: Any, annotations: dict[str, str] | None = None) -> str:
    body: dict[str, Any] = launcher.vmi()
    spec = body["spec"]
    kernel = spec["domain"]["firmware"]["kernelBoot"]
    kernel["kernelArgs"] += f" {GUEST_TICK_ARG}"
    spec["domain"]["devices"]["disks"] = [
        {"name": "disk0", "disk": {"bus": "virtio"}},
        {"name": "scratch", "disk": {"bus": "virtio"}},
        {"name": "cloudinit", "disk": {"bus": "virtio"}},
    ]
    spec["volumes"] = [
        {"name": "disk0", "containerDisk": {"image": "localhost/kubevirt-py/disk:latest"}},
        {"name": "scratch", "emptyDisk": {"capacity": "16Mi"}},
        {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\nhostname: t\n"}},
    ]
    if annotations:
        body["metadata"]["annotations"] = annotations
    return json.dumps(body)


def _sync(launcher: Any, vmi_json: str) -> SyncVirtualMachineRequest:
    return SyncVirtualMachineRequest(
        vmi=launcher.ref, vmi_json=vmi_json, options=SyncOptions(use_emulation=True)
    )


def _write_container_disk(base: Path) -> None:
    # What the containerDisk's init container copies into the pod: the same in both.
    image = base / DISK_IMAGE
    image.parent.mkdir(parents=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "8M"], check=True)
    for path in (image.parent, image):
        os.chown(path, QEMU_UID, QEMU_UID)


@dataclass
class Relay:
    """virt-handler's migration proxy without TLS: source pod's sockets -> target pod's."""

    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    bytes_to_target: dict[int, int] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def close(self) -> None:
        for server in self.servers:
            server.close()
        for task in self.tasks:
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: Callable[[int], None]
) -> None:
    try:
        while chunk := await reader.read(256 * 1024):
            count(len(chunk))
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


def _acceptor(
    relay: Relay, port: int, destination: Path
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
    """Handle one connection to the proxy socket of ``port``: pipe it to ``destination``."""

    def count(n: int) -> None:
        relay.bytes_to_target[port] += n

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.open_unix_connection(str(destination))
        except OSError as exc:
            print(f"relay: cannot reach {destination}: {exc}")
            writer.close()
            return
        for task in (
            asyncio.create_task(_pipe(reader, far_writer, count)),
            asyncio.create_task(_pipe(far_reader, writer, lambda n: None)),
        ):
            relay.tasks.add(task)
            task.add_done_callback(relay.tasks.discard)

    return accept


def _prepare_proxy_dir(path: Path) -> None:
    path.mkdir(exist_ok=True)
    os.chown(path, QEMU_UID, QEMU_UID)


def _chown_socket(path: Path) -> None:
    os.chown(path, QEMU_UID, QEMU_UID)


def _inside(pid: int, path: str) -> Path:
    """``path`` as process ``pid`` sees it, through /proc/<pid>/root.

    An absolute symlink met on the way (/var/run -> /run) would resolve against *our*
    root, not the process's; each one is followed inside its root instead.
    """
    root = Path(f"/proc/{pid}/root")
    resolved = root
    parts = [p for p in path.split("/") if p]
    hops = 0
    while parts:
        candidate = resolved / parts.pop(0)
        if candidate.is_symlink() and hops < 16:
            hops += 1
            link = os.readlink(candidate)
            parts[:0] = [p for p in link.split("/") if p]
            if link.startswith("/"):
                resolved = root
            continue
        resolved = candidate
    return resolved


async def start_relay(source: Any, target: Any, migration_uid: str) -> Relay:
    """Listen on the source pod's proxy sockets; relay each connection to the target pod."""
    relay = Relay()
    proxy_dir = source.base / "public" / MIGRATION_PROXY_DIR
    await asyncio.to_thread(_prepare_proxy_dir, proxy_dir)
    pid = target.process.pid
    libvirt_dir = await asyncio.to_thread(_inside, pid, LIBVIRT_RUNTIME.mount_path)
    target_proxy_dir = await asyncio.to_thread(
        _inside, pid, posixpath.join(PUBLIC.mount_path, MIGRATION_PROXY_DIR)
    )
    destinations = {
        0: libvirt_dir / LIBVIRT_SOCKET,
        MIGRATION_MEMORY_PORT: target_proxy_dir
        / migration_proxy_socket(migration_uid, MIGRATION_MEMORY_PORT),
        MIGRATION_BLOCK_PORT: target_proxy_dir
        / migration_proxy_socket(migration_uid, MIGRATION_BLOCK_PORT),
    }
    for port, destination in destinations.items():
        relay.bytes_to_target[port] = 0
        path = proxy_dir / migration_proxy_socket(migration_uid, port)
        accept = _acceptor(relay, port, destination)
        relay.servers.append(await asyncio.start_unix_server(accept, str(path)))
        await asyncio.to_thread(_chown_socket, path)
    return relay


def _migration_of(item: Any) -> Any:
    return item.domain.migration if isinstance(item, DomainEvent) and item.domain else None


async def _last_tick(launcher: Any, serial_reader: Callable[..., Any]) -> float:
    """The guest's uptime as it printed it last (a whole tick line, read afresh)."""
    for _ in range(10):
        text = await serial_reader(launcher.serial_socket, GUEST_TICK, within=60)
        ticks = re.findall(rf"{GUEST_TICK} ([0-9.]+) ", text)
        if ticks:
            return float(ticks[-1])
    pytest.fail(f"no whole uptime line on {launcher.serial_socket}")


async def _uptime_after(
    launcher: Any, serial_reader: Callable[..., Any], earlier: float, within: float = 60
) -> float:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        uptime = await _last_tick(launcher, serial_reader)
        if uptime > earlier:
            return uptime
    pytest.fail(f"the guest's uptime did not pass {earlier}s within {within}s")


# These tests end while the guest may still be booting: an ACPI power-off sent then goes
# unheard, so each launcher's stop would sit out a 30 s grace period before destroying it.
_GRACE_PERIOD = 3


async def _two_launchers(start: Callable[..., Any]) -> tuple[Any, Any]:
    uid = str(uuid.uuid4())
    source = await start(pod_paths=True, uid=uid, grace_period=_GRACE_PERIOD)
    target = await start(pod_paths=True, uid=uid, grace_period=_GRACE_PERIOD)
    for launcher in (source, target):
        await asyncio.to_thread(_write_container_disk, launcher.base)
    return source, target


def _migrate(source: Any, vmi_json: str, migration_uid: str, **options: Any) -> MigrateRequest:
    """A block migration with upstream's default timeouts unless ``options`` say others."""
    settings: dict[str, Any] = {
        "block_migration": True,
        "progress_timeout_seconds": 150,
        "completion_timeout_per_gib": 150,
        **options,
    }
    return MigrateRequest(
        vmi=source.ref,
        vmi_json=vmi_json,
        options=MigrationOptions(migration_uid=migration_uid, **settings),
    )


async def _finished(launcher: Any, within: float) -> tuple[Any, list[Any]]:
    """The first Notify event whose migration has its end, and the events before it."""
    return await launcher.notify.expect(
        lambda item: (m := _migration_of(item)) is not None and m.end_timestamp is not None,
        within=within,
    )


async def _ready_pair(start: Callable[..., Any]) -> tuple[Any, str, Relay]:
    """A running source, a prepared target and the relay between them: (source, VMI, relay);
    the target is `source.extra["target"]`."""
    source, target = await _two_launchers(start)
    vmi_json = _vmi(source)
    await source.cmd.sync_virtual_machine(_sync(source, vmi_json))
    await target.cmd.prepare_migration_target(_sync(target, vmi_json))
    migration_uid = str(uuid.uuid4())
    source.extra["migration_uid"] = migration_uid
    source.extra["target"] = target
    return source, vmi_json, await start_relay(source, target, migration_uid)


async def test_a_running_guest_moves_to_the_target_with_its_local_disks(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
) -> None:
    start, _stop = launcher_control
    source, target = await _two_launchers(start)
    vmi_json = _vmi(source)
    reply = await source.cmd.sync_virtual_machine(_sync(source, vmi_json))
    assert reply.domain.state == DomainState.RUNNING
    before = await _last_tick(source, serial_reader)

    # The target defines nothing; it writes the local disks' files at the same paths:
    # the overlay, the emptyDisk, and a blank cloud-init ISO of the source's size.
    prepared = await target.cmd.prepare_migration_target(_sync(target, vmi_json))
    assert prepared.domain is None
    source_iso = await asyncio.to_thread((source.base / CLOUD_INIT_ISO).read_bytes)
    blank_iso = await asyncio.to_thread((target.base / CLOUD_INIT_ISO).read_bytes)
    assert len(blank_iso) == len(source_iso)
    assert blank_iso.count(0) == len(blank_iso)
    for path in (OVERLAY, EMPTY_DISK):
        assert await asyncio.to_thread((target.base / path).exists), path
    proxy_dir = await asyncio.to_thread(os.stat, target.base / "public" / MIGRATION_PROXY_DIR)
    assert proxy_dir.st_uid == QEMU_UID

    migration_uid = str(uuid.uuid4())
    relay = await start_relay(source, target, migration_uid)
    try:
        started = time.monotonic()
        await source.cmd.migrate(_migrate(source, vmi_json, migration_uid))
        done, before_done = await _finished(source, within=300)
        took = time.monotonic() - started
        result = _migration_of(done)
        assert not result.failed, result.failure_reason
        assert result.completed
        assert result.uid == migration_uid
        assert result.start_timestamp is not None
        assert result.abort_status == MigrationAbortStatus.UNSPECIFIED
        assert result.mode == MigrationMode.PRE_COPY
        print(f"live migration took {took:.1f}s; relayed {relay.bytes_to_target}")

        landed, _ = await _finished(target, within=60)
        arrived = _migration_of(landed)
        assert arrived.uid == migration_uid
        assert not arrived.failed
        assert arrived.start_timestamp == result.start_timestamp
        assert landed.domain.state == DomainState.RUNNING
    finally:
        await relay.close()

    # The source domain is shut off *because it migrated* (not crashed), the target runs
    # the same guest: its uptime goes on from where it was, it did not boot again.
    there = (await target.cmd.get_domain(GetDomainRequest())).domain
    assert there.state == DomainState.RUNNING
    assert there.migration.end_timestamp is not None
    here = (await source.cmd.get_domain(GetDomainRequest())).domain
    assert (here.state, here.reason) == (DomainState.SHUTOFF, DomainReason.MIGRATED)
    assert here.migration.completed
    # The handler hears it too: a stop because the guest migrated (never held back as
    # a possible reboot), which it must tell from a crash.
    # (A defined, never started domain is shut off with no reason: not a stop.)
    stops = {
        item.domain.reason
        for item in [*before_done, done]
        if isinstance(item, DomainEvent)
        and item.domain.state == DomainState.SHUTOFF
        and item.domain.reason != DomainReason.UNSPECIFIED
    }
    assert stops == {DomainReason.MIGRATED}
    assert await _uptime_after(target, serial_reader, before) > before
    # Block migration filled the target's blank ISO with the source's bytes.
    copied = await asyncio.to_thread((target.base / CLOUD_INIT_ISO).read_bytes)
    assert copied == source_iso
    assert read_iso(copied).label == "cidata"

    finalized = await target.cmd.finalize_migration(VmiRequest(vmi=target.ref))
    assert finalized.domain.state == DomainState.RUNNING

    # Synced again, the source would run the guest a second time: refused.
    with pytest.raises(GRPCError) as again:
        await source.cmd.sync_virtual_machine(_sync(source, vmi_json))
    assert again.value.status is Status.FAILED_PRECONDITION

    # The source handler deletes the migrated domain; the source launcher then exits
    # cleanly, so the source pod completes (the guest lives on in the target's).
    await source.cmd.delete(VmiRequest(vmi=source.ref))
    assert await asyncio.wait_for(source.process.wait(), 60) == 0
    assert (await target.cmd.get_domain(GetDomainRequest())).domain.state == DomainState.RUNNING


async def test_a_cancelled_migration_leaves_the_guest_running_on_the_source(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
) -> None:
    start, _stop = launcher_control
    source, vmi_json, relay = await _ready_pair(start)
    try:
        mib = 1024 * 1024
        uid = source.extra["migration_uid"]
        await source.cmd.migrate(_migrate(source, vmi_json, uid, bandwidth_bytes_per_second=mib))
        # Cancelled once guest memory streams (1 MiB/s: the copy takes far longer).
        deadline = time.monotonic() + 60
        while relay.bytes_to_target[MIGRATION_MEMORY_PORT] == 0:
            assert time.monotonic() < deadline, f"no memory stream: {relay.bytes_to_target}"
            await asyncio.sleep(0.1)
        await source.cmd.cancel_migration(VmiRequest(vmi=source.ref))
        done, seen = await _finished(source, within=60)
    finally:
        await relay.close()
    result = _migration_of(done)
    assert result.failed
    assert not result.completed
    assert result.abort_status == MigrationAbortStatus.SUCCEEDED
    assert "aborted" in result.failure_reason
    statuses = [m.abort_status for m in map(_migration_of, seen) if m is not None]
    assert MigrationAbortStatus.IN_PROGRESS in statuses
    here = (await source.cmd.get_domain(GetDomainRequest())).domain
    assert here.state == DomainState.RUNNING


async def test_a_migration_past_its_completion_limit_is_aborted(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
) -> None:
    # Upstream's test_id 2227: 5 s per GiB (a 128 MiB guest counts as 1 GiB) at 1 B/s.
    start, _stop = launcher_control
    source, vmi_json, relay = await _ready_pair(start)
    try:
        limits = {
            "bandwidth_bytes_per_second": 1,
            "progress_timeout_seconds": 5,
            "completion_timeout_per_gib": 5,
        }
        uid = source.extra["migration_uid"]
        await source.cmd.migrate(_migrate(source, vmi_json, uid, **limits))
        done, _ = await _finished(source, within=60)
    finally:
        await relay.close()
    result = _migration_of(done)
    assert result.failed
    assert "has been aborted" in result.failure_reason
    assert result.abort_status == MigrationAbortStatus.SUCCEEDED
    assert (await source.cmd.get_domain(GetDomainRequest())).domain.state == DomainState.RUNNING


async def test_the_failure_annotation_fails_the_migration_at_once(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
) -> None:
    start, _stop = launcher_control
    source = await start(pod_paths=True, grace_period=_GRACE_PERIOD)
    await asyncio.to_thread(_write_container_disk, source.base)
    vmi_json = _vmi(source, annotations={FORCE_LAUNCHER_MIGRATION_FAILURE_ANNOTATION: ""})
    await source.cmd.sync_virtual_machine(_sync(source, vmi_json))
    await source.cmd.migrate(_migrate(source, vmi_json, "m-1", block_migration=False))
    done, _ = await _finished(source, within=30)
    result = _migration_of(done)
    assert result.failed
    assert result.uid == "m-1"
    assert result.failure_reason == "Failed migration to satisfy functional test condition"
    here = (await source.cmd.get_domain(GetDomainRequest())).domain
    assert here.state == DomainState.RUNNING


def _userfaultfd_allowed() -> bool:
    """Whether QEMU, run as uid 107 without capabilities, may create a userfaultfd here:
    only with vm.unprivileged_userfaultfd=1 (QEMU 7.2 knows no /dev/userfaultfd)."""
    return Path("/proc/sys/vm/unprivileged_userfaultfd").read_text().strip() == "1"


async def test_post_copy_switches_where_the_host_allows_userfaultfd(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
) -> None:
    # Upstream's completion timeout with allowPostCopy: at 1 MiB/s a 128 MiB guest cannot
    # be copied within 1 s per GiB, so the monitor switches to post-copy.
    start, _stop = launcher_control
    source, vmi_json, relay = await _ready_pair(start)
    target, uid = source.extra["target"], source.extra["migration_uid"]
    before = await _last_tick(source, serial_reader)
    allowed = await asyncio.to_thread(_userfaultfd_allowed)
    try:
        options = {
            "bandwidth_bytes_per_second": 1024 * 1024,
            "completion_timeout_per_gib": 1,
            "allow_post_copy": True,
            "allow_workload_disruption": True,
        }
        await source.cmd.migrate(_migrate(source, vmi_json, uid, **options))
        done, seen = await _finished(source, within=180)
    finally:
        await relay.close()
    result = _migration_of(done)
    modes = {m.mode for m in map(_migration_of, [*seen, done]) if m is not None}
    print(f"post-copy (userfaultfd allowed: {allowed}): {result}; modes seen {modes}")
    if not allowed:
        # The target QEMU refuses the capability before any byte moves; the guest stays.
        assert result.failed, result
        assert "Postcopy is not supported" in result.failure_reason, result.failure_reason
        here = (await source.cmd.get_domain(GetDomainRequest())).domain
        assert here.state == DomainState.RUNNING
        return
    assert not result.failed, result.failure_reason
    assert result.completed
    assert result.mode == MigrationMode.POST_COPY
    landed, _ = await _finished(target, within=60)
    assert landed.domain.state == DomainState.RUNNING
    assert await _uptime_after(target, serial_reader, before) > before
