"""The source side of a live migration: upstream's `MigrationSourceController` (our code).

Part of the VMI sync loop (`VmiSync.migrations`): a VMI whose `status.nodeName` and
`migrationState.sourceNode` are this node, once the target handler published
`targetNodeAddress` and `targetDirectMigrationNodePorts`, gets the source proxy (unix
sockets in its pod, spliced to the target over mutual TLS) and a `Migrate` call built from
`migrationState.migrationConfiguration`. Afterwards the launcher's record of the job
(`Domain.migration`, through Notify) is copied into `migrationState`, an
`abortRequested` becomes one `CancelMigration`, and a domain shut off because it
migrated is left to the target: deleted here so the source launcher can end, and the VMI
failed only if the target never reports its domain ready within 60 s.
"""

from __future__ import annotations

import asyncio
import json
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
    thaw,
)
from kubevirt_api import dump
from kubevirt_api.admission.quantity import parse_quantity
from kubevirt_api.clusterconfig import DEFAULT_MIGRATIONS
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from kubevirt_api.models import MigrationConfiguration
from service_kit import get_logger
from virt_rpc import (
    DomainReason,
    DomainState,
    GetDomainRequest,
    MigrateRequest,
    MigrationOptions,
    SocketPathError,
    VmiRequest,
)

from .launcher import LauncherConnection
from .migratability import BLOCK_MIGRATION
from .migration_proxy import MigrationProxies, MigrationTLSError
from .migration_state import (
    ABORTED_REASON,
    MigrationView,
    is_done,
    migration_state,
    patch_vmi,
    rfc3339,
    state_changes,
)
from .notify import VmiIdentity
from .podfiles import PodFiles
from .safepath import PathRefusedError
from .vmi_sync import GuestRecord

__all__ = [
    "PARALLEL_MIGRATION_THREADS",
    "TARGET_READY_TIMEOUT",
    "MigrationSource",
    "migration_options",
]

_log = get_logger(__name__)

#: multifd connections per migration (upstream: "after consulting with libvirt developers").
PARALLEL_MIGRATION_THREADS = 8
#: How long after the migration ended the target may take to report its domain ready.
TARGET_READY_TIMEOUT = 60.0
_ALIVE = (DomainState.RUNNING, DomainState.BLOCKED, DomainState.PAUSED, DomainState.PMSUSPENDED)
_ABORT_HANDLED = ("Aborting", "Succeeded")
_RPC_ERRORS = (grpclib.GRPCError, OSError, TimeoutError, StreamTerminatedError)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def migration_options(
    vmi: Mapping[str, Any], cluster: MigrationConfiguration = DEFAULT_MIGRATIONS
) -> MigrationOptions:
    """Upstream's `cmdclient.MigrationOptions` for this VMI's migration.

    From `migrationState.migrationConfiguration` (what virt-controller resolved from the
    cluster and the matching MigrationPolicy), over the KubeVirt CR's `migrations`
    (`cluster`, upstream's defaults under it). allowWorkloadDisruption follows
    allowPostCopy when unset; multifd is on unless the VMI has a CPU limit or dedicated
    CPUs.
    """
    state = migration_state(vmi) or {}
    given = {k: v for k, v in _map(state.get("migrationConfiguration")).items() if v is not None}
    config = {**{k: v for k, v in dump(cluster).items() if v is not None}, **given}
    if given and "allowWorkloadDisruption" not in given:
        config["allowWorkloadDisruption"] = given.get("allowPostCopy", config["allowPostCopy"])
    post_copy = config.get("allowPostCopy") is True
    disruption = config.get("allowWorkloadDisruption")
    spec = _map(vmi.get("spec"))
    domain = _map(spec.get("domain"))
    cpu_limit = _map(_map(domain.get("resources")).get("limits")).get("cpu")
    dedicated = _map(domain.get("cpu")).get("dedicatedCpuPlacement") is True
    limited = cpu_limit is not None and parse_quantity(cpu_limit) not in (None, 0)
    bandwidth = parse_quantity(config.get("bandwidthPerMigration", 0)) or 0
    return MigrationOptions(
        migration_uid=str(state.get("migrationUid") or ""),
        bandwidth_bytes_per_second=max(0, int(bandwidth)),
        progress_timeout_seconds=int(config.get("progressTimeout") or 0),
        completion_timeout_per_gib=int(config.get("completionTimeoutPerGiB") or 0),
        allow_auto_converge=config.get("allowAutoConverge") is True,
        allow_post_copy=post_copy,
        allow_workload_disruption=post_copy if disruption is None else disruption is True,
        unsafe=config.get("unsafeMigrationOverride") is True,
        block_migration=_map(vmi.get("status")).get("migrationMethod") == BLOCK_MIGRATION,
        parallel_migration_threads=0 if limited or dedicated else PARALLEL_MIGRATION_THREADS,
    )


@dataclass
class _Run:
    """What this handler did for one outgoing migration."""

    migration_uid: str
    migrate_sent: bool = False
    cancel_sent: bool = False
    delete_sent: bool = False
    #: When the domain was first seen shut off as migrated (this clock's monotonic).
    migrated_at: float | None = None


class MigrationSource:
    """The outgoing migrations of this node's VMIs (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        files: PodFiles,
        proxies: MigrationProxies,
        node: str,
        clock: Clock,
        cluster: Callable[[], MigrationConfiguration] = lambda: DEFAULT_MIGRATIONS,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.files = files
        self.proxies = proxies
        self.node = node
        self.clock = clock
        #: The KubeVirt CR's `spec.configuration.migrations`.
        self.cluster = cluster
        self._runs: dict[str, _Run] = {}
        self._cleanups: set[asyncio.Task[None]] = set()
        self._closing = False

    async def forget(self, uid: str, record: GuestRecord | None = None) -> None:
        """The VMI is no longer ours: close its source proxy; a domain we migrated and
        have not deleted yet is deleted once libvirt shut it off (the target's handler
        can take the VMI over before our launcher reported the end of its job)."""
        run = self._runs.pop(uid, None)
        if run is None:
            return
        await self.proxies.stop_source(run.migration_uid)
        if record is None or record.conn is None or self._closing:
            return
        if run.migrate_sent and not run.delete_sent:
            conn, record.conn = record.conn, None
            task = asyncio.create_task(self._delete_when_off(record.identity, conn))
            self._cleanups.add(task)
            task.add_done_callback(self._cleanups.discard)

    async def _delete_when_off(self, identity: VmiIdentity, conn: LauncherConnection) -> None:
        try:
            deadline = self.clock.monotonic() + TARGET_READY_TIMEOUT
            while self.clock.monotonic() < deadline:
                reply = await conn.cmd.get_domain(GetDomainRequest())
                domain = reply.domain
                if domain is None:
                    return
                if domain.state is DomainState.SHUTOFF:
                    await conn.cmd.delete(VmiRequest(vmi=identity.ref()))
                    _log.info("deleted the domain that migrated away", name=identity.name)
                    return
                await self.clock.sleep(1.0)
            _log.error("left this node but its domain still runs here", name=identity.name)
        except _RPC_ERRORS as error:
            _log.info("deleting the migrated domain failed", name=identity.name, error=str(error))
        finally:
            conn.close()

    @property
    def pending(self) -> frozenset[asyncio.Task[None]]:
        """The deletions of migrated domains still waiting for libvirt to shut them off."""
        return frozenset(self._cleanups)

    async def close(self) -> None:
        """Stop the deletions still waiting; start no new one."""
        self._closing = True
        for task in list(self._cleanups):
            task.cancel()
        await asyncio.gather(*self._cleanups, return_exceptions=True)

    async def reconcile(self, raw: RawObject, record: GuestRecord) -> float | None:
        """One look at the VMI's outgoing migration; when to look again (None: no need)."""
        uid = record.identity.uid
        state = migration_state(raw)
        status = _map(raw.get("status"))
        if state is None or is_done(state):
            await self.forget(uid)
            return None
        if state.get("sourceNode") != self.node or status.get("nodeName") != self.node:
            return None  # not handed off yet, or we are not its source
        migration_uid = str(state.get("migrationUid") or "")
        run = self._runs.get(uid)
        if run is None or run.migration_uid != migration_uid:
            await self.forget(uid)
            run = self._runs[uid] = _Run(migration_uid)
        domain = record.domain
        job = domain.migration if domain is not None else None
        if job is not None and job.uid != migration_uid:
            job = None  # a record of an earlier migration
        if job is not None and await self._copy_progress(raw, state, job):
            return None  # the patch comes back through the informer
        migrated = domain is not None and (domain.state, domain.reason) == (
            DomainState.SHUTOFF,
            DomainReason.MIGRATED,
        )
        if migrated or run.migrated_at is not None:  # also once that domain is deleted
            return await self._migrated(raw, state, record, run)
        if domain is None or domain.state not in _ALIVE or record.conn is None:
            return None
        if state.get("abortRequested"):
            return await self._abort(raw, state, job, record, run)
        address = str(state.get("targetNodeAddress") or "")
        ports = {
            str(k): int(v) for k, v in _map(state.get("targetDirectMigrationNodePorts")).items()
        }
        if not address or not ports or record.pod is None:
            return 1.0  # the target has not published where it listens yet
        pod = record.pod
        # Also after a restart mid-migration: libvirt's connections need the proxy.
        try:
            await self.proxies.start_source(
                migration_uid,
                lambda: self.files.migration_dir(pod, create=True),
                migration_uid,
                address,
                ports,
            )
        except (MigrationTLSError, PathRefusedError, SocketPathError, OSError) as error:
            _log.error("migration source proxy failed", name=record.identity.name, error=str(error))
            await self.recorder.event(raw, "Warning", "SyncFailed", f"migration proxy: {error}")
            return 10.0
        if run.migrate_sent or job is not None:
            return None  # started; Notify events bring the rest
        options = migration_options(raw, self.cluster())
        _log.info("migrating", name=record.identity.name, target=address, options=options.to_dict())
        try:
            await record.conn.cmd.migrate(
                MigrateRequest(
                    vmi=record.identity.ref(), vmi_json=json.dumps(thaw(raw)), options=options
                )
            )
        except _RPC_ERRORS as error:
            message = _message(error)
            _log.warning("Migrate failed", name=record.identity.name, error=message)
            await self.recorder.event(raw, "Warning", "SyncFailed", f"migrate: {message}"[:1000])
            return 5.0
        run.migrate_sent = True
        await self.recorder.event(
            raw, "Normal", "Migrating", "VirtualMachineInstance is migrating."
        )
        return None

    async def _copy_progress(
        self, raw: RawObject, state: Mapping[str, Any], job: MigrationView
    ) -> bool:
        """Upstream's `setMigrationProgressStatus`; True when it patched something."""
        wanted: dict[str, Any] = {}
        if job.start_timestamp:
            wanted["startTimestamp"] = job.start_timestamp
        if job.mode:
            wanted["mode"] = job.mode
        if job.abort_status:
            wanted["abortStatus"] = job.abort_status
        if job.failed:
            wanted.update(
                failed=True,
                completed=True,
                endTimestamp=job.end_timestamp or rfc3339(self.clock.now()),
                failureReason=job.failure_reason,
            )
        changes = state_changes(state, wanted)
        if not changes:
            return False
        if not await self._patch(raw, {"status": {"migrationState": changes}}):
            return False
        if "failed" in changes:
            await self.recorder.event(
                raw,
                "Warning",
                "Migrated",
                f"VirtualMachineInstance migration uid {job.uid} failed. "
                f"reason:{job.failure_reason}",
            )
        return True

    async def _abort(
        self,
        raw: RawObject,
        state: Mapping[str, Any],
        job: MigrationView | None,
        record: GuestRecord,
        run: _Run,
    ) -> float | None:
        """Upstream's `handleMigrationAbort`: one CancelMigration per migration."""
        if (job is not None and job.abort_status in _ABORT_HANDLED) or state.get(
            "abortStatus"
        ) in _ABORT_HANDLED:
            return None
        if job is None and not run.migrate_sent:
            # Never started here: nothing for libvirt to abort; the migration just ends.
            await self._patch(
                raw,
                {
                    "status": {
                        "migrationState": {
                            "abortStatus": "Succeeded",
                            "failed": True,
                            "completed": True,
                            "endTimestamp": rfc3339(self.clock.now()),
                            "failureReason": ABORTED_REASON,
                        }
                    }
                },
            )
            return None
        if run.cancel_sent or record.conn is None:
            return None
        try:
            await record.conn.cmd.cancel_migration(VmiRequest(vmi=record.identity.ref()))
        except _RPC_ERRORS as error:
            _log.warning("CancelMigration failed", name=record.identity.name, error=_message(error))
            return 1.0
        run.cancel_sent = True
        await self.recorder.event(
            raw, "Normal", "Migrating", "VirtualMachineInstance is aborting migration."
        )
        return None

    async def _migrated(
        self, raw: RawObject, state: Mapping[str, Any], record: GuestRecord, run: _Run
    ) -> float | None:
        """The guest left: the VMI is the target's; our domain goes so our launcher can end."""
        record.migrated_away = True
        if run.migrated_at is None:
            run.migrated_at = self.clock.monotonic()
            _log.info("the domain migrated away", name=record.identity.name)
        if not run.delete_sent and record.conn is not None and record.domain is not None:
            try:
                await record.conn.cmd.delete(VmiRequest(vmi=record.identity.ref()))
                run.delete_sent = True
            except _RPC_ERRORS as error:
                _log.info(
                    "deleting the migrated domain failed",
                    name=record.identity.name,
                    error=str(error),
                )
        if state.get("targetNodeDomainReadyTimestamp"):
            return None  # the target runs it; its handler takes the VMI over
        left = TARGET_READY_TIMEOUT - (self.clock.monotonic() - run.migrated_at)
        if left > 0:
            return left
        _log.warning("the target never reported the migrated domain", name=record.identity.name)
        status = _map(raw.get("status"))
        stamps = [dict(s) for s in status.get("phaseTransitionTimestamps") or ()]
        now = rfc3339(self.clock.now())
        stamps.append({"phase": Phase.FAILED, "phaseTransitionTimestamp": now})
        migration: dict[str, Any] = {"completed": True, "failed": True}
        if not state.get("endTimestamp"):
            migration["endTimestamp"] = now
        await self._patch(
            raw,
            {
                "status": {
                    "phase": Phase.FAILED,
                    "phaseTransitionTimestamps": stamps,
                    "migrationState": migration,
                }
            },
        )
        await self.recorder.event(
            raw,
            "Warning",
            "Migrated",
            "The VirtualMachineInstance's domain was never observed on the target after the "
            "migration completed within the timeout period.",
        )
        return None

    async def _patch(self, raw: RawObject, body: Mapping[str, Any]) -> bool:
        return await patch_vmi(self.client, raw, body)


def _message(error: BaseException) -> str:
    if isinstance(error, grpclib.GRPCError):
        return str(error.message or error.status.name)
    return str(error) or type(error).__name__
