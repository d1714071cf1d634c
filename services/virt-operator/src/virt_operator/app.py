"""virt-operator's process: informers over the KubeVirt CRs and every managed object,
one controller, leader election, /metrics and /healthz, and the deletion webhook.

Only the leader (Lease `kubevirt/virt-operator`) reconciles; every replica serves the
webhook, as upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from kube_runtime import (
    ClientSettings,
    Controller,
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
    key_of,
    sync_problems,
)
from kubevirt_api.resources import KUBEVIRTS
from service_kit import (
    CheckResult,
    Health,
    MetricsRegistry,
    ServiceRunner,
    TCPListener,
    add_health_routes,
    add_metrics_route,
    configure_logging,
    get_logger,
    run_service,
)

from .reconcile import KubeVirtReconciler, OperatorIdentity
from .resources import MANAGED
from .strategy import DEFAULT_REGISTRY, OPERATOR_WEBHOOK_PORT, image_of, split_image
from .webhook import WebhookServer, webhook_app
from .wellknown import FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL

__all__ = ["InformerCache", "Settings", "main", "parse_args"]

COMPONENT = "virt-operator"
log = get_logger(__name__)


@dataclass(frozen=True)
class Settings:
    kubeconfig: str | None
    namespace: str
    bind: str
    port: int
    webhook_port: int
    image: str
    leader_elect: bool
    identity: str
    log_level: str = "info"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-operator", description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (else $KUBECONFIG or in-cluster)")
    p.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", "kubevirt"),
        help="the install namespace (default $POD_NAMESPACE, else kubevirt)",
    )
    p.add_argument(
        "--bind", default="0.0.0.0", help="address of /metrics, /healthz and the webhook"
    )
    p.add_argument("--port", type=int, default=8443, help="/metrics, /healthz, /readyz (HTTP)")
    p.add_argument("--webhook-port", type=int, default=OPERATOR_WEBHOOK_PORT)
    p.add_argument(
        "--image",
        default=os.environ.get(
            "OPERATOR_IMAGE", image_of(DEFAULT_REGISTRY, "virt-operator", "devel")
        ),
        help="the operator's own image: its registry and tag are the install's defaults",
    )
    p.add_argument("--leader-elect", default="true", choices=("true", "false"))
    p.add_argument("--identity", default=None)
    p.add_argument("--log-level", default="info")
    return p


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    ns = _parser().parse_args(argv)
    for flag, value in (("--port", ns.port), ("--webhook-port", ns.webhook_port)):
        if not 0 <= value <= 65535:
            raise ValueError(f"{flag}: {value} is not a port number (0-65535)")
    return Settings(
        kubeconfig=ns.kubeconfig,
        namespace=ns.namespace,
        bind=ns.bind,
        port=ns.port,
        webhook_port=ns.webhook_port,
        image=ns.image,
        leader_elect=ns.leader_elect == "true",
        identity=ns.identity or f"{socket.gethostname()}_{os.getpid()}",
        log_level=ns.log_level,
    )


class InformerCache:
    """The live objects the operator manages, one label-selected informer per kind."""

    def __init__(self, client: KubeClient) -> None:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        self.informers: dict[Resource, SharedInformer[RawObject]] = {
            r: SharedInformer(
                RestListWatch(client, r, label_selector=selector),
                name=r.plural,
                transform=drop_managed_fields,
            )
            for r in MANAGED
        }

    def lookup(
        self, resource: Resource, namespace: str | None, name: str
    ) -> Mapping[str, Any] | None:
        key = f"{namespace}/{name}" if resource.namespaced and namespace else name
        return self.informers[resource].get(key)

    def managed(self, resource: Resource) -> list[Mapping[str, Any]]:
        return list(self.informers[resource].objects())


async def run_operator(
    client: KubeClient,
    settings: Settings,
    registry: MetricsRegistry,
    stop: asyncio.Event,
    watching: list[SharedInformer[Any]],
) -> None:
    kubevirts: SharedInformer[RawObject] = SharedInformer(
        RestListWatch(client, KUBEVIRTS), name="kubevirts", transform=drop_managed_fields
    )
    cache = InformerCache(client)
    queue: WorkQueue[str] = WorkQueue("virt-operator", metrics=registry)
    registry_name, tag = split_image(settings.image)
    reconciler = KubeVirtReconciler(
        client, cache, kubevirts.objects, OperatorIdentity(registry_name, tag, tag)
    )

    def enqueue_all(_event: object) -> None:
        for kv in kubevirts.objects():
            queue.add(key_of(kv))

    kubevirts.add_handler(enqueue_all)
    for informer in cache.informers.values():
        informer.add_handler(enqueue_all)
    informers: list[SharedInformer[Any]] = [kubevirts, *cache.informers.values()]
    watching[:] = informers
    controller = Controller("kubevirt", queue, reconciler.reconcile, workers=1, informers=informers)
    tasks = [asyncio.ensure_future(i.run(stop)) for i in informers]
    tasks.append(asyncio.ensure_future(controller.run(stop)))
    try:
        done, _ = await asyncio.wait(
            [*tasks, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_EXCEPTION
        )
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


def _service(settings: Settings) -> ServiceRunner:
    registry = MetricsRegistry()
    health = Health()
    state = {"leading": not settings.leader_elect}
    watching: list[SharedInformer[Any]] = []

    def ready() -> CheckResult:
        # Every replica is ready once it serves (the webhook); say who leads in the body.
        if not state["leading"]:
            return CheckResult(True, "standing by: another virt-operator leads")
        problems = sync_problems(watching) if watching else ""
        return CheckResult(not problems, problems)

    health.add_readiness_check("operator", ready)
    # Upstream's two gauges (pkg/monitoring/metrics/virt-operator).
    leading = registry.gauge(
        "kubevirt_virt_operator_leading_status", "Indication for an operating virt-operator."
    )
    standing_by = registry.gauge(
        "kubevirt_virt_operator_ready_status",
        "Indication for a virt-operator that is ready to take the lead.",
    )
    leading.set(None, 0.0 if settings.leader_elect else 1.0)
    app = web.Application()
    add_health_routes(app, health)
    add_metrics_route(app, registry)

    async def operate(stop: asyncio.Event) -> None:
        client = await connect(
            settings.kubeconfig,
            settings=ClientSettings(user_agent=COMPONENT, field_manager=FIELD_MANAGER),
            metrics=registry,
        )
        async with client:
            standing_by.set(None, 1.0)
            server = WebhookServer(
                webhook_app(client),
                client,
                settings.namespace,
                settings.bind,
                settings.webhook_port,
            )
            side = [asyncio.ensure_future(server.run(stop))]
            try:
                if not settings.leader_elect:
                    await run_operator(client, settings, registry, stop, watching)
                    return

                async def lead(lost: asyncio.Event) -> None:
                    state["leading"] = True
                    leading.set(None, 1.0)
                    inner = asyncio.Event()

                    async def relay() -> None:
                        await asyncio.wait(
                            [
                                asyncio.ensure_future(lost.wait()),
                                asyncio.ensure_future(stop.wait()),
                            ],
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                        inner.set()

                    relay_task = asyncio.ensure_future(relay())
                    try:
                        await run_operator(client, settings, registry, inner, watching)
                    finally:
                        relay_task.cancel()
                        state["leading"] = False
                        leading.set(None, 0.0)

                elector = LeaderElector(
                    KubeLeaseApi(client, settings.namespace, COMPONENT),
                    LeaderElectionConfig(identity=settings.identity),
                    on_started_leading=lead,
                    on_new_leader=lambda who: log.info("leader", identity=who),
                )
                await elector.run(stop)
                if not stop.is_set():
                    raise RuntimeError("lost leadership")
            finally:
                stop.set()
                await asyncio.gather(*side, return_exceptions=True)

    return ServiceRunner(
        app,
        [TCPListener(settings.bind, settings.port)],
        background={"operator": operate},
        health=health,
        shutdown_timeout=15.0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`virt-operator [flags]`: exit 0 on SIGTERM, 1 on a failure, 2 on bad flags."""
    try:
        settings = parse_args(argv)
        configure_logging(settings.log_level, component=COMPONENT)
    except ValueError as exc:
        print(f"virt-operator: {exc}", file=sys.stderr)
        return 2
    return run_service(_service(settings))
