"""Run virt-api: TLS that accepts front-proxy client certificates, then the app."""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import structlog
from kube_runtime import ApiError, ClientSettings, KubeClient, KubeconfigError, connect
from service_kit import (
    LiveVerbosity,
    MetricsRegistry,
    ReloadingContext,
    ServiceRunner,
    TCPListener,
    TLSError,
    TLSFiles,
    client_context,
    configure_logging,
    server_context,
)

from .app import build_app
from .clusterconfig import ClusterConfigSource
from .frontproxy import FrontProxyConfig, load_front_proxy_config
from .metrics import ApiMetrics
from .presets import ApiPresets
from .relay import (
    HandlerLocator,
    HttpHandlerClient,
    NodeHandlerLocator,
    PodHandlerLocator,
    StaticHandlerLocator,
)
from .subresources import SubresourceContext
from .webhooks import AdmissionContext

__all__ = ["CLIENT_SETTINGS", "DEFAULT_KUBEVIRT_USERS", "main", "serving_tls"]

log = structlog.get_logger("virt_api")
#: This service's name in the KubeVirt CR's logVerbosity and in its log lines.
COMPONENT = "virt-api"
BASE_LOG_LEVEL = "info"

DEFAULT_KUBEVIRT_USERS = tuple(
    f"system:serviceaccount:kubevirt:{sa}"
    for sa in ("kubevirt-apiserver", "kubevirt-controller", "kubevirt-handler")
)
# Webhook calls wait on these requests and the API server gives a webhook 10 s.
CLIENT_SETTINGS = ClientSettings(
    user_agent="virt-api/kubevirt-py", field_manager="virt-api", request_timeout=10.0
)


def serving_tls(cert: str, key: str, client_ca_pem: str) -> ReloadingContext:
    """Serve with `cert`; verify client certificates, when offered, against the front-proxy CA only.

    Webhook calls come without a client certificate and are accepted; a certificate from
    any other CA fails the handshake. The pair is reloaded when its files are rewritten.
    Blocking: reads the files.
    """
    factory = functools.partial(
        server_context, optional_client_cert=bool(client_ca_pem), client_ca_pem=client_ca_pem
    )
    return ReloadingContext(TLSFiles(Path(cert), Path(key)), factory)


def _handler_tls(args: argparse.Namespace, check_hostname: bool) -> ReloadingContext | None:
    """Mutual TLS to virt-handler: its CA and virt-api's client pair (reloaded on rotation)."""
    if not args.handler_ca:
        return None
    cert = Path(args.handler_client_cert) if args.handler_client_cert else None
    # Without --handler-client-key the key is read from the certificate file.
    key = Path(args.handler_client_key or args.handler_client_cert) if cert else None
    files = TLSFiles(cert, key, Path(args.handler_ca))
    return ReloadingContext(files, functools.partial(client_context, check_hostname=check_hostname))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="virt-api", description="KubeVirt's admission webhooks and subresource API."
    )
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    p.add_argument("--port", type=int, default=8443)
    p.add_argument("--tls-cert", required=True, help="serving certificate (PEM)")
    p.add_argument("--tls-key", required=True, help="serving key (PEM)")
    p.add_argument("--kubeconfig", help="kubeconfig to reach the API server (default: in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--token-file", help="bearer token to use instead of the kubeconfig's user")
    p.add_argument(
        "--requestheader-client-ca",
        help="front-proxy CA file (default: read kube-system/extension-apiserver-authentication)",
    )
    p.add_argument(
        "--requestheader-allowed-names",
        default=None,
        help="comma-separated allowed front-proxy CNs",
    )
    p.add_argument(
        "--kubevirt-users",
        default=",".join(DEFAULT_KUBEVIRT_USERS),
        help="users trusted as KubeVirt components",
    )
    p.add_argument(
        "--kubevirt-groups", default="", help="groups whose members count as KubeVirt components"
    )
    p.add_argument("--install-namespace", default="kubevirt")
    p.add_argument(
        "--handler-url", help="reach every virt-handler at this URL (single node / tests)"
    )
    p.add_argument(
        "--handler-node-url",
        action="append",
        default=[],
        metavar="NODE=URL",
        help="the virt-handler of NODE is at URL (repeatable; wins over --handler-url)",
    )
    p.add_argument("--handler-ca", help="CA of virt-handler's serving certificate")
    p.add_argument("--handler-client-cert", help="virt-api's client certificate for virt-handler")
    p.add_argument("--handler-client-key")
    p.add_argument("--source-digest", help="ignored; lets a supervisor notice new code in argv")
    return p


def _front_proxy(args: argparse.Namespace, front: FrontProxyConfig) -> FrontProxyConfig:
    """The ConfigMap's front-proxy settings, with the command line's overrides."""
    if args.requestheader_ca_pem:
        front = FrontProxyConfig(
            args.requestheader_ca_pem,
            front.allowed_names,
            front.username_headers,
            front.group_headers,
            front.extra_prefixes,
        )
    if args.requestheader_allowed_names is not None:
        names = frozenset(n for n in args.requestheader_allowed_names.split(",") if n)
        front = FrontProxyConfig(
            front.ca_pem, names, front.username_headers, front.group_headers, front.extra_prefixes
        )
    return front


def _locator(args: argparse.Namespace, api: KubeClient) -> HandlerLocator:
    if args.handler_node_url:
        return NodeHandlerLocator(dict(item.split("=", 1) for item in args.handler_node_url))
    if args.handler_url:
        return StaticHandlerLocator(args.handler_url)
    return PodHandlerLocator(api, args.install_namespace)


async def _serve(args: argparse.Namespace) -> int:
    verbosity = LiveVerbosity(BASE_LOG_LEVEL)
    registry = MetricsRegistry()
    api = await connect(
        args.kubeconfig,
        context=args.context,
        token_file=args.token_file,
        settings=CLIENT_SETTINGS,
        metrics=registry,
    )
    async with api:
        ca = args.requestheader_client_ca
        args.requestheader_ca_pem = await asyncio.to_thread(Path(ca).read_text) if ca else None
        front = _front_proxy(args, await load_front_proxy_config(api))
        locator = _locator(args, api)
        # Handler pods are reached by pod IP, unknown when their certificate is issued;
        # trust rests on the relay's own CA (--handler-ca), as upstream's relay does.
        by_pod = isinstance(locator, PodHandlerLocator)
        handler_tls = await asyncio.to_thread(_handler_tls, args, not by_pod)
        serving = await asyncio.to_thread(serving_tls, args.tls_cert, args.tls_key, front.ca_pem)
        handlers = HttpHandlerClient(locator, handler_tls.context if handler_tls else None)
        admission = AdmissionContext(
            cluster_config=ClusterConfigSource(
                api,
                namespace=args.install_namespace,
                on_read=lambda config: verbosity.apply(config.verbosity(COMPONENT)),
            ),
            kubevirt_users=frozenset(u for u in args.kubevirt_users.split(",") if u),
            kubevirt_groups=frozenset(g for g in args.kubevirt_groups.split(",") if g),
            api=api,
            presets=ApiPresets(api),
            metrics=registry,
        )
        api_metrics = ApiMetrics(registry)
        api_metrics.ready.set(None, 0.0)
        app = build_app(
            admission,
            SubresourceContext(api, front, handlers, admission.cluster_config, api_metrics),
        )
        background = {"serving-tls": serving.watch}
        if handler_tls is not None:
            background["handler-tls"] = handler_tls.watch
        runner = ServiceRunner(
            app, [TCPListener(args.bind, args.port, serving.context)], background=background
        )
        try:
            await runner.start()
            api_metrics.ready.set(None, 1.0)
            log.info(
                "virt-api serving",
                address=args.bind,
                port=args.port,
                front_proxy_names=sorted(front.allowed_names),
            )
            return await runner.wait()
        finally:
            await handlers.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: `python -m virt_api --tls-cert ... --tls-key ...`."""
    args = _parser().parse_args(argv)
    for item in args.handler_node_url:
        node, sep, url = item.partition("=")
        if not sep or not node or not url.startswith("https://"):
            print(
                f"virt-api: --handler-node-url {item!r} must be NODE=https://HOST:PORT",
                file=sys.stderr,
            )
            return 2
    configure_logging(BASE_LOG_LEVEL, component=COMPONENT)
    try:
        return asyncio.run(_serve(args))
    except (
        KubeconfigError,
        OSError,
        ValueError,
        TLSError,
        ApiError,
        aiohttp.ClientError,
    ) as error:
        print(f"virt-api: {error}", file=sys.stderr)
    return 1
