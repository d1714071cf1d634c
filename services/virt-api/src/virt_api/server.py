"""Run virt-api: TLS that accepts front-proxy client certificates, then the app."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog
from aiohttp import web
from service_kit import configure_logging

from .app import build_app
from .clusterconfig import ClusterConfigSource
from .frontproxy import FrontProxyConfig, load_front_proxy_config
from .kubeapi import ClientConfig, KubeClient
from .relay import (
    HandlerLocator,
    HttpHandlerClient,
    NodeHandlerLocator,
    PodHandlerLocator,
    StaticHandlerLocator,
)
from .subresources import SubresourceContext
from .webhooks import AdmissionContext

__all__ = ["DEFAULT_KUBEVIRT_USERS", "main", "server_ssl_context"]

log = structlog.get_logger("virt_api")

DEFAULT_KUBEVIRT_USERS = tuple(
    f"system:serviceaccount:kubevirt:{sa}"
    for sa in ("kubevirt-apiserver", "kubevirt-controller", "kubevirt-handler")
)


def server_ssl_context(cert: str, key: str, client_ca_pem: str) -> ssl.SSLContext:
    """Serve with `cert`; verify client certificates, when offered, against the front-proxy CA only.

    Webhook calls come without a client certificate and are accepted; a certificate from
    any other CA fails the handshake.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca_pem:
        context.load_verify_locations(cadata=client_ca_pem)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


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


def _client_config(args: argparse.Namespace) -> ClientConfig:
    if args.kubeconfig:
        config = ClientConfig.from_kubeconfig(args.kubeconfig, args.context)
    else:
        config = ClientConfig.from_service_account()
    if args.token:
        config = ClientConfig(
            config.server, config.ca_file, None, None, args.token, config.insecure
        )
    return config


async def _serve(args: argparse.Namespace, config: ClientConfig) -> None:
    api = KubeClient(config)
    front = await load_front_proxy_config(api)
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
    handler_ssl = ssl.create_default_context(cafile=args.handler_ca) if args.handler_ca else None
    if handler_ssl is not None and args.handler_client_cert:
        handler_ssl.load_cert_chain(args.handler_client_cert, args.handler_client_key)
    locator: HandlerLocator
    if args.handler_node_url:
        locator = NodeHandlerLocator(dict(item.split("=", 1) for item in args.handler_node_url))
    elif args.handler_url:
        locator = StaticHandlerLocator(args.handler_url)
    else:
        locator = PodHandlerLocator(api, args.install_namespace)
        if handler_ssl is not None:
            # Handler pods are reached by pod IP, unknown when their certificate is issued;
            # trust rests on the relay's own CA (--handler-ca), as upstream's relay does.
            handler_ssl.check_hostname = False

    handlers = HttpHandlerClient(locator, handler_ssl)
    admission = AdmissionContext(
        cluster_config=ClusterConfigSource(api, namespace=args.install_namespace),
        kubevirt_users=frozenset(u for u in args.kubevirt_users.split(",") if u),
        kubevirt_groups=frozenset(g for g in args.kubevirt_groups.split(",") if g),
        api=api,
    )
    app = build_app(admission, SubresourceContext(api, front, handlers))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(
        runner,
        args.bind,
        args.port,
        ssl_context=server_ssl_context(args.tls_cert, args.tls_key, front.ca_pem),
    )
    await site.start()
    log.info(
        "virt-api serving",
        address=args.bind,
        port=args.port,
        front_proxy_names=sorted(front.allowed_names),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        log.info("virt-api stopping")
        await runner.cleanup()
        await handlers.close()
        await api.close()


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
    # Files are read here, before the loop starts, so nothing blocks it later.
    try:
        args.token = Path(args.token_file).read_text().strip() if args.token_file else None
        ca = args.requestheader_client_ca
        args.requestheader_ca_pem = Path(ca).read_text() if ca else None
        config = _client_config(args)
    except (OSError, ValueError) as error:
        print(f"virt-api: {error}", file=sys.stderr)
        return 1
    configure_logging("info", component="virt-api")
    try:
        asyncio.run(_serve(args, config))
    except (OSError, ValueError) as error:
        print(f"virt-api: {error}", file=sys.stderr)
        return 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    return 0
