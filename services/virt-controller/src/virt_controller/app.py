"""virt-controller's process: informers, the controllers, leader election, /metrics.

Informers and controllers start only once this replica leads (a Lease in the install
namespace), so two replicas never reconcile at once; a replica that loses the lease stops.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web
from kube_runtime import (
    CONTROLLER_REVISIONS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    SERVICES,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ClientSettings,
    Controller,
    EventRecorder,
    KubeClient,
    KubeLeaseApi,
    LeaderElectionConfig,
    LeaderElector,
    RawObject,
    Resource,
    RestListWatch,
    SharedInformer,
    WorkQueue,
    connect,
    drop_managed_fields,
    sync_problems,
)
from kubevirt_api.defaults import DefaultsConfig
from kubevirt_api.exports import APP_VALUE as EXPORTER_VALUE
from kubevirt_api.hotplug import ATTACHMENT_LABEL_VALUE
from kubevirt_api.resources import (
    KUBEVIRTS,
    MIGRATION_POLICIES,
    VIRTUAL_MACHINE_EXPORTS,
    VIRTUAL_MACHINE_INSTANCE_MIGRATIONS,
    VIRTUAL_MACHINE_INSTANCE_REPLICASETS,
    VIRTUAL_MACHINE_POOLS,
    VIRTUAL_MACHINE_RESTORES,
    VIRTUAL_MACHINE_SNAPSHOT_CONTENTS,
    VIRTUAL_MACHINE_SNAPSHOTS,
)
from service_kit import (
    CheckResult,
    Health,
    LiveVerbosity,
    MetricsRegistry,
    ServiceRunner,
    TCPListener,
    add_health_routes,
    add_metrics_route,
    configure_logging,
    get_logger,
    run_service,
)

from .config import DEFAULT_EXPORTER_IMAGE, DEFAULT_LAUNCHER_IMAGE, ControllerConfig
from .evacuation import EVACUATION_INDEX, EvacuationController, index_by_evacuation_node
from .export import EXPORT_SOURCE_INDEX, ExportController, index_by_export_source
from .metrics import ComponentStatus, ControllerMetrics
from .migration import MigrationController
from .node import NODE_INDEX, NodeController
from .objects import deleting, index_by_controller, index_by_node, mapping
from .pool import POOL_KIND, PoolController
from .replicaset import ReplicaSetController
from .restore import (
    RESTORE_SNAPSHOT_INDEX,
    RESTORE_TARGET_INDEX,
    RestoreController,
    index_by_restore_snapshot,
    index_by_restore_target,
)
from .snapshot import SOURCE_INDEX, SnapshotController, index_by_source
from .vm import VmController
from .vmi import OWNER_INDEX, VmiController
from .vmstats import CacheCollector, launcher_overhead
from .wellknown import APP_LABEL, LAUNCHER_VALUE

__all__ = ["Settings", "main", "parse_args", "run_controllers"]

#: This service's name in the KubeVirt CR's logVerbosity and in its log lines.
COMPONENT = "virt-controller"

log = get_logger(__name__)


@dataclass(frozen=True)
class Settings:
    """The command line, validated."""

    kubeconfig: str | None
    bind: str
    port: int
    leader_elect: bool
    lease_namespace: str
    lease_name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    workers: int
    qps: float
    burst: int
    node_heartbeat_timeout: float
    cluster: ControllerConfig
    #: --use-emulation, which wins over the KubeVirt CR.
    emulation_override: bool | None = None
    log_level: str = "info"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-controller", description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (else $KUBECONFIG or in-cluster)")
    p.add_argument("--bind", default="0.0.0.0", help="address of /metrics, /healthz, /readyz")
    p.add_argument("--port", type=int, default=8443)
    p.add_argument("--leader-elect", default="true", choices=("true", "false"))
    p.add_argument("--lease-namespace", default="kubevirt")
    p.add_argument("--lease-name", default="virt-controller")
    p.add_argument("--identity", default=None, help="leader election identity (host_pid)")
    p.add_argument("--lease-duration", type=float, default=15.0)
    p.add_argument("--renew-deadline", type=float, default=10.0)
    p.add_argument("--retry-period", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=10, help="workers per controller")
    p.add_argument("--qps", type=float, default=200.0)
    p.add_argument("--burst", type=int, default=400)
    p.add_argument("--launcher-image", default=DEFAULT_LAUNCHER_IMAGE)
    p.add_argument("--exporter-image", default=DEFAULT_EXPORTER_IMAGE)
    p.add_argument(
        "--image-pull-policy", default="IfNotPresent", choices=("Always", "IfNotPresent", "Never")
    )
    p.add_argument(
        "--use-emulation",
        default=None,
        choices=("true", "false"),
        help="override the KubeVirt CR's developerConfiguration.useEmulation",
    )
    p.add_argument("--node-heartbeat-timeout", type=float, default=300.0)
    p.add_argument("--log-level", default="info")
    return p


class UsageError(ValueError):
    """A flag's value is invalid; the message names the flag."""


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    """Parse and validate flags; raises UsageError naming the flag."""
    ns = _parser().parse_args(argv)
    if not 0 <= ns.port <= 65535:
        raise UsageError(f"--port: {ns.port} is not a port number (0-65535)")
    if ns.workers < 1:
        raise UsageError("--workers: must be at least 1")
    if ns.qps <= 0 or ns.burst < 1:
        raise UsageError("--qps must be > 0 and --burst >= 1")
    if ns.node_heartbeat_timeout <= 0:
        raise UsageError("--node-heartbeat-timeout: must be > 0 seconds")
    if not ns.lease_duration > ns.renew_deadline > ns.retry_period * 1.2 > 0:
        raise UsageError(
            "--lease-duration > --renew-deadline > 1.2 x --retry-period > 0 is required"
        )
    cluster = ControllerConfig(
        launcher_image=ns.launcher_image,
        image_pull_policy=ns.image_pull_policy,
        exporter_image=ns.exporter_image,
    )
    return Settings(
        kubeconfig=ns.kubeconfig,
        bind=ns.bind,
        port=ns.port,
        leader_elect=ns.leader_elect == "true",
        lease_namespace=ns.lease_namespace,
        lease_name=ns.lease_name,
        identity=ns.identity or f"{socket.gethostname()}_{os.getpid()}",
        lease_duration=ns.lease_duration,
        renew_deadline=ns.renew_deadline,
        retry_period=ns.retry_period,
        workers=ns.workers,
        qps=ns.qps,
        burst=ns.burst,
        node_heartbeat_timeout=ns.node_heartbeat_timeout,
        cluster=cluster,
        log_level=ns.log_level,
        emulation_override=None if ns.use_emulation is None else ns.use_emulation == "true",
    )


def _informer(
    client: KubeClient,
    resource: Resource,
    *,
    label_selector: str | None = None,
    indexers: dict[str, Any] | None = None,
) -> SharedInformer[RawObject]:
    return SharedInformer(
        RestListWatch(client, resource, label_selector=label_selector),
        name=resource.plural,
        indexers=indexers,
        transform=drop_managed_fields,  # nothing here reads them; ~40% of a cached object
    )


async def run_controllers(
    client: KubeClient,
    settings: Settings,
    registry: MetricsRegistry,
    stop: asyncio.Event,
    *,
    on_informers: Callable[[list[SharedInformer[Any]]], None] | None = None,
) -> None:
    """Run the informers and all controllers until `stop` is set. `on_informers` gets the
    informers once made (readiness reports which have not synced and why)."""
    vmis = _informer(
        client,
        VIRTUAL_MACHINE_INSTANCES,
        indexers={
            OWNER_INDEX: index_by_controller(None),
            NODE_INDEX: index_by_node,
            EVACUATION_INDEX: index_by_evacuation_node,
        },
    )
    pods = _informer(
        client,
        PODS,
        label_selector=f"{APP_LABEL}={LAUNCHER_VALUE}",
        indexers={OWNER_INDEX: index_by_controller("VirtualMachineInstance")},
    )
    vms = _informer(
        client, VIRTUAL_MACHINES, indexers={OWNER_INDEX: index_by_controller(POOL_KIND)}
    )
    pools = _informer(client, VIRTUAL_MACHINE_POOLS)
    revisions = _informer(
        client, CONTROLLER_REVISIONS, indexers={OWNER_INDEX: index_by_controller(POOL_KIND)}
    )
    sets = _informer(client, VIRTUAL_MACHINE_INSTANCE_REPLICASETS)
    migrations = _informer(client, VIRTUAL_MACHINE_INSTANCE_MIGRATIONS)
    nodes = _informer(client, NODES)
    kubevirts = _informer(client, KUBEVIRTS)
    policies = _informer(client, MIGRATION_POLICIES)
    claims = _informer(client, PERSISTENT_VOLUME_CLAIMS)
    snapshots = _informer(
        client, VIRTUAL_MACHINE_SNAPSHOTS, indexers={SOURCE_INDEX: index_by_source}
    )
    contents = _informer(client, VIRTUAL_MACHINE_SNAPSHOT_CONTENTS)
    restores = _informer(
        client,
        VIRTUAL_MACHINE_RESTORES,
        indexers={
            RESTORE_TARGET_INDEX: index_by_restore_target,
            RESTORE_SNAPSHOT_INDEX: index_by_restore_snapshot,
        },
    )
    exports = _informer(
        client, VIRTUAL_MACHINE_EXPORTS, indexers={EXPORT_SOURCE_INDEX: index_by_export_source}
    )
    attachment_pods = _informer(
        client,
        PODS,
        label_selector=f"{APP_LABEL}={ATTACHMENT_LABEL_VALUE}",
        indexers={OWNER_INDEX: index_by_controller("Pod")},
    )
    exporter_pods = _informer(client, PODS, label_selector=f"{APP_LABEL}={EXPORTER_VALUE}")
    exporter_services = _informer(client, SERVICES, label_selector=f"{APP_LABEL}={EXPORTER_VALUE}")

    def cluster_config() -> ControllerConfig:
        live = [k for k in kubevirts.store.objects() if not deleting(k)]
        config = settings.cluster.with_kubevirt(live[0] if live else None)
        if settings.emulation_override is not None:
            cluster = replace(config.cluster, use_emulation=settings.emulation_override)
            config = replace(config, cluster=cluster)
        return config

    verbosity = LiveVerbosity(settings.log_level)

    def on_kubevirt(_event: object) -> None:
        verbosity.apply(cluster_config().cluster.verbosity(COMPONENT))

    kubevirts.add_handler(on_kubevirt)
    metrics = ControllerMetrics(registry)

    def queue(name: str) -> WorkQueue[str]:
        return WorkQueue(name, metrics=registry)

    vmi_ctl = VmiController(
        client,
        vmis,
        pods,
        queue("virt-controller-vmi"),
        cluster_config,
        metrics,
        recorder=EventRecorder(client, "virt-controller"),
        claims=claims,
        attachment_pods=attachment_pods,
    )

    def vm_defaults() -> DefaultsConfig:
        live = [k for k in kubevirts.store.objects() if not deleting(k)]
        spec = mapping(live[0].get("spec")) if live else {}
        return DefaultsConfig.from_kubevirt(mapping(spec.get("configuration")))

    vm_ctl = VmController(
        client,
        vms,
        vmis,
        queue("virt-controller-vm"),
        metrics,
        recorder=EventRecorder(client, "virt-controller"),
        defaults=vm_defaults,
        claims=claims,
    )
    rs_ctl = ReplicaSetController(client, sets, vmis, queue("virt-controller-replicaset"))
    mig_ctl = MigrationController(
        client,
        migrations,
        vmis,
        pods,
        queue("virt-controller-migration"),
        cluster_config,
        policies=policies,
        metrics=metrics,
        recorder=EventRecorder(client, "virt-controller"),
    )
    pool_ctl = PoolController(
        client,
        pools,
        vms,
        vmis,
        revisions,
        queue("virt-controller-pool"),
        recorder=EventRecorder(client, "virt-controller"),
    )
    evacuation_ctl = EvacuationController(
        client,
        nodes,
        vmis,
        migrations,
        pods,
        queue("virt-controller-evacuation"),
        cluster_config,
        recorder=EventRecorder(client, "virt-controller"),
    )
    node_ctl = NodeController(
        client, nodes, vmis, queue("virt-controller-node"), timeout=settings.node_heartbeat_timeout
    )
    snapshot_ctl = SnapshotController(
        client,
        snapshots,
        contents,
        vms,
        vmis,
        queue("virt-controller-snapshot"),
        recorder=EventRecorder(client, "virt-controller"),
    )
    restore_ctl = RestoreController(
        client,
        restores,
        snapshots,
        contents,
        vms,
        vmis,
        queue("virt-controller-restore"),
        recorder=EventRecorder(client, "virt-controller"),
    )
    snapshots.add_handler(snapshot_ctl.on_snapshot)
    snapshots.add_handler(restore_ctl.on_snapshot)
    contents.add_handler(snapshot_ctl.on_content)
    restores.add_handler(restore_ctl.on_restore)
    vms.add_handler(snapshot_ctl.on_vm)
    vms.add_handler(restore_ctl.on_target)
    vmis.add_handler(snapshot_ctl.on_vmi)
    vmis.add_handler(restore_ctl.on_target)
    export_ctl = ExportController(
        client,
        exports,
        exporter_pods,
        exporter_services,
        claims,
        vms,
        vmis,
        queue("virt-controller-export-vmexport"),
        image=lambda: (settings.cluster.exporter_image, settings.cluster.image_pull_policy),
        recorder=EventRecorder(client, "virt-controller"),
    )
    vmis.add_handler(vmi_ctl.on_vmi)
    vmis.add_handler(vm_ctl.on_vmi)
    vmis.add_handler(rs_ctl.on_vmi)
    vmis.add_handler(node_ctl.on_vmi)
    vmis.add_handler(pool_ctl.on_vmi)
    vmis.add_handler(mig_ctl.on_vmi)
    vmis.add_handler(evacuation_ctl.on_vmi)
    pods.add_handler(vmi_ctl.on_pod)
    pods.add_handler(mig_ctl.on_pod)
    vms.add_handler(vm_ctl.on_vm)
    vms.add_handler(pool_ctl.on_vm)
    pools.add_handler(pool_ctl.on_pool)
    revisions.add_handler(pool_ctl.on_revision)
    sets.add_handler(rs_ctl.on_set)
    migrations.add_handler(mig_ctl.on_migration)
    migrations.add_handler(evacuation_ctl.on_migration)
    nodes.add_handler(node_ctl.on_node)
    nodes.add_handler(evacuation_ctl.on_node)
    claims.add_handler(vmi_ctl.on_claim)
    attachment_pods.add_handler(vmi_ctl.on_attachment_pod)
    exports.add_handler(export_ctl.on_export)
    exporter_pods.add_handler(export_ctl.on_owned)
    exporter_services.add_handler(export_ctl.on_owned)
    claims.add_handler(export_ctl.on_claim)
    vms.add_handler(export_ctl.on_vm)
    vmis.add_handler(export_ctl.on_vmi)

    informers = [
        *(vmis, pods, vms, sets, migrations, nodes, kubevirts, pools, revisions, policies),
        *(claims, attachment_pods, snapshots, contents, restores),
        *(exports, exporter_pods, exporter_services),
    ]
    if on_informers is not None:
        on_informers(informers)
    all_synced = [*informers]
    controllers: list[Controller[str]] = [
        Controller(
            "vmi", vmi_ctl.queue, vmi_ctl.reconcile, workers=settings.workers, informers=all_synced
        ),
        Controller(
            "vm", vm_ctl.queue, vm_ctl.reconcile, workers=settings.workers, informers=all_synced
        ),
        Controller(
            "replicaset",
            rs_ctl.queue,
            rs_ctl.reconcile,
            workers=settings.workers,
            informers=all_synced,
        ),
        Controller(
            "pool",
            pool_ctl.queue,
            pool_ctl.reconcile,
            workers=settings.workers,
            informers=all_synced,
        ),
        Controller("migration", mig_ctl.queue, mig_ctl.reconcile, workers=1, informers=all_synced),
        Controller(
            "snapshot", snapshot_ctl.queue, snapshot_ctl.reconcile, workers=2, informers=all_synced
        ),
        Controller(
            "restore", restore_ctl.queue, restore_ctl.reconcile, workers=1, informers=all_synced
        ),
        Controller("node", node_ctl.queue, node_ctl.reconcile, workers=1, informers=all_synced),
        Controller(
            "evacuation",
            evacuation_ctl.queue,
            evacuation_ctl.reconcile,
            workers=1,
            informers=all_synced,
        ),
        Controller(
            "export",
            export_ctl.queue,
            export_ctl.reconcile,
            workers=settings.workers,
            informers=all_synced,
        ),
    ]
    tasks = [asyncio.ensure_future(i.run(stop)) for i in informers]
    tasks += [asyncio.ensure_future(c.run(stop)) for c in controllers]
    # Only while these caches live (one leadership term): a standby reports no VM series.
    cache_stats = CacheCollector(
        registry,
        vms.store.objects,
        vmis.store.objects,
        launcher_overhead(lambda: cluster_config().cluster.additional_overhead_ratio),
    )
    stop_collecting = registry.add_collector(cache_stats.collect)

    async def report_sync() -> None:
        for informer in informers:
            await informer.wait_for_sync()
        log.info("informers synced")

    tasks.append(asyncio.ensure_future(report_sync()))
    try:
        done, _ = await asyncio.wait(
            [*tasks, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_EXCEPTION
        )
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        stop_collecting()
        cache_stats.clear()
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


def _service(settings: Settings) -> ServiceRunner:
    registry = MetricsRegistry()
    health = Health()
    state = {"leading": not settings.leader_elect, "connected": False}
    watching: list[SharedInformer[Any]] = []

    def leader_ready() -> CheckResult:
        # Only the leader is ready (it alone reconciles); say why in /readyz's body.
        if not state["leading"]:
            return CheckResult(False, "not leading: another virt-controller holds the lease")
        problems = sync_problems(watching) if watching else "informers not started yet"
        return CheckResult(not problems, problems)

    def watch(informers: list[SharedInformer[Any]]) -> None:
        watching[:] = informers

    health.add_readiness_check("leader", leader_ready)
    # A standby is ready once it reaches the API server (it can take the lead); the
    # leader once its caches are synced, as its /readyz.
    ComponentStatus(
        registry,
        leading=lambda: state["leading"],
        ready=lambda: state["connected"] and (not state["leading"] or leader_ready().ok),
    )
    app = web.Application()
    add_health_routes(app, health)
    add_metrics_route(app, registry)

    async def controllers(stop: asyncio.Event) -> None:
        client = await connect(
            settings.kubeconfig,
            settings=ClientSettings(
                qps=settings.qps,
                burst=settings.burst,
                user_agent="virt-controller",
                field_manager="virt-controller",
            ),
            metrics=registry,
        )
        async with client:
            state["connected"] = True
            if not settings.leader_elect:
                await run_controllers(client, settings, registry, stop, on_informers=watch)
                return

            async def lead(lost: asyncio.Event) -> None:
                state["leading"] = True
                inner = asyncio.Event()

                async def relay() -> None:
                    await asyncio.wait(
                        [asyncio.ensure_future(lost.wait()), asyncio.ensure_future(stop.wait())],
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    inner.set()

                relay_task = asyncio.ensure_future(relay())
                try:
                    await run_controllers(client, settings, registry, inner, on_informers=watch)
                finally:
                    relay_task.cancel()
                    state["leading"] = False

            elector = LeaderElector(
                KubeLeaseApi(client, settings.lease_namespace, settings.lease_name),
                LeaderElectionConfig(
                    identity=settings.identity,
                    lease_duration=settings.lease_duration,
                    renew_deadline=settings.renew_deadline,
                    retry_period=settings.retry_period,
                ),
                on_started_leading=lead,
                on_new_leader=lambda who: log.info("leader", identity=who),
            )
            await elector.run(stop)
            if not stop.is_set():
                raise RuntimeError("lost leadership")  # exit so a restart campaigns afresh

    return ServiceRunner(
        app,
        [TCPListener(settings.bind, settings.port)],
        background={"controllers": controllers},
        health=health,
        shutdown_timeout=15.0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`virt-controller [flags]`: exit 0 on SIGTERM, 1 on a failure, 2 on bad flags."""
    try:
        settings = parse_args(argv)
    except UsageError as exc:
        print(f"virt-controller: {exc}", file=sys.stderr)
        return 2
    try:
        configure_logging(settings.log_level, component=COMPONENT)
    except ValueError as exc:
        print(f"virt-controller: --log-level: {exc}", file=sys.stderr)
        return 2
    return run_service(_service(settings))
