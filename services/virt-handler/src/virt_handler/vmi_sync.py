"""The VMI sync loop: each VMI of this node reaches its launcher and its status follows the guest.

Level-triggered by VMI key. A reconcile finds the VMI's launcher pod (controller
ownerRef, bound to this node), serves Notify in its sockets dir, connects to
`launcher-sock`, negotiates the protocol, calls SyncVirtualMachine when the guest is
not running yet, and patches the VMI's status from what the launcher reported
(status.compute_status). Nothing here survives a restart on purpose: after one, the
informers replay every VMI and the same reconcile re-adopts running guests.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    WorkQueue,
    thaw,
)
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from kubevirt_api.enums import FINAL_POD_PHASES, FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from virt_domain import ConverterOptions
from virt_domain.podnetwork import PodNetwork
from virt_rpc import (
    DomainEvent,
    DomainEventType,
    DomainResponse,
    DomainState,
    GetDomainRequest,
    GetGuestInfoRequest,
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

from .launcher import BUILD_VERSION, LauncherConnection, connect_launcher
from .network import NetworkSetupError, setup_pod_network
from .notify import DomainSink, NotifyServer, VmiIdentity
from .podfiles import PodFiles, PodUid, pod_uid
from .safepath import PathRefusedError
from .status import DomainView, GuestOsView, Observation, compute_status

__all__ = [
    "COMMANDS",
    "CommandError",
    "GuestRecord",
    "SyncSettings",
    "VmiSync",
    "converter_options",
    "launcher_pod_owner",
]

_log = logging.getLogger(__name__)
COMMANDS = ("pause", "unpause", "softreboot", "reset", "shutdown", "kill", "delete")
SYNC_TIMEOUT = 180.0
_ALIVE = (DomainState.RUNNING, DomainState.BLOCKED, DomainState.PAUSED, DomainState.PMSUSPENDED)


class CommandError(Exception):
    """A command could not run; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _typed_vmi(raw: RawObject) -> VirtualMachineInstance:
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
    guest_os: GuestOsView | None = None
    agent_connected: bool = False
    shutdown_sent: bool = False
    refused: set[str] = field(default_factory=set)
    # Failed syncs back off (1 s doubling to 30 s): a bad VMI must not spin the launcher.
    adopted: bool = False
    sync_backoff: float = 0.0
    next_sync: float = 0.0
    last_failure: str = ""
    #: What phase 1 made of the pod network; None until it ran (again) for this record.
    networks: tuple[PodNetwork, ...] | None = None


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


def _domain_view(domain: Any) -> DomainView | None:
    if domain is None:
        return None
    return DomainView(
        state=domain.state,
        reason=domain.reason,
        interfaces=tuple((i.name, i.mac) for i in domain.interfaces),
    )


def _now(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


class VmiSync:
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
        vmis.add_handler(self._on_vmi)
        pods.add_handler(self._on_pod)

    # -- event handlers: cheap, keys only

    def _on_vmi(self, event: Event[Any]) -> None:
        self.queue.add(event.key)

    def _on_pod(self, event: Event[Any]) -> None:
        owner = launcher_pod_owner(event.raw)
        if owner is not None:
            self.queue.add(owner[0])

    def _on_domain(self, vmi: VmiIdentity, event: DomainEvent) -> None:
        record = self.records.get(vmi.uid)
        if record is None:
            return
        _log.info(
            "%s/%s: domain %s %s (%s)",
            vmi.namespace,
            vmi.name,
            event.type.name.lower(),
            event.domain.state.name if event.domain else "-",
            event.domain.reason.name if event.domain else "-",
        )
        if event.type is DomainEventType.DELETED or event.domain is None:
            record.domain = None if event.type is DomainEventType.DELETED else record.domain
        else:
            record.domain = _domain_view(event.domain)
        self.queue.add(f"{vmi.namespace}/{vmi.name}")

    async def _on_notice(self, vmi: VmiIdentity, kind: str, reason: str, message: str) -> None:
        raw = self.vmis.get_raw(f"{vmi.namespace}/{vmi.name}")
        if raw is not None and _map(raw.get("metadata")).get("uid") == vmi.uid:
            await self.recorder.event(
                raw, "Warning" if kind == "Warning" else "Normal", reason, message
            )

    # -- the reconcile

    def _launcher_pod(self, vmi_uid: str) -> RawObject | None:
        for pod in self.pods.store.objects():
            owner = launcher_pod_owner(pod)
            on_node = _map(pod.get("spec")).get("nodeName") == self.settings.node
            if owner is not None and owner[1] == vmi_uid and on_node:
                return pod
        return None

    async def _forget(self, uid: str) -> None:
        record = self.records.pop(uid, None)
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
            await self._forget_key(key)
            return None
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
            if record is not None:
                await self._shutdown(record)
            return None
        if phase not in (Phase.SCHEDULED, Phase.RUNNING):
            return None
        if record is None:
            record = GuestRecord(
                VmiIdentity(str(meta.get("namespace")), str(meta.get("name")), uid)
            )
            self.records[uid] = record
        pod = self._launcher_pod(uid)
        requeue = await self._reach_launcher(raw, record, pod)
        await self._update_status(raw, record)
        if record.launcher_gone:
            return None
        return Result(requeue_after=requeue)

    async def _reach_launcher(
        self, raw: RawObject, record: GuestRecord, pod: RawObject | None
    ) -> float:
        """Connect and sync; returns when to look again."""
        if pod is None or self._pod_finished(pod):
            if record.launcher_seen or pod is not None:
                self._lose_launcher(record, "the launcher pod is gone or finished")
            return self.settings.waiting_resync
        pod_meta = _map(pod.get("metadata"))
        try:
            puid = pod_uid(pod_meta.get("uid"))
        except PathRefusedError as error:
            _log.error("launcher pod of %s: %s", record.identity.name, error)
            return self.settings.running_resync
        record.pod = puid
        record.launcher_image = self._compute_image(pod)
        if record.notify is None:
            notify = NotifyServer(
                puid, record.identity, DomainSink(self._on_domain, self._on_notice)
            )
            try:
                await notify.start(self.files, BUILD_VERSION)
                record.notify = notify
            except FileNotFoundError:
                return self.settings.waiting_resync  # volumes not set up yet
            except (PathRefusedError, SocketPathError, OSError) as error:
                await self._refuse(raw, record, "notify", str(error))
                return self.settings.running_resync
        if record.conn is None:
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
                _log.info("launcher of %s not answering yet: %s", record.identity.name, error)
                return self.settings.waiting_resync
            record.launcher_seen = True
            _log.info(
                "connected to the launcher of %s/%s (protocol v%d)",
                record.identity.namespace,
                record.identity.name,
                record.conn.peer.protocol_version,
            )
        try:
            await self._sync_guest(raw, record, record.conn)
        except grpclib.GRPCError as error:
            if error.status is Status.INVALID_ARGUMENT:
                await self.recorder.event(raw, "Warning", "SyncFailed", str(error.message))
                return self.settings.running_resync
            if error.status in (Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED):
                self._drop_connection(record)
                return self.settings.waiting_resync
            _log.warning("sync of %s failed: %s", record.identity.name, error)
            return self.settings.running_resync
        except (TimeoutError, OSError, ConnectionError, StreamTerminatedError) as error:
            _log.info("launcher of %s unreachable: %s", record.identity.name, error)
            self._drop_connection(record)
            return self.settings.waiting_resync
        return self.settings.running_resync

    async def _sync_guest(
        self, raw: RawObject, record: GuestRecord, conn: LauncherConnection
    ) -> None:
        ref = self._ref(record)
        await conn.cmd.ping(PingRequest())
        if not record.adopted:
            # Once per connection: afterwards Notify keeps record.domain current, and the
            # launcher serialises libvirt calls, so polling it would only queue up behind.
            reply: DomainResponse = await conn.cmd.get_domain(GetDomainRequest(), timeout=120)
            record.domain = _domain_view(reply.domain)
            record.adopted = True
        phase = str(_map(raw.get("status")).get("phase") or "")
        alive = record.domain is not None and record.domain.state in _ALIVE
        if phase == Phase.SCHEDULED and not alive and self.clock.monotonic() >= record.next_sync:
            try:
                options = self.options()
                networks = await self._pod_network(raw, record, options)
                options = dataclasses.replace(options, pod_networks=networks)
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
                    await self.recorder.event(raw, "Warning", "SyncFailed", message[:1000])
                _log.warning("sync of %s failed: %s", record.identity.name, message)
                return
            record.sync_backoff = 0.0
            record.domain = _domain_view(reply.domain)
        elif record.networks is None and alive:
            # A restarted handler: phase 1 is idempotent, so running it again only
            # re-reads what the pod has (for status.interfaces' IPs).
            try:
                await self._pod_network(raw, record, self.options())
            except NetworkSetupError as error:
                _log.warning("pod network of %s: %s", record.identity.name, error)
        if phase == Phase.RUNNING and alive and not record.agent_connected:
            info = (await conn.cmd.get_guest_info(GetGuestInfoRequest())).info
            if info is not None and info.agent_connected:
                record.agent_connected = True
                if info.os is not None:
                    record.guest_os = GuestOsView(
                        name=info.os.name,
                        id=info.os.id,
                        pretty_name=info.os.pretty_name,
                        version=info.os.version,
                        version_id=info.os.version_id,
                        kernel_release=info.os.kernel_release,
                        kernel_version=info.os.kernel_version,
                        machine=info.os.machine,
                    )

    async def _pod_network(
        self, raw: RawObject, record: GuestRecord, options: ConverterOptions
    ) -> tuple[PodNetwork, ...]:
        """Phase 1 in the launcher pod's netns (idempotent); remembers its networks."""
        assert record.pod is not None
        setup = await setup_pod_network(record.pod, _typed_vmi(raw), options.tap_devices)
        if setup.created:
            _log.info("%s: created %s in the pod", record.identity.name, setup.created)
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
            SyncVirtualMachineRequest(
                vmi=ref,
                vmi_json=json.dumps(thaw(raw)),
                options=options_to_wire(options),
                # The network facts travel in their own field (virt_rpc.options).
                networks=networks_to_wire(options.pod_networks),
            ),
            # A fresh libvirtd probes QEMU first; on a busy node that takes a while.
            timeout=SYNC_TIMEOUT,
        )

    @staticmethod
    def _pod_finished(pod: RawObject) -> bool:
        status = _map(pod.get("status"))
        if status.get("phase") in FINAL_POD_PHASES:
            return True
        for container in status.get("containerStatuses") or ():
            container = _map(container)
            if container.get("name") == "compute" and _map(container.get("state")).get(
                "terminated"
            ):
                return True
        return False

    @staticmethod
    def _compute_image(pod: RawObject) -> str:
        for container in _map(pod.get("spec")).get("containers") or ():
            container = _map(container)
            if container.get("name") == "compute":
                return str(container.get("image") or "")
        return ""

    def _lose_launcher(self, record: GuestRecord, why: str) -> None:
        if not record.launcher_gone:
            _log.warning("%s/%s: %s", record.identity.namespace, record.identity.name, why)
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
        _log.error("refusing the launcher %s of %s: %s", what, record.identity.name, message)
        if what not in record.refused:
            record.refused.add(what)
            await self.recorder.event(raw, "Warning", "LauncherRefused", message)

    @staticmethod
    def _ref(record: GuestRecord) -> VmiRef:
        i = record.identity
        return VmiRef(namespace=i.namespace, name=i.name, uid=i.uid)

    async def _shutdown(self, record: GuestRecord) -> None:
        if record.shutdown_sent or record.conn is None:
            return
        record.shutdown_sent = True
        try:
            await record.conn.cmd.shutdown(ShutdownRequest(vmi=self._ref(record)))
        except (TimeoutError, grpclib.GRPCError, OSError, StreamTerminatedError) as error:
            _log.info("shutdown of %s: %s", record.identity.name, error)

    async def _update_status(self, raw: RawObject, record: GuestRecord) -> None:
        obs = Observation(
            node=self.settings.node,
            domain=record.domain,
            launcher_gone=record.launcher_gone,
            launcher_image=record.launcher_image,
            guest_os=record.guest_os,
            agent_connected=record.agent_connected,
            now=_now(self.clock),
            networks=record.networks,
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
            await self.client.merge_patch(
                VIRTUAL_MACHINE_INSTANCES, str(meta.get("name")), body, str(meta.get("namespace"))
            )
            self.status_patches += 1
        except ApiError as error:
            if error.status == 409:
                self.queue.add_after(key, 0.2)  # someone else wrote first: recompute
                return
            if error.status == 404:
                return  # deleted meanwhile; the informer will tell us
            raise
        if patch.get("phase"):
            _log.info("%s/%s is %s", meta.get("namespace"), meta.get("name"), patch["phase"])

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
        try:
            if action == "shutdown":
                reply = await cmd.shutdown(ShutdownRequest(vmi=self._ref(record)))
            else:
                reply = await calls[action](request)
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
        if reply.domain is not None:
            record.domain = _domain_view(reply.domain)
        self.queue.add(f"{namespace}/{name}")

    async def guest_os_info(self, namespace: str, name: str) -> dict[str, Any]:
        """The guest agent's view (upstream's guestosinfo subresource shape)."""
        record = self.record_for(namespace, name)
        assert record.conn is not None
        info = (await record.conn.cmd.get_guest_info(GetGuestInfoRequest())).info
        if info is None or not info.agent_connected:
            raise CommandError(409, "the guest agent is not connected")
        os_info = GuestOsView(
            name=info.os.name if info.os else "",
            id=info.os.id if info.os else "",
            pretty_name=info.os.pretty_name if info.os else "",
            version=info.os.version if info.os else "",
            version_id=info.os.version_id if info.os else "",
            kernel_release=info.os.kernel_release if info.os else "",
            kernel_version=info.os.kernel_version if info.os else "",
            machine=info.os.machine if info.os else "",
        )
        return {
            "guestAgentVersion": info.agent_version,
            "hostname": info.hostname,
            "os": os_info.as_status(),
            "timezone": info.timezone,
        }

    async def close(self) -> None:
        """Close every connection and Notify server (guests keep running)."""
        for uid in list(self.records):
            await self._forget(uid)
