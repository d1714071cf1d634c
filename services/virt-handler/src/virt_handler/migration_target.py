"""The target side of a live migration: upstream's `MigrationTargetController` (our code).

Its own loop over the VMIs labelled `kubevirt.io/migrationTargetNodeName=<this node>`.
For each, once virt-controller handed off (`migrationState.targetPod` on this node):
serve Notify in the target pod, reach its launcher, run phase 1 of the pod network, send
`PrepareMigrationTarget` (the same request as a Sync), start the target proxy and
publish `targetNodeAddress` and `targetDirectMigrationNodePorts`. From the target
launcher's events it sets `targetNodeDomainDetected` and
`targetNodeDomainReadyTimestamp`; when the launcher records the migration's end while
the domain runs, it calls `FinalizeMigration` and acknowledges in one patch: the VMI's
node (status and label) becomes this one, `completed`, `endTimestamp`,
`migrationTransport: Unix`, the target label goes. Then the sync loop of this node owns
the VMI, and the proxy stops.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpclib
from grpclib.exceptions import StreamTerminatedError
from kube_runtime import (
    Clock,
    EventRecorder,
    KubeClient,
    RawObject,
    Result,
    SharedInformer,
    WorkQueue,
)
from kubevirt_api.enums import FINAL_VMI_PHASES
from service_kit import get_logger
from virt_domain import ConverterOptions
from virt_domain.launcher_pod import (
    LIBVIRT_SOCKET,
    MIGRATION_BLOCK_PORT,
    MIGRATION_MEMORY_PORT,
    migration_proxy_socket,
)
from virt_rpc import (
    DomainEvent,
    DomainReason,
    DomainState,
    GetDomainRequest,
    SocketPathError,
    UnsupportedProtocolVersionError,
    VmiRequest,
)

from .launcher import BUILD_VERSION, LauncherConnection, connect_launcher
from .migratability import BLOCK_MIGRATION
from .migration_proxy import (
    Connection,
    MigrationProxies,
    MigrationTLSError,
    Opener,
    TargetProxy,
)
from .migration_state import (
    MIGRATION_TARGET_LABEL,
    MIGRATION_TRANSPORT_UNIX,
    NODE_NAME_LABEL,
    migration_state,
    patch_vmi,
    rfc3339,
    state_changes,
)
from .network import NetworkSetupError, setup_pod_network
from .notify import NotifyServer, VmiIdentity
from .podfiles import PodFiles, PodUid, pod_uid
from .safepath import PathRefusedError, PinnedDir
from .status import DomainView
from .vmi_sync import (
    LauncherCallbacks,
    domain_view,
    launcher_pod_owner,
    pod_finished,
    sync_request,
    typed_vmi,
)

__all__ = ["MigrationTarget", "TargetRecord", "TargetSettings", "target_openers"]

_log = get_logger(__name__)
_CHUNK = 256 * 1024
_RPC_ERRORS = (grpclib.GRPCError, OSError, TimeoutError, StreamTerminatedError)
#: PrepareMigrationTarget converts the VMI and writes its disks: as slow as a first Sync.
_PREPARE_TIMEOUT = 180.0


@dataclass(frozen=True)
class TargetSettings:
    """This node, and the address the source handler reaches its proxy at."""

    node: str
    address: str
    waiting_resync: float = 1.0
    running_resync: float = 10.0


@dataclass
class TargetRecord:
    """What the target handler holds for one incoming migration."""

    identity: VmiIdentity
    migration_uid: str
    pod: PodUid | None = None
    notify: NotifyServer | None = None
    conn: LauncherConnection | None = None
    domain: DomainView | None = None
    prepared: bool = False
    # Failed preparations back off (1 s doubling to 30 s), as the sync loop's syncs do.
    backoff: float = 0.0
    next_try: float = 0.0
    last_failure: str = ""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _socket_opener(directory: Callable[[], PinnedDir], name: str) -> Opener:
    async def open_() -> Connection:
        def pin() -> Any:
            with directory() as found:
                return found.socket(name)

        # Found afresh per connection: QEMU binds its socket only once libvirt prepared it.
        sock = await asyncio.to_thread(pin)
        try:
            return await asyncio.open_unix_connection(sock.path, limit=_CHUNK)
        finally:
            sock.close()

    return open_


def target_openers(
    files: PodFiles, pod: PodUid, migration_uid: str, block: bool
) -> dict[int, Opener]:
    """The target pod's sockets by stream: libvirt's (0), QEMU's memory and disk streams."""
    streams = [MIGRATION_MEMORY_PORT] + ([MIGRATION_BLOCK_PORT] if block else [])
    openers = {0: _socket_opener(lambda: files.libvirt_dir(pod), LIBVIRT_SOCKET)}
    for stream in streams:
        openers[stream] = _socket_opener(
            lambda: files.migration_dir(pod), migration_proxy_socket(migration_uid, stream)
        )
    return openers


def _active(domain: DomainView | None) -> bool:
    """Upstream's `domainIsActiveOnTarget`: running, or paused by the user."""
    if domain is None:
        return False
    return domain.state is DomainState.RUNNING or (
        domain.state is DomainState.PAUSED and domain.reason is DomainReason.USER
    )


class MigrationTarget(LauncherCallbacks):
    """Incoming migrations of this node (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        vmis: SharedInformer[Any],
        pods: SharedInformer[Any],
        queue: WorkQueue[str],
        files: PodFiles,
        recorder: EventRecorder,
        settings: TargetSettings,
        proxies: MigrationProxies,
        options: Callable[[], ConverterOptions],
        clock: Clock,
    ) -> None:
        self.client = client
        self.vmis = vmis
        self.pods = pods
        self.queue = queue
        self.files = files
        self.recorder = recorder
        self.settings = settings
        self.proxies = proxies
        self.options = options
        self.clock = clock
        self.records: dict[str, TargetRecord] = {}
        self._watch(vmis, pods)

    def _on_domain(self, vmi: VmiIdentity, event: DomainEvent) -> None:
        record = self.records.get(vmi.uid)
        if record is not None:
            self._domain_seen(vmi, record, event)

    async def _forget(self, uid: str) -> None:
        record = self.records.pop(uid, None)
        if record is None:
            return
        await self.proxies.stop_target(record.migration_uid)
        if record.conn is not None:
            record.conn.close()
        if record.notify is not None:
            await record.notify.stop()

    async def close(self) -> None:
        """Stop every proxy, connection and Notify server of this loop."""
        for uid in list(self.records):
            await self._forget(uid)

    def _target_pod(self, raw: RawObject, state: Mapping[str, Any]) -> RawObject | None:
        meta = _map(raw.get("metadata"))
        for pod in self.pods.store.objects():
            pod_meta = _map(pod.get("metadata"))
            owner = launcher_pod_owner(pod)
            if (
                pod_meta.get("name") == state.get("targetPod")
                and pod_meta.get("namespace") == meta.get("namespace")
                and owner is not None
                and owner[1] == meta.get("uid")
                and _map(pod.get("spec")).get("nodeName") == self.settings.node
            ):
                return pod
        return None

    async def reconcile(self, key: str) -> Result | None:
        """One look at an incoming migration; see the module docstring."""
        raw = self.vmis.get_raw(key)
        if raw is None:
            for uid, gone in list(self.records.items()):
                if f"{gone.identity.namespace}/{gone.identity.name}" == key:
                    await self._forget(uid)
            return None
        meta = _map(raw.get("metadata"))
        uid = str(meta.get("uid") or "")
        state = migration_state(raw)
        labels = _map(meta.get("labels"))
        phase = str(_map(raw.get("status")).get("phase") or "")
        ours = (
            state is not None
            and labels.get(MIGRATION_TARGET_LABEL) == self.settings.node
            and state.get("targetNode") == self.settings.node
            and state.get("targetPod")
        )
        if not ours or phase in FINAL_VMI_PHASES or meta.get("deletionTimestamp"):
            await self._forget(uid)
            return None
        assert state is not None
        if state.get("completed") or state.get("failed"):
            await self._forget(uid)
            if labels.get(MIGRATION_TARGET_LABEL):  # upstream's finalCleanup
                await self._patch(raw, {"metadata": {"labels": {MIGRATION_TARGET_LABEL: None}}})
            return None
        migration_uid = str(state.get("migrationUid") or "")
        record = self.records.get(uid)
        if record is None or record.migration_uid != migration_uid:
            await self._forget(uid)
            identity = VmiIdentity(str(meta.get("namespace")), str(meta.get("name")), uid)
            record = self.records[uid] = TargetRecord(identity, migration_uid)
        later = await self._reach_launcher(raw, record)
        if later is not None:
            return Result(requeue_after=later)
        assert record.pod is not None
        block = _map(raw.get("status")).get("migrationMethod") == BLOCK_MIGRATION
        try:
            proxy = await self.proxies.start_target(
                migration_uid,
                self.settings.address,
                target_openers(self.files, record.pod, migration_uid, block),
            )
        except (MigrationTLSError, OSError) as error:
            _log.error(
                "migration target cannot listen", name=record.identity.name, error=str(error)
            )
            await self._fail_once(raw, record, "SyncFailed", str(error))
            return Result(requeue_after=self.settings.running_resync)
        return await self._update_status(raw, state, record, proxy)

    async def _reach_launcher(self, raw: RawObject, record: TargetRecord) -> float | None:
        """Notify, the launcher's Cmd and the preparation; None once all are done."""
        state = migration_state(raw) or {}
        pod = self._target_pod(raw, state)
        if pod is None:
            return self.settings.waiting_resync
        if pod_finished(pod):
            _log.warning("the migration target pod finished", name=record.identity.name)
            return self.settings.running_resync
        try:
            record.pod = pod_uid(_map(pod.get("metadata")).get("uid"))
        except PathRefusedError as error:
            _log.error("target pod refused", name=record.identity.name, error=str(error))
            return self.settings.running_resync
        if record.notify is None:
            notify = NotifyServer(record.pod, record.identity, self._sink())
            try:
                await notify.start(self.files, BUILD_VERSION)
            except FileNotFoundError:
                return self.settings.waiting_resync
            except (PathRefusedError, SocketPathError, OSError) as error:
                await self._fail_once(raw, record, "LauncherRefused", f"notify: {error}")
                return self.settings.running_resync
            record.notify = notify
        if record.conn is None:
            try:
                record.conn = await connect_launcher(self.files, record.pod)
            except FileNotFoundError:
                return self.settings.waiting_resync
            except (PathRefusedError, SocketPathError, UnsupportedProtocolVersionError) as error:
                await self._fail_once(raw, record, "LauncherRefused", str(error))
                return self.settings.running_resync
            except _RPC_ERRORS as error:
                _log.info(
                    "target launcher not answering yet", name=record.identity.name, error=str(error)
                )
                return self.settings.waiting_resync
        if record.prepared:
            return None
        if state.get("targetNodeAddress") or state.get("startTimestamp"):
            # Prepared before this handler (re)started, maybe migrating already: preparing
            # again could touch what the incoming QEMU uses. Only the proxy is redone.
            try:
                reply = await record.conn.cmd.get_domain(GetDomainRequest(), timeout=120)
            except _RPC_ERRORS as error:
                _log.info(
                    "target launcher call failed", name=record.identity.name, error=str(error)
                )
                return self.settings.waiting_resync
            record.domain = domain_view(reply.domain)
            record.prepared = True
            return None
        wait = record.next_try - self.clock.monotonic()
        if wait > 0:
            return wait
        try:
            await self._prepare(raw, record, record.conn)
        except (NetworkSetupError, *_RPC_ERRORS) as error:
            record.backoff = min(max(1.0, record.backoff * 2), 30.0)
            record.next_try = self.clock.monotonic() + record.backoff
            if isinstance(error, (OSError, StreamTerminatedError)):
                record.conn.close()
                record.conn = None
            message = (
                str(error.message or error.status.name)
                if isinstance(error, grpclib.GRPCError)
                else str(error) or type(error).__name__
            )
            _log.warning(
                "preparing the migration target failed", name=record.identity.name, error=message
            )
            await self._fail_once(raw, record, "SyncFailed", message)
            return record.backoff
        record.prepared = True
        await self.recorder.event(
            raw, "Normal", "PreparingTarget", "VirtualMachineInstance Migration Target Prepared."
        )
        return None

    async def _prepare(
        self, raw: RawObject, record: TargetRecord, conn: LauncherConnection
    ) -> None:
        """Phase 1 of the pod network in the target pod, then PrepareMigrationTarget."""
        assert record.pod is not None
        options = self.options()
        setup = await setup_pod_network(record.pod, typed_vmi(raw), options.tap_devices)
        options = dataclasses.replace(options, pod_networks=setup.networks)
        # Its reply names no domain worth keeping: libvirt creates the incoming one later,
        # and the launcher's events report it.
        await conn.cmd.prepare_migration_target(
            sync_request(raw, record.identity.ref(), options), timeout=_PREPARE_TIMEOUT
        )

    async def _update_status(
        self, raw: RawObject, state: Mapping[str, Any], record: TargetRecord, proxy: TargetProxy
    ) -> Result | None:
        """Upstream's target `updateStatus`: address and ports, domain seen, ready, done."""
        wanted: dict[str, Any] = {
            "targetNodeAddress": self.settings.address,
            "targetDirectMigrationNodePorts": proxy.ports,
        }
        domain = record.domain
        if domain is not None:
            wanted["targetNodeDomainDetected"] = True
        if _active(domain) and not state.get("targetNodeDomainReadyTimestamp"):
            wanted["targetNodeDomainReadyTimestamp"] = rfc3339(self.clock.now())
        job = domain.migration if domain is not None else None
        if job is not None and job.uid == record.migration_uid and job.end_timestamp:
            wanted["endTimestamp"] = job.end_timestamp
            if not state.get("startTimestamp") and job.start_timestamp:
                wanted["startTimestamp"] = job.start_timestamp
            if _active(domain):
                return await self._complete(raw, state, record, wanted)
            # It ended and the guest does not run here: QEMU's side of it was aborted.
            wanted.update(failed=True, completed=True)
        changes = state_changes(state, wanted)
        if "targetNodeAddress" in changes or "targetDirectMigrationNodePorts" in changes:
            ports = ",".join(sorted(proxy.ports, key=int))
            await self.recorder.event(
                raw,
                "Normal",
                "PreparingTarget",
                f"Migration Target is listening at {self.settings.address}, on ports: {ports}",
            )
        if changes:
            await self._patch(raw, {"status": {"migrationState": changes}})
        return Result(requeue_after=self.settings.running_resync)

    async def _complete(
        self,
        raw: RawObject,
        state: Mapping[str, Any],
        record: TargetRecord,
        wanted: dict[str, Any],
    ) -> Result | None:
        """Finalize in the target launcher, then take the VMI over in one patch."""
        assert record.conn is not None
        try:
            await record.conn.cmd.finalize_migration(
                VmiRequest(vmi=record.identity.ref()), timeout=60
            )
        except _RPC_ERRORS as error:
            _log.warning(
                "finalizing the migration failed", name=record.identity.name, error=str(error)
            )
            return Result(requeue_after=self.settings.waiting_resync)
        node = self.settings.node
        changes = state_changes(state, {**wanted, "completed": True})
        patched = await self._patch(
            raw,
            {
                "metadata": {"labels": {NODE_NAME_LABEL: node, MIGRATION_TARGET_LABEL: None}},
                "status": {
                    "nodeName": node,
                    "migrationTransport": MIGRATION_TRANSPORT_UNIX,
                    # The target pod's image; this node's sync loop fills it in again.
                    "launcherContainerImageVersion": None,
                    "migrationState": changes,
                },
            },
        )
        if not patched:
            return None
        _log.info(
            "vmi migrated here",
            namespace=record.identity.namespace,
            name=record.identity.name,
            node=node,
        )
        await self.recorder.event(
            raw, "Normal", "Migrated", f"The VirtualMachineInstance migrated to node {node}."
        )
        await self._forget(record.identity.uid)
        return None

    async def _fail_once(
        self, raw: RawObject, record: TargetRecord, reason: str, message: str
    ) -> None:
        if message != record.last_failure:
            record.last_failure = message
            await self.recorder.event(raw, "Warning", reason, message[:1000])

    async def _patch(self, raw: RawObject, body: Mapping[str, Any]) -> bool:
        return await patch_vmi(self.client, raw, body)
