"""virt-handler's process: flags, informers, the sync loop, device plugins, relay, heartbeat.

```
python -m virt_handler --node-name NODE [--kubeconfig F] [--kubelet-root /var/lib/kubelet]
    [--runtime-dir /var/run/kubevirt] [--bind 0.0.0.0] [--port 8186]
    [--tls-cert C --tls-key K --client-ca CA] [--metrics-bind 127.0.0.1] [--metrics-port 8090]
    [--use-emulation auto|true|false] [--max-devices 1000] [--heartbeat-interval 30]
    [--pod-ip-address IP]
```

Live migration runs on the relay's TLS material: the target's proxy serves the relay
certificate and requires a client certificate from --client-ca; the source presents the
relay certificate as its client certificate (it needs both key usages).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from kube_runtime import (
    PODS,
    VIRTUAL_MACHINE_INSTANCES,
    ClientSettings,
    Controller,
    EventRecorder,
    InformerFactory,
    SystemClock,
    WorkQueue,
    connect,
    drop_managed_fields,
    sync_problems,
)
from kubevirt_api import ClusterConfig
from kubevirt_api.hotplug import ATTACHMENT_LABEL_VALUE
from kubevirt_api.models import MigrationConfiguration
from kubevirt_api.resources import KUBEVIRTS
from service_kit import (
    CheckResult,
    Health,
    LiveVerbosity,
    MetricsRegistry,
    ServiceRunner,
    TCPListener,
    TLSFiles,
    add_health_routes,
    add_metrics_route,
    client_context,
    configure_logging,
    get_logger,
    server_context,
)

from .deviceplugin import DevicePluginManager
from .heartbeat import Heartbeat
from .metrics import GuestMetrics
from .migration_proxy import MigrationProxies, MigrationTLS
from .migration_source import MigrationSource
from .migration_state import MIGRATION_TARGET_LABEL
from .migration_target import MigrationTarget, TargetSettings
from .podfiles import PodFiles
from .relay import relay_routes
from .vmi_sync import SyncSettings, VmiSync, converter_options

__all__ = ["build_parser", "cluster_migrations", "main", "use_emulation_from"]

_log = get_logger("virt_handler")
#: This service's name in the KubeVirt CR's logVerbosity and in its log lines.
COMPONENT = "virt-handler"


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="virt-handler", description="KubeVirt's node agent")
    p.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME"), help="this node (env NODE_NAME)"
    )
    p.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster service account)")
    p.add_argument("--kubelet-root", default="/var/lib/kubelet", help="the kubelet's --root-dir")
    p.add_argument(
        "--runtime-dir", default="/var/run/kubevirt", help="virt-handler's own state (device nodes)"
    )
    p.add_argument("--bind", default="0.0.0.0", help="relay server address")
    p.add_argument("--port", type=int, default=8186, help="relay server port (mutual TLS)")
    p.add_argument("--tls-cert", help="serving certificate of the relay")
    p.add_argument("--tls-key", help="serving key of the relay")
    p.add_argument("--client-ca", help="CA that signs virt-api's client certificate")
    p.add_argument("--metrics-bind", default="127.0.0.1")
    p.add_argument(
        "--metrics-port", type=int, default=8090, help="/metrics, /healthz, /readyz (plain HTTP)"
    )
    p.add_argument(
        "--use-emulation",
        choices=("auto", "true", "false"),
        default="auto",
        help="auto: the KubeVirt CR's developerConfiguration.useEmulation",
    )
    p.add_argument("--max-devices", type=int, default=1000)
    p.add_argument(
        "--device-registration",
        choices=("plugin-watcher", "kubelet-socket"),
        default="plugin-watcher",
        help="<kubelet root>/plugins_registry, or Register on device-plugins/kubelet.sock",
    )
    p.add_argument("--heartbeat-interval", type=float, default=30.0)
    p.add_argument(
        "--pod-ip-address",
        default=os.environ.get("POD_IP", ""),
        help="where migration targets listen and what they advertise (env POD_IP; "
        "default: --bind unless it is 0.0.0.0)",
    )
    p.add_argument("--log-level", default="info")
    return p


def use_emulation_from(kubevirts: Sequence[Mapping[str, Any]], flag: str) -> bool:
    """TCG or not: the flag when set, else any KubeVirt CR's useEmulation."""
    if flag != "auto":
        return flag == "true"
    return any(ClusterConfig.from_kubevirt(kv).use_emulation for kv in kubevirts)


def cluster_migrations(kubevirts: Sequence[Mapping[str, Any]]) -> MigrationConfiguration:
    """The KubeVirt CR's `spec.configuration.migrations` over upstream's defaults."""
    return ClusterConfig.from_kubevirt(kubevirts[0] if kubevirts else None).migrations


def _migration_tls(args: argparse.Namespace) -> MigrationTLS:
    if not args.tls_cert:
        return MigrationTLS()
    files = TLSFiles(Path(args.tls_cert), Path(args.tls_key), Path(args.client_ca))
    return MigrationTLS(
        server=server_context(files, require_client_cert=True),
        # Handlers' certificates name no pod IP: the CA is the check, as upstream's.
        client=client_context(files, check_hostname=False),
    )


def _validate(args: argparse.Namespace) -> str | None:
    if not args.node_name:
        return "--node-name (or env NODE_NAME) is required"
    for flag in ("kubelet_root", "runtime_dir"):
        value = getattr(args, flag)
        if not os.path.isabs(value) or ".." in Path(value).parts:
            return f"--{flag.replace('_', '-')}: {value!r} must be an absolute path without '..'"
    relay = (args.tls_cert, args.tls_key, args.client_ca)
    if any(relay) and not all(relay):
        return "--tls-cert, --tls-key and --client-ca go together (the relay needs mutual TLS)"
    if not 1 <= args.max_devices <= 100000:
        return "--max-devices must be within 1..100000"
    return None


@web.middleware
async def _relay_needs_client_cert(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    # The relay shares the app with /metrics; only the mutual-TLS listener carries a peer cert.
    if request.path.startswith("/v1/"):
        transport = request.transport
        cert = transport.get_extra_info("peercert") if transport is not None else None
        if not cert:
            raise web.HTTPForbidden(text="the relay needs a client certificate (mutual TLS)")
    return await handler(request)


async def _build(args: argparse.Namespace) -> ServiceRunner:
    registry = MetricsRegistry()
    health = Health()
    client = await connect(
        args.kubeconfig,
        settings=ClientSettings(user_agent="virt-handler", field_manager="virt-handler"),
        metrics=registry,
    )
    node: str = args.node_name
    root = Path(args.kubelet_root)
    files = PodFiles(root / "pods")
    factory = InformerFactory(client, transform=drop_managed_fields)
    vmis = factory.informer(
        VIRTUAL_MACHINE_INSTANCES, label_selector=f"kubevirt.io/nodeName={node}"
    )
    pods = factory.informer(
        PODS, label_selector="kubevirt.io=virt-launcher", field_selector=f"spec.nodeName={node}"
    )
    attachments = factory.informer(
        PODS,
        label_selector=f"kubevirt.io={ATTACHMENT_LABEL_VALUE}",
        field_selector=f"spec.nodeName={node}",
    )
    kubevirts = factory.informer(KUBEVIRTS)
    verbosity = LiveVerbosity(args.log_level)

    def on_kubevirt(_event: object) -> None:
        crs = kubevirts.store.objects()
        verbosity.apply(ClusterConfig.from_kubevirt(crs[0] if crs else None).verbosity(COMPONENT))

    kubevirts.add_handler(on_kubevirt)
    migrating_in = factory.informer(
        VIRTUAL_MACHINE_INSTANCES, label_selector=f"{MIGRATION_TARGET_LABEL}={node}"
    )
    queue: WorkQueue[str] = WorkQueue("virt-handler-vmi", metrics=registry)
    target_queue: WorkQueue[str] = WorkQueue("virt-handler-target", metrics=registry)
    recorder = EventRecorder(client, "virt-handler", host=node)
    proxies = MigrationProxies(
        _migration_tls(args),
        tls_disabled=lambda: cluster_migrations(kubevirts.store.objects()).disable_tls is True,
    )
    clock = SystemClock()
    sync = VmiSync(
        client,
        vmis,
        pods,
        queue,
        files,
        recorder,
        SyncSettings(node=node),
        options=lambda: converter_options(
            use_emulation_from(kubevirts.store.objects(), args.use_emulation)
        ),
        clock=clock,
        migrations=MigrationSource(
            client,
            recorder,
            files,
            proxies,
            node,
            clock,
            cluster=lambda: cluster_migrations(kubevirts.store.objects()),
        ),
        attachments=attachments,
    )
    migration_ip = args.pod_ip_address or (args.bind if args.bind != "0.0.0.0" else "127.0.0.1")
    target = MigrationTarget(
        client,
        migrating_in,
        pods,
        target_queue,
        files,
        recorder,
        TargetSettings(node=node, address=migration_ip),
        proxies,
        sync.options,
        clock,
    )
    plugins_registry = root / "plugins_registry"
    devices = DevicePluginManager(
        root / "device-plugins",
        Path(args.runtime_dir) / "devices",
        max_devices=args.max_devices,
        registry_dir=plugins_registry if args.device_registration == "plugin-watcher" else None,
    )
    started = asyncio.Event()

    def ready() -> bool:
        return started.is_set() and devices.ready

    def informers_ready() -> CheckResult:
        problems = sync_problems([vmis, pods, attachments, kubevirts, migrating_in])
        return CheckResult(not problems, problems)

    health.add_readiness_check("informers", informers_ready)
    health.add_readiness_check("device-plugins", lambda: devices.ready)
    heartbeat = Heartbeat(client, node, ready, interval=args.heartbeat_interval)
    guest_metrics = GuestMetrics(registry, sync, ready)

    async def informers(stop: asyncio.Event) -> None:
        factory.start(stop)
        await stop.wait()
        await factory.join()

    async def controller(stop: asyncio.Event) -> None:
        await factory.wait_for_sync()
        started.set()
        _log.info("informers synced", node=node)
        try:
            await asyncio.gather(
                Controller("vmi", queue, sync.reconcile, workers=3, informers=[vmis, pods]).run(
                    stop
                ),
                Controller(
                    "migration-target",
                    target_queue,
                    target.reconcile,
                    workers=2,
                    informers=[migrating_in, pods],
                ).run(stop),
            )
        finally:
            await target.close()
            await sync.close()
            await proxies.close()
            await client.close()

    async def kubelet_root(stop: asyncio.Event) -> None:
        # The node was torn down under us (its kubelet root removed): nothing left to serve.
        while not stop.is_set():
            if not await asyncio.to_thread(root.is_dir):
                _log.error("the kubelet root is gone; stopping", path=str(root))
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 5.0)

    app = web.Application(middlewares=[_relay_needs_client_cert])
    add_metrics_route(app, registry)
    add_health_routes(app, health)
    app.add_routes(relay_routes(sync, files))
    listeners = [TCPListener(args.metrics_bind, args.metrics_port)]
    if args.tls_cert:
        tls = server_context(
            TLSFiles(Path(args.tls_cert), Path(args.tls_key), Path(args.client_ca)),
            require_client_cert=True,
        )
        listeners.append(TCPListener(args.bind, args.port, tls))
    return ServiceRunner(
        app,
        listeners,
        background={
            "informers": informers,
            "controller": controller,
            "device-plugins": devices.run,
            "heartbeat": heartbeat.run,
            "metrics": guest_metrics.run,
            "kubelet-root": kubelet_root,
        },
        health=health,
        shutdown_timeout=10,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m virt_handler`; returns the exit code."""
    args = build_parser().parse_args(argv)
    problem = _validate(args)
    if problem:
        print(f"virt-handler: {problem}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, component=COMPONENT)

    async def _run() -> int:
        runner = await _build(args)
        return await runner.run()

    try:
        return asyncio.run(_run())
    except OSError as error:
        _log.error("cannot start", error=str(error))
        return 2
