"""The VMI sync loop: each VMI of this node reaches its launcher and its status follows the guest.

Level-triggered by VMI key. A reconcile finds the VMI's launcher pod (controller
ownerRef, bound to this node), serves Notify in its sockets dir, connects to
`launcher-sock`, negotiates the protocol, calls SyncVirtualMachine when the guest is
not running yet, and patches the VMI's status from what the launcher reported
(status.compute_status). Nothing here survives a restart on purpose: after one, the
informers replay every VMI and the same reconcile re-adopts running guests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpclib
from grpclib.const import Status
from grpclib.exceptions import StreamTerminatedError
from kube_runtime import (
    VIRTUAL_MACHINE_INSTANCES,
    ApiError,
    Clock,
    Event,
    EventRecorder,
    KubeClient,
    RawObject,
    Result,
    SharedInformer,
    SystemClock,
    UnseenWrites,
    WorkQueue,
    thaw,
)
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.enums import FINAL_POD_PHASES, FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.event_reasons import (
    CREATED,
    DELETED,
    MSG_CRASHED,
    MSG_DEFINED,
    MSG_GRACEFUL_SHUTDOWN,
    MSG_POD_STOPPED,
    MSG_SHUT_DOWN,
    MSG_STARTED,
    MSG_STOPPING,
    SHUTTING_DOWN,
    STARTED,
    STOPPED,
    SYNC_FAILED,
)
from service_kit import get_logger
from virt_domain import ConverterOptions
from virt_domain.podnetwork import PodNetwork
from virt_rpc import (
    DomainEvent,
    DomainEventType,
    DomainResponse,
    DomainState,
    FreezeRequest,
    GetDomainRequest,
    GetGuestInfoRequest,
    GuestInfo,
    MemoryDumpRequest,
    PingRequest,
    ShutdownRequest,
    SocketPathError,
    SyncVirtualMachineRequest,
    UnsupportedProtocolVersionError,
    VmiRef,
    VmiRequest,
    networks_to_wire,
    options_to_wire,
)

from .guestagent import (
    access_credentials_event,
    access_credentials_view,
    guest_nics,
    guest_os_view,
    unsupported_reason,
)
from .hotplug import (
    HotplugError,
    dump_path,
    dumps_to_take,
    hotplug_status,
    mount_disk,
    plan_volumes,
    unmount_disk,
)
from .launcher import BUILD_VERSION, LauncherConnection, connect_launcher
from .migration_state import MigrationView
from .network import NetworkSetupError, setup_pod_network
from .notify import DomainSink, NotifyServer, VmiIdentity
from .podfiles import PodFiles, PodUid, pod_uid
from .safepath import PathRefusedError
from .status import POD_STOPPED, DomainView, MemoryDumpView, Observation, compute_status

__all__ = [
    "COMMANDS",
    "CommandError",
    "GuestRecord",
    "LauncherCallbacks",
    "SourceMigrations",
    "SyncSettings",
    "VmiSync",
    "converter_options",
    "domain_view",
    "launcher_pod_owner",
    "pod_finished",
    "record_notice",
    "requeue_launcher_owner",
    "sync_request",
    "typed_vmi",
]

_log = get_logger(__name__)
COMMANDS = ("pause", "unpause", "softreboot", "reset", "shutdown", "kill", "delete")
SYNC_TIMEOUT = 180.0
_ALIVE = (DomainState.RUNNING, DomainState.BLOCKED, DomainState.PAUSED, DomainState.PMSUSPENDED)
# A call that failed with these never reached the launcher's answer: worth another try.
_UNREACHABLE = (Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED)


class CommandError(Exception):
    """A command could not run; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def typed_vmi(raw: RawObject) -> VirtualMachineInstance:
    """The VMI as kubevirt_api's model; a VMI that does not load cannot be set up."""
    try:
        return load(VirtualMachineInstance, thaw(raw))
    except InvalidObjectError as error:
        raise NetworkSetupError(f"the VMI does not load: {error}") from None


def converter_options(use_emulation: bool) -> ConverterOptions:
    """The options this handler gives the converter: the cluster's emulation choice.

    The rest keep the values virt-handler has always sent: serial console log on, and a
    memory balloon stats period of 0 (no balloon statistics), not the converter's 10.
    """
    return ConverterOptions(
        use_emulation=use_emulation, serial_console_log=True, memballoon_stats_period=0
    )


@dataclass(frozen=True)
class SyncSettings:
    """What the loop needs to know about this node and cluster."""

    node: str
    use_emulation: bool = False
    running_resync: float = 10.0
    waiting_resync: float = 0.5


@dataclass
class GuestRecord:
    """What the handler holds for one VMI (by uid) while its guest lives here."""

    identity: VmiIdentity
    pod: PodUid | None = None
    notify: NotifyServer | None = None
    conn: LauncherConnection | None = None
    domain: DomainView | None = None
    launcher_seen: bool = False
    launcher_gone: bool = False
    launcher_image: str = ""
    #: The guest agent's last report (Notify events and GetDomain carry it).
    guest: GuestInfo | None = None
    shutdown_sent: bool = False
    refused: set[str] = field(default_factory=set)
    # Failed syncs back off (1 s doubling to 30 s): a bad VMI must not spin the launcher.
    adopted: bool = False
    sync_backoff: float = 0.0
    next_sync: float = 0.0
    last_failure: str = ""
    #: What phase 1 made of the pod network; None until it ran (again) for this record.
    networks: tuple[PodNetwork, ...] | None = None
    #: The domain left for a migration target (Shutoff, reason Migrated): from then on
    #: the target's handler speaks for the VMI, this one writes nothing of its status.
    migrated_away: bool = False


class SourceMigrations(Protocol):
    """The migration source's part in a reconcile (migration_source.MigrationSource)."""

    async def reconcile(self, raw: RawObject, record: GuestRecord) -> float | None:
        """Drive this VMI's outgoing migration, if any; when to look again (None: no need)."""
        ...

    async def forget(self, uid: str, record: GuestRecord | None = None) -> None:
        """The VMI left this node: release what its migration held (it may take over
        `record.conn` to finish with its launcher)."""
        ...

    async def close(self) -> None:
        """The handler stops: release everything, start nothing."""
        ...


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def launcher_pod_owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace/name key, uid) of the VMI controlling this launcher pod, if any."""
    meta = _map(pod.get("metadata"))
    for ref in meta.get("ownerReferences") or ():
        ref = _map(ref)
        if ref.get("controller") and ref.get("kind") == "VirtualMachineInstance":
            return f"{meta.get('namespace')}/{ref.get('name')}", str(ref.get("uid") or "")
    return None


def requeue_launcher_owner(queue: WorkQueue[str], event: Event[Any]) -> None:
    """A launcher pod changed: look at the VMI controlling it again."""
    owner = launcher_pod_owner(event.raw)
    if owner is not None:
        queue.add(owner[0])


async def record_notice(
    vmis: SharedInformer[Any],
    recorder: EventRecorder,
    vmi: VmiIdentity,
    kind: str,
    reason: str,
    message: str,
) -> None:
    """A launcher's KubernetesEvent, recorded on its VMI (the same uid only)."""
    raw = vmis.get_raw(f"{vmi.namespace}/{vmi.name}")
    if raw is not None and _map(raw.get("metadata")).get("uid") == vmi.uid:
        await recorder.event(raw, "Warning" if kind == "Warning" else "Normal", reason, message)


def domain_view(domain: Any) -> DomainView | None:
    """What the handler keeps of a launcher's `Domain` message."""
    if domain is None:
        return None
    return DomainView(
        state=domain.state,
        reason=domain.reason,
        interfaces=tuple((i.name, i.mac) for i in domain.interfaces),
        disks=tuple((d.name, d.target) for d in domain.disks),
        migration=MigrationView.from_wire(domain.migration),
        memory_dump=memory_dump_view(domain),
        pod_stopping=domain.pod_stopping,
    )


def memory_dump_view(domain: Any) -> MemoryDumpView | None:
    """The launcher's record of its last memory dump, if the Domain carries one."""
    dump = getattr(domain, "memory_dump", None)
    if dump is None or not dump.file_name:
        return None
    return MemoryDumpView(
        file_name=dump.file_name,
        start_timestamp=dump.start_timestamp,
        end_timestamp=dump.end_timestamp,
        completed=dump.completed,
        failed=dump.failed,
        failure_reason=dump.failure_reason,
    )


class _HoldsDomain(Protocol):
    domain: DomainView | None


class LauncherCallbacks:
    """The callbacks both VMI loops of a node (the sync loop and the migration target) give
    their informers and launchers' Notify servers: cheap, they only queue keys, keep the
    domain last reported and record the launchers' notices on their VMIs."""

    queue: WorkQueue[str]
    vmis: SharedInformer[Any]
    recorder: EventRecorder

    def _watch(self, vmis: SharedInformer[Any], pods: SharedInformer[Any]) -> None:
        vmis.add_handler(self._on_vmi)
        pods.add_handler(self._on_pod)

    def _on_vmi(self, event: Event[Any]) -> None:
        self.queue.add(event.key)

    def _on_pod(self, event: Event[Any]) -> None:
        requeue_launcher_owner(self.queue, event)

    def _on_domain(self, vmi: VmiIdentity, event: DomainEvent) -> None:
        raise NotImplementedError  # each loop keeps the domain in its own record

    def _on_hello(self, vmi: VmiIdentity) -> None:
        """The launcher said hello on Notify: its socket is ready, sync it now."""
        self.queue.add(f"{vmi.namespace}/{vmi.name}")

    def _sink(self) -> DomainSink:
        return DomainSink(self._on_domain, self._on_notice, self._on_hello)

    def _domain_seen(self, vmi: VmiIdentity, record: _HoldsDomain, event: DomainEvent) -> None:
        """Keep the launcher's domain (None once deleted) and look at the VMI again."""
        if event.type is DomainEventType.DELETED:
            record.domain = None
        elif event.domain is not None:
            record.domain = domain_view(event.domain)
        self.queue.add(f"{vmi.namespace}/{vmi.name}")

    async def _on_notice(self, vmi: VmiIdentity, kind: str, reason: str, message: str) -> None:
        await record_notice(self.vmis, self.recorder, vmi, kind, reason, message)


@contextlib.contextmanager
def _launcher_errors() -> Iterator[None]:
    """A failed launcher call as the CommandError (HTTP status) virt-api relays."""
    try:
        yield
    except grpclib.GRPCError as error:
        code = {
            Status.INVALID_ARGUMENT: 400,
            Status.FAILED_PRECONDITION: 409,
            Status.UNAVAILABLE: 503,
            Status.DEADLINE_EXCEEDED: 504,
        }.get(error.status, 500)
        raise CommandError(code, str(error.message or error.status.name)) from error
    except (TimeoutError, OSError, StreamTerminatedError) as error:
        raise CommandError(503, f"launcher unreachable: {error}") from error


def sync_request(
    raw: RawObject, ref: VmiRef, options: ConverterOptions
) -> SyncVirtualMachineRequest:
    """The VMI, the converter's options and phase 1's networks, as Sync (and
    PrepareMigrationTarget) take them."""
    return SyncVirtualMachineRequest(
        vmi=ref,
        vmi_json=json.dumps(thaw(raw)),
        options=options_to_wire(options),
        # The network facts travel in their own field (virt_rpc.options).
        networks=networks_to_wire(options.pod_networks),
    )


def pod_finished(pod: RawObject) -> bool:
    """A launcher pod in a final phase, or whose compute container terminated."""
    status = _map(pod.get("status"))
    if status.get("phase") in FINAL_POD_PHASES:
        return True
    for container in status.get("containerStatuses") or ():
        container = _map(container)
        if container.get("name") == "compute" and _map(container.get("state")).get("terminated"):
            return True
    return False


def _now(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


class VmiSync(LauncherCallbacks):
    """Reconciles the VMIs of one node against their launchers."""

    def __init__(
        self,
        client: KubeClient,
        vmis: SharedInformer[Any],
        pods: SharedInformer[Any],
        queue: WorkQueue[str],
        files: PodFiles,
        recorder: EventRecorder,
        settings: SyncSettings,
        options: Callable[[], ConverterOptions] | None = None,
        clock: Clock | None = None,
        migrations: SourceMigrations | None = None,
        attachments: SharedInformer[Any] | None = None,
    ) -> None:
        self.client = client
        #: The sync back-off and the status timestamps read this clock (tests drive it).
        self.clock = clock or SystemClock()
        #: The converter's options for the next sync, sent to the launcher unchanged.
        self.options = options or (lambda: converter_options(settings.use_emulation))
        self.vmis = vmis
        self.pods = pods
        self.queue = queue
        self.files = files
        self.recorder = recorder
        self.settings = settings
        self.records: dict[str, GuestRecord] = {}
        self.status_patches = 0
        #: Status writes the informer has not shown yet (no pass computes from the old copy).
        self.unseen = UnseenWrites()
        #: Outgoing live migrations (None: this handler migrates nothing).
        self.migrations = migrations
        #: This node's hotplug attachment pods (None: no volume hotplug).
        self.attachments = attachments
        self._watch(vmis, pods)
        if attachments is not None:
            attachments.add_handler(self._on_attachment)

    def _on_attachment(self, event: Event[Any]) -> None:
        """An attachment pod changed: the VMI of the launcher pod owning it."""
        meta = _map(event.raw.get("metadata"))
        for ref in meta.get("ownerReferences") or ():
            ref = _map(ref)
            if ref.get("controller") and ref.get("kind") == "Pod":
                launcher = self.pods.get_raw(f"{meta.get('namespace')}/{ref.get('name')}")
                owner = launcher_pod_owner(launcher) if launcher is not None else None
                if owner is not None:
                    self.queue.add(owner[0])

    def _on_domain(self, vmi: VmiIdentity, event: DomainEvent) -> None:
        record = self.records.get(vmi.uid)
        if record is None:
            return
        _log.info(
            "domain event",
            namespace=vmi.namespace,
            name=vmi.name,
            kind=event.type.name.lower(),
            state=event.domain.state.name if event.domain else "-",
            reason=event.domain.reason.name if event.domain else "-",
        )
        if event.type is DomainEventType.DELETED:
            record.guest = None
        elif event.domain is not None and event.domain.guest is not None:
            record.guest = event.domain.guest
        self._domain_seen(vmi, record, event)

    # -- the reconcile

    def _launcher_pod(self, vmi_uid: str) -> RawObject | None:
        found: RawObject | None = None
        for pod in self.pods.store.objects():
            owner = launcher_pod_owner(pod)
            on_node = _map(pod.get("spec")).get("nodeName") == self.settings.node
            if owner is not None and owner[1] == vmi_uid and on_node:
                # A VMI that migrated away and back has its old, finished pod here too.
                if not pod_finished(pod):
                    return pod
                found = found or pod
        return found

    async def _forget(self, uid: str) -> None:
        record = self.records.pop(uid, None)
        if self.migrations is not None:
            await self.migrations.forget(uid, record)
        if record is None:
            return
        if record.conn is not None:
            record.conn.close()
        if record.notify is not None:
            await record.notify.stop()

    async def _forget_key(self, key: str) -> None:
        for uid, record in list(self.records.items()):
            if f"{record.identity.namespace}/{record.identity.name}" == key:
                await self._forget(uid)

    async def reconcile(self, key: str) -> Result | None:
        """Bring one VMI's guest and status in line; see the module docstring."""
        raw = self.vmis.get_raw(key)
        if raw is None:
            self.unseen.forget(key)
            await self._forget_key(key)
            return None
        if self.unseen.pending(key, raw):
            return None  # our status write's watch event brings the key back
        meta = _map(raw.get("metadata"))
        status = _map(raw.get("status"))
        uid = str(meta.get("uid") or "")
        phase = str(status.get("phase") or "")
        for other, old in list(self.records.items()):  # a VMI recreated under the same name
            if other != uid and f"{old.identity.namespace}/{old.identity.name}" == key:
                await self._forget(other)
        if phase in FINAL_VMI_PHASES:
            await self._forget(uid)
            return None
        record = self.records.get(uid)
        if meta.get("deletionTimestamp"):
            return None if record is None else await self._stop_deleted(raw, record)
        if phase not in (Phase.SCHEDULED, Phase.RUNNING):
            return None
        if record is None:
            record = GuestRecord(
                VmiIdentity(str(meta.get("namespace")), str(meta.get("name")), uid)
            )
            self.records[uid] = record
        pod = self._launcher_pod(uid)
        requeue = await self._reach_launcher(raw, record, pod)
        later = await self.migrations.reconcile(raw, record) if self.migrations else None
        volumes = None
        if phase == Phase.RUNNING and pod is not None and record.conn is not None:
            volumes, hotplug_later = await self._sync_hotplug(raw, record, pod, record.conn)
            requeue = min(requeue, hotplug_later)
        await self._update_status(raw, record, pod, volumes)
        if record.launcher_gone:
            return None if later is None else Result(requeue_after=later)
        return Result(requeue_after=requeue if later is None else min(requeue, later))

    async def _reach_launcher(
        self, raw: RawObject, record: GuestRecord, pod: RawObject | None
    ) -> float:
        """Connect and sync; returns when to look again."""
        if pod is None or pod_finished(pod):
            if record.launcher_seen or pod is not None:
                self._lose_launcher(record, "the launcher pod is gone or finished")
            return self.settings.waiting_resync
        pod_meta = _map(pod.get("metadata"))
        try:
            puid = pod_uid(pod_meta.get("uid"))
        except PathRefusedError as error:
            _log.error("launcher pod refused", name=record.identity.name, error=str(error))
            return self.settings.running_resync
        record.pod = puid
        record.launcher_image = self._compute_image(pod)
        if record.notify is None:
            notify = NotifyServer(puid, record.identity, self._sink())
            try:
                await notify.start(self.files, BUILD_VERSION)
                record.notify = notify
            except FileNotFoundError:
                return self.settings.waiting_resync  # volumes not set up yet
            except (PathRefusedError, SocketPathError, OSError) as error:
                await self._refuse(raw, record, "notify", str(error))
                return self.settings.running_resync
        if record.conn is None:
            later = await self._connect(raw, record, puid)
            if later is not None:
                return later
        assert record.conn is not None
        try:
            await self._sync_guest(raw, record, record.conn)
        except grpclib.GRPCError as error:
            if error.status is Status.INVALID_ARGUMENT:
                await self.recorder.event(raw, "Warning", SYNC_FAILED, str(error.message))
                return self.settings.running_resync
            if error.status in _UNREACHABLE:
                self._drop_connection(record)
                return self.settings.waiting_resync
            _log.warning("sync failed", name=record.identity.name, error=str(error))
            return self.settings.running_resync
        except (TimeoutError, OSError, ConnectionError, StreamTerminatedError) as error:
            _log.info("launcher unreachable", name=record.identity.name, error=str(error))
            self._drop_connection(record)
            return self.settings.waiting_resync
        return self.settings.running_resync

    async def _connect(self, raw: RawObject, record: GuestRecord, puid: PodUid) -> float | None:
        """Open the connection to the launcher: None once open, else when to try again."""
        try:
            record.conn = await connect_launcher(self.files, puid)
        except FileNotFoundError:
            if record.launcher_seen:
                self._lose_launcher(record, "the launcher socket disappeared")
            return self.settings.waiting_resync
        except (PathRefusedError, SocketPathError) as error:
            await self._refuse(raw, record, "socket", str(error))
            return self.settings.running_resync
        except UnsupportedProtocolVersionError as error:
            await self._refuse(raw, record, "protocol", str(error))
            return self.settings.running_resync
        except (TimeoutError, OSError, grpclib.GRPCError, StreamTerminatedError) as error:
            _log.info("launcher not answering yet", name=record.identity.name, error=str(error))
            return self.settings.waiting_resync
        record.launcher_seen = True
        _log.info(
            "connected to the launcher",
            namespace=record.identity.namespace,
            name=record.identity.name,
            protocol=record.conn.peer.protocol_version,
        )
        return None

    async def _sync_guest(
        self, raw: RawObject, record: GuestRecord, conn: LauncherConnection
    ) -> None:
        ref = self._ref(record)
        await conn.cmd.ping(PingRequest())
        if not record.adopted:
            # Once per connection: afterwards Notify keeps record.domain current, and the
            # launcher serialises libvirt calls, so polling it would only queue up behind.
            reply: DomainResponse = await conn.cmd.get_domain(GetDomainRequest(), timeout=120)
            record.domain = domain_view(reply.domain)
            if reply.domain is not None and reply.domain.guest is not None:
                record.guest = reply.domain.guest
            record.adopted = True
        phase = str(_map(raw.get("status")).get("phase") or "")
        alive = record.domain is not None and record.domain.state in _ALIVE
        if phase == Phase.SCHEDULED and not alive and self.clock.monotonic() >= record.next_sync:
            try:
                options = self.options()
                networks = await self._pod_network(raw, record, options)
                options = dataclasses.replace(options, pod_networks=networks)
                # Read before the call: the launcher's Notify of the new domain can land
                # while Sync is still answering, and the Created event would be lost.
                defined_before = record.domain is not None
                reply = await self._sync_call(raw, record, conn, ref, options)
            except (NetworkSetupError, grpclib.GRPCError) as error:
                record.sync_backoff = min(max(1.0, record.sync_backoff * 2), 30.0)
                record.next_sync = self.clock.monotonic() + record.sync_backoff
                message = (
                    str(error.message or error.status.name)
                    if isinstance(error, grpclib.GRPCError)
                    else str(error)
                )
                if message != record.last_failure:
                    record.last_failure = message
                    await self.recorder.event(raw, "Warning", SYNC_FAILED, message[:1000])
                _log.warning("sync failed", name=record.identity.name, error=message)
                return
            record.sync_backoff = 0.0
            if not defined_before:  # upstream: an event when Sync defined the domain
                await self.recorder.event(raw, "Normal", CREATED, MSG_DEFINED)
            record.domain = domain_view(reply.domain)
        elif record.networks is None and alive:
            # A restarted handler: phase 1 is idempotent, so running it again only
            # re-reads what the pod has (for status.interfaces' IPs).
            try:
                await self._pod_network(raw, record, self.options())
            except NetworkSetupError as error:
                _log.warning("pod network not read", name=record.identity.name, error=str(error))

    async def _sync_hotplug(
        self, raw: RawObject, record: GuestRecord, pod: RawObject, conn: LauncherConnection
    ) -> tuple[list[dict[str, Any]] | None, float]:
        """Mount hotplugged claims into the launcher, have it attach or detach their disks,
        unmount the detached (hotplug.py); the volumeStatus to write, and when to look again."""
        work = plan_volumes(raw)
        if not (work.mount or work.unmount or work.block) or self.attachments is None:
            return None, self.settings.running_resync
        namespace = record.identity.namespace
        mounted: list[str] = []
        failed = False
        attached = dict(record.domain.disks) if record.domain is not None else {}
        for volume, attachment_name in work.mount.items():
            directory = volume in work.dumps
            if volume in attached:
                mounted.append(volume)  # on the domain: mounted long since
                continue
            attachment = self.attachments.get_raw(f"{namespace}/{attachment_name}")
            if attachment is None:
                failed = True
                continue
            try:
                if await mount_disk(pod, attachment, volume, directory=directory) == "mounted":
                    _log.info("hotplug disk mounted", name=record.identity.name, volume=volume)
                mounted.append(volume)
            except HotplugError as error:
                failed = True
                _log.info("hotplug disk not mounted yet", volume=volume, error=str(error))
        disks = dict(record.domain.disks) if record.domain is not None else {}
        # A dump directory never becomes a disk: only disks need the launcher's Sync.
        stale = any(v not in disks for v in mounted if v not in work.dumps) or any(
            v in disks for v in work.unmount
        )
        if stale:
            try:
                options = self.options()
                networks = record.networks
                if networks is None:
                    networks = await self._pod_network(raw, record, options)
                options = dataclasses.replace(options, pod_networks=networks)
                reply = await self._sync_call(raw, record, conn, self._ref(record), options)
                record.domain = domain_view(reply.domain)
            except (NetworkSetupError, grpclib.GRPCError) as error:
                message = (
                    str(error.message or error.status.name)
                    if isinstance(error, grpclib.GRPCError)
                    else str(error)
                )
                await self.recorder.event(raw, "Warning", SYNC_FAILED, message[:1000])
                return None, self.settings.waiting_resync
            disks = dict(record.domain.disks) if record.domain is not None else {}
        unmounted: list[str] = []
        for volume in work.unmount:
            if volume in disks:
                failed = True  # still on the domain
                continue
            try:
                await unmount_disk(pod, volume, directory=volume in work.dumps)
                _log.info("hotplug disk unmounted", name=record.identity.name, volume=volume)
                unmounted.append(volume)
            except HotplugError as error:
                failed = True
                _log.warning("hotplug disk not unmounted", volume=volume, error=str(error))
        dump = record.domain.memory_dump if record.domain is not None else None
        status = hotplug_status(
            raw,
            mounted,
            unmounted,
            disks,
            work.block,
            dumps=work.dumps,
            dump=dump,
            now=self.clock.now(),
        )
        entries = status if status is not None else _map(raw.get("status")).get("volumeStatus")
        for volume, file_name in dumps_to_take(entries or (), dump):
            try:
                await conn.cmd.memory_dump(
                    MemoryDumpRequest(dump_path=dump_path(volume, file_name))
                )
            except grpclib.GRPCError as error:
                failed = True
                _log.warning("memory dump not started", volume=volume, error=str(error.message))
            else:
                _log.info("memory dump requested", name=record.identity.name, volume=volume)
        later = self.settings.waiting_resync if failed else self.settings.running_resync
        return status, later

    async def _pod_network(
        self, raw: RawObject, record: GuestRecord, options: ConverterOptions
    ) -> tuple[PodNetwork, ...]:
        """Phase 1 in the launcher pod's netns (idempotent); remembers its networks."""
        assert record.pod is not None
        setup = await setup_pod_network(record.pod, typed_vmi(raw), options.tap_devices)
        if setup.created:
            _log.info("pod network set up", name=record.identity.name, created=setup.created)
        record.networks = setup.networks
        return setup.networks

    async def _sync_call(
        self,
        raw: RawObject,
        record: GuestRecord,
        conn: LauncherConnection,
        ref: VmiRef,
        options: ConverterOptions,
    ) -> DomainResponse:
        return await conn.cmd.sync_virtual_machine(
            sync_request(raw, ref, options),
            # A fresh libvirtd probes QEMU first; on a busy node that takes a while.
            timeout=SYNC_TIMEOUT,
        )

    @staticmethod
    def _compute_image(pod: RawObject) -> str:
        for container in _map(pod.get("spec")).get("containers") or ():
            container = _map(container)
            if container.get("name") == "compute":
                return str(container.get("image") or "")
        return ""

    def _lose_launcher(self, record: GuestRecord, why: str) -> None:
        if not record.launcher_gone:
            _log.warning(
                "launcher lost",
                namespace=record.identity.namespace,
                name=record.identity.name,
                why=why,
            )
        record.launcher_gone = True
        self._drop_connection(record)

    @staticmethod
    def _drop_connection(record: GuestRecord) -> None:
        record.adopted = False
        if record.conn is not None:
            record.conn.close()
            record.conn = None

    async def _refuse(self, raw: RawObject, record: GuestRecord, what: str, message: str) -> None:
        """Log and record (once per kind) a launcher path or peer we will not trust."""
        _log.error("refusing the launcher", what=what, name=record.identity.name, error=message)
        if what not in record.refused:
            record.refused.add(what)
            await self.recorder.event(raw, "Warning", "LauncherRefused", message)

    @staticmethod
    def _ref(record: GuestRecord) -> VmiRef:
        return record.identity.ref()

    async def _stop_deleted(self, raw: RawObject, record: GuestRecord) -> Result | None:
        """A deleted VMI: have its launcher shut the guest down, once it has taken the request.

        A launcher we have reached may hold a guest. Until the request lands (the
        connection dropped, or the call failed on the way) the VMI is looked at again:
        otherwise the guest would be left to the pod's deletion, without its stop events.
        """
        if record.shutdown_sent or record.launcher_gone or not record.launcher_seen:
            return None
        if record.conn is None:
            pod = self._launcher_pod(record.identity.uid)
            if pod is None or pod_finished(pod) or record.pod is None:
                return None
            later = await self._connect(raw, record, record.pod)
            if later is not None:
                return Result(requeue_after=later)  # a launcher found gone ends it then
        if await self._shutdown(raw, record):
            return None
        self._drop_connection(record)
        return Result(requeue_after=self.settings.waiting_resync)

    async def _shutdown(self, raw: RawObject, record: GuestRecord) -> bool:
        """Send Shutdown; False when it did not reach the launcher (worth another try)."""
        assert record.conn is not None
        try:
            await record.conn.cmd.shutdown(ShutdownRequest(vmi=self._ref(record)))
        except grpclib.GRPCError as error:
            _log.info("shutdown not sent", name=record.identity.name, error=str(error))
            # The launcher answered: a refusal (a paused guest, no domain) stays one.
            record.shutdown_sent = error.status not in _UNREACHABLE
            return record.shutdown_sent
        except (TimeoutError, OSError, StreamTerminatedError) as error:
            _log.info("shutdown not sent", name=record.identity.name, error=str(error))
            return False
        record.shutdown_sent = True
        # Once per VMI, as upstream: a zero grace period means the guest is stopped now.
        grace = _map(raw.get("spec")).get("terminationGracePeriodSeconds")
        if grace == 0:
            await self.recorder.event(raw, "Normal", DELETED, MSG_STOPPING)
        else:
            await self.recorder.event(raw, "Normal", SHUTTING_DOWN, MSG_GRACEFUL_SHUTDOWN)
        return True

    async def _update_status(
        self,
        raw: RawObject,
        record: GuestRecord,
        pod: RawObject | None,
        volumes: list[dict[str, Any]] | None = None,
    ) -> None:
        if record.migrated_away:
            return
        agent = record.guest if record.guest is not None and record.guest.agent_connected else None
        obs = Observation(
            node=self.settings.node,
            domain=record.domain,
            launcher_gone=record.launcher_gone,
            launcher_image=record.launcher_image,
            guest_os=None if agent is None else guest_os_view(agent),
            agent_connected=agent is not None,
            now=_now(self.clock),
            networks=record.networks,
            agent_unsupported=""
            if agent is None
            else unsupported_reason(raw, agent.supported_commands),
            fsfreeze_status="" if agent is None else agent.fsfreeze_status,
            guest_nics=() if agent is None else guest_nics(agent),
            pod=pod,
            access_credentials=access_credentials_view(record.guest),
            volume_status=volumes,
        )
        patch = compute_status(raw, obs)
        if not patch:
            return
        meta = _map(raw.get("metadata"))
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        # KubeVirt's VMI has no status subresource: a merge patch of the object's own
        # status fields, guarded by the resourceVersion we computed from.
        body: dict[str, Any] = {"status": patch}
        if meta.get("resourceVersion"):
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        try:
            updated = await self.client.merge_patch(
                VIRTUAL_MACHINE_INSTANCES, str(meta.get("name")), body, str(meta.get("namespace"))
            )
            self.status_patches += 1
            self.unseen.wrote(key, raw, updated)
        except ApiError as error:
            if error.status == 409:
                self.queue.add_after(key, 0.2)  # someone else wrote first: recompute
                return
            if error.status == 404:
                return  # deleted meanwhile; the informer will tell us
            raise
        if patch.get("phase"):
            _log.info(
                "vmi phase",
                namespace=meta.get("namespace"),
                name=meta.get("name"),
                phase=patch["phase"],
            )
            await self._phase_event(raw, str(patch["phase"]), str(patch.get("reason") or ""))
        event = access_credentials_event(raw, patch)
        if event is not None:
            await self.recorder.event(raw, *event)

    async def _phase_event(self, raw: RawObject, phase: str, reason: str) -> None:
        """Upstream's Started, Stopped (shut down) and Stopped (crashed, a Warning); ours
        for a pod stopped under a running VMI."""
        if phase == Phase.RUNNING:
            await self.recorder.event(raw, "Normal", STARTED, MSG_STARTED)
        elif phase == Phase.SUCCEEDED:
            await self.recorder.event(raw, "Normal", STOPPED, MSG_SHUT_DOWN)
        elif phase == Phase.FAILED:
            message = MSG_POD_STOPPED if reason == POD_STOPPED else MSG_CRASHED
            await self.recorder.event(raw, "Warning", STOPPED, message)

    # -- commands from virt-api (through the relay server)

    def record_for(self, namespace: str, name: str) -> GuestRecord:
        """The live record of a VMI; CommandError 404/409 when there is none."""
        raw = self.vmis.get_raw(f"{namespace}/{name}")
        if raw is None:
            raise CommandError(
                404, f"virtualmachineinstance {namespace}/{name} is not on this node"
            )
        uid = str(_map(raw.get("metadata")).get("uid") or "")
        record = self.records.get(uid)
        if record is None or record.conn is None:
            raise CommandError(409, f"virtualmachineinstance {namespace}/{name} is not running")
        return record

    async def command(self, namespace: str, name: str, action: str) -> None:
        """Run one of COMMANDS on the VMI's launcher; raise CommandError on failure."""
        if action not in COMMANDS:
            raise CommandError(400, f"unknown command {action!r}; valid: {', '.join(COMMANDS)}")
        record = self.record_for(namespace, name)
        assert record.conn is not None
        cmd = record.conn.cmd
        request = VmiRequest(vmi=self._ref(record))
        calls = {
            "pause": cmd.pause,
            "unpause": cmd.unpause,
            "softreboot": cmd.soft_reboot,
            "reset": cmd.reset,
            "kill": cmd.kill,
            "delete": cmd.delete,
        }
        with _launcher_errors():
            if action == "shutdown":
                reply = await cmd.shutdown(ShutdownRequest(vmi=self._ref(record)))
            else:
                reply = await calls[action](request)
        if reply.domain is not None:
            record.domain = domain_view(reply.domain)
        self.queue.add(f"{namespace}/{name}")

    async def guest_info(self, namespace: str, name: str) -> GuestInfo:
        """The guest agent's report, from the launcher; CommandError 409 when none is connected."""
        record = self.record_for(namespace, name)
        assert record.conn is not None
        with _launcher_errors():
            info = (await record.conn.cmd.get_guest_info(GetGuestInfoRequest())).info
        if info is None or not info.agent_connected:
            raise CommandError(409, "VMI does not have guest agent connected")
        return info

    async def freeze(self, namespace: str, name: str, unfreeze_timeout: int | None) -> None:
        """Freeze (``unfreeze_timeout`` seconds set) or thaw (None) the guest's filesystems."""
        record = self.record_for(namespace, name)
        assert record.conn is not None
        ref = self._ref(record)
        with _launcher_errors():
            if unfreeze_timeout is None:
                await record.conn.cmd.unfreeze(VmiRequest(vmi=ref))
            else:
                await record.conn.cmd.freeze(
                    FreezeRequest(vmi=ref, unfreeze_timeout_seconds=unfreeze_timeout)
                )
        self.queue.add(f"{namespace}/{name}")

    async def close(self) -> None:
        """Close every connection and Notify server (guests keep running)."""
        if self.migrations is not None:
            await self.migrations.close()
        for uid in list(self.records):
            await self._forget(uid)
