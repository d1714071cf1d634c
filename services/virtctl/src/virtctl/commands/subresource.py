"""Calling subresources.kubevirt.io as kubectl would: its global flags, the kubeconfig
through kube_runtime (merged `$KUBECONFIG`, exec and token plugins, in-cluster), and
kube_runtime's client.

Shared by the lifecycle commands (start, stop, ...) and the streams (console, vnc).
Errors become `SubresourceError` with a message fit for the user (the API server's own
for a refusal, the file's name for a kubeconfig problem), printed as one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from kube_runtime import (
    ApiError,
    ClientSettings,
    ConfigOverrides,
    KubeClient,
    KubeconfigError,
    load_kubeconfig,
)
from kubevirt_api.durations import DurationError
from kubevirt_api.durations import parse_duration as go_duration

from virtctl.version import client_version

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "GROUP_PATH",
    "Cluster",
    "ClusterFlags",
    "SubresourceError",
    "add_cluster_flags",
    "call",
    "cluster_from_args",
    "dry_run_body",
    "open_cluster",
    "parse_duration",
]

GROUP_PATH = "/apis/subresources.kubevirt.io/v1"
# virtctl's deadline for one call unless --request-timeout says otherwise (kubectl has
# none by default; virtctl always had this one).
DEFAULT_REQUEST_TIMEOUT = 30.0

log = logging.getLogger("virtctl")


class SubresourceError(Exception):
    """A call failed; the message is fit for the user (no traceback).

    `status` is the HTTP status of a refusal, None when no server answered.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def parse_duration(text: str) -> float:
    """kubectl's --request-timeout: a Go duration (`1m30s`, `500ms`) or whole seconds;
    0 means no timeout."""
    if text.isdigit():
        return float(text)
    try:
        seconds = go_duration(text)
    except DurationError:
        seconds = -1.0
    if seconds < 0:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r} (use whole seconds or e.g. 1s, 2m, 3h)"
        )
    return seconds


def add_cluster_flags(parser: argparse.ArgumentParser, *, root: bool = False) -> None:
    """kubectl's global flags. The root parser holds their defaults; a subcommand takes
    them too (after its name, as kubectl allows) without overriding the root's values."""

    def default(value: object) -> object:
        return value if root else argparse.SUPPRESS

    group = parser.add_argument_group("cluster options (as kubectl's)")
    group.add_argument(
        "--kubeconfig",
        default=default(None),
        help="kubeconfig file (default: the files of $KUBECONFIG merged, or ~/.kube/config)",
    )
    group.add_argument(
        "--context", default=default(None), help="kubeconfig context (default: current-context)"
    )
    group.add_argument(
        "-n",
        "--namespace",
        default=default(None),
        help="namespace (default: the context's namespace, else default)",
    )
    group.add_argument(
        "-s", "--server", default=default(None), help="the API server's address, overriding"
    )
    group.add_argument(
        "--token", default=default(None), help="bearer token for the API server, overriding"
    )
    group.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        default=default(False),
        help="do not check the server's certificate (insecure)",
    )
    group.add_argument(
        "--as", dest="impersonate", default=default(None), metavar="USER", help="impersonate USER"
    )
    group.add_argument(
        "--as-group",
        dest="impersonate_groups",
        action="append",
        default=default([]),
        metavar="GROUP",
        help="impersonate GROUP (with --as)",
    )
    group.add_argument(
        "--request-timeout",
        type=parse_duration,
        default=default(DEFAULT_REQUEST_TIMEOUT),
        metavar="DURATION",
        help=f"deadline per request, e.g. 10s, 1m; 0: none (default: {DEFAULT_REQUEST_TIMEOUT:g}s)",
    )
    group.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=default(0),
        metavar="LEVEL",
        help="log verbosity: 6 logs the kubeconfig files and every request, 8 everything",
    )


def dry_run_body(args: argparse.Namespace) -> dict[str, Any]:
    """The `dryRun` field the subresource bodies share."""
    return {"dryRun": ["All"]} if getattr(args, "dry_run", False) else {}


@dataclass(frozen=True, slots=True)
class ClusterFlags:
    """What the global flags ask for; nothing is read until `open_cluster`."""

    overrides: ConfigOverrides
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT


def cluster_from_args(args: argparse.Namespace) -> ClusterFlags:
    """The global flags of a parsed command line."""
    timeout = getattr(args, "request_timeout", DEFAULT_REQUEST_TIMEOUT)
    overrides = ConfigOverrides(
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        namespace=getattr(args, "namespace", None),
        server=getattr(args, "server", None),
        token=getattr(args, "token", None),
        impersonate=getattr(args, "impersonate", None),
        impersonate_groups=tuple(getattr(args, "impersonate_groups", None) or ()),
        insecure_skip_tls_verify=bool(getattr(args, "insecure_skip_tls_verify", False)),
    )
    return ClusterFlags(overrides, timeout or None)


@dataclass(frozen=True, slots=True)
class Cluster:
    """An open client for one context, and the namespace commands act in."""

    client: KubeClient
    namespace: str
    server: str

    def path(self, resource: str, name: str, action: str) -> str:
        """The subresource path of `action` on `resource/name` (or of the namespace)."""
        tail = f"{resource}/{quote(name, safe='')}/{action}" if resource else action
        return f"{GROUP_PATH}/namespaces/{quote(self.namespace, safe='')}/{tail}"

    async def request_bytes(self, path: str, query: Sequence[tuple[str, str]] = ()) -> bytes:
        """One GET whose answer is not JSON (a PNG); its body, or SubresourceError."""
        try:
            return await self.client.request_bytes("GET", path, query=query)
        except ApiError as error:
            raise SubresourceError(_refusal(error), error.status) from None
        except TimeoutError:
            raise SubresourceError(f"no answer from the cluster at {self.server}") from None
        except (aiohttp.ClientError, OSError) as error:
            raise SubresourceError(self.unreachable(error)) from None

    async def request(self, method: str, path: str, body: Mapping[str, Any] | None) -> Any:
        """One call; its decoded JSON answer (None when empty), or SubresourceError."""
        start = time.monotonic()
        outcome = "failed"
        try:
            answer = await self.client.request(
                method, path, body=dict(body) if body is not None else None
            )
            outcome = "OK"
            return answer
        except ApiError as error:
            outcome = str(error.status)
            raise SubresourceError(_refusal(error), error.status) from None
        except TimeoutError:
            timeout = self.client.settings.request_timeout
            within = f" within {timeout:g}s" if timeout else ""
            raise SubresourceError(f"no answer from the cluster at {self.server}{within}") from None
        except (aiohttp.ClientError, OSError) as error:
            raise SubresourceError(self.unreachable(error)) from None
        finally:
            elapsed = (time.monotonic() - start) * 1000
            log.info("%s %s%s %s in %.0f milliseconds", method, self.server, path, outcome, elapsed)

    async def websocket(
        self, path: str, protocols: Sequence[str]
    ) -> aiohttp.ClientWebSocketResponse:
        """Upgrade to a websocket at `path`, or SubresourceError with the server's reason."""
        log.info("GET %s%s (websocket)", self.server, path)
        try:
            return await self.client.websocket(path, protocols=protocols)
        except aiohttp.WSServerHandshakeError as error:
            raise SubresourceError(f"{error.status} {error.message}", error.status) from None
        except TimeoutError:
            raise SubresourceError(self.unreachable("no answer")) from None
        except (aiohttp.ClientError, OSError) as error:
            raise SubresourceError(self.unreachable(error)) from None

    def unreachable(self, reason: object) -> str:
        return f"cannot reach the cluster at {self.server}: {reason}"


@contextlib.asynccontextmanager
async def open_cluster(flags: ClusterFlags) -> AsyncIterator[Cluster]:
    """Load the kubeconfig kubectl would, open kube_runtime's client, close it after."""
    try:
        loaded = await load_kubeconfig(flags.overrides)
    except KubeconfigError as error:
        raise SubresourceError(str(error)) from None
    if loaded.sources:
        log.info("Config loaded from file: %s", ", ".join(loaded.sources))
    server = str(loaded.configuration.host)
    context = loaded.context or ("--server" if flags.overrides.server else "in-cluster")
    log.info("context %s, server %s, namespace %s", context, server, loaded.namespace)
    # The connect timeout bounds a websocket's handshake too (virtctl's old 30s).
    timeout = flags.request_timeout
    settings = ClientSettings(
        request_timeout=timeout,
        connect_timeout=min(timeout, DEFAULT_REQUEST_TIMEOUT)
        if timeout
        else DEFAULT_REQUEST_TIMEOUT,
        user_agent=f"virtctl/{client_version()}",
    )
    async with KubeClient.from_config(loaded, settings=settings) as client:
        yield Cluster(client, loaded.namespace, server)


async def _call(
    flags: ClusterFlags,
    method: str,
    resource: str,
    name: str,
    action: str,
    body: Mapping[str, Any] | None,
) -> Any:
    async with open_cluster(flags) as cluster:
        return await cluster.request(method, cluster.path(resource, name, action), body)


def call(
    flags: ClusterFlags,
    method: str,
    resource: str,
    name: str,
    action: str,
    body: Mapping[str, Any] | None = None,
) -> Any:
    """Call one subresource; return its decoded JSON answer (None when empty)."""
    return asyncio.run(_call(flags, method, resource, name, action, body))


def _refusal(error: ApiError) -> str:
    phrase = _phrase(error.status)
    if error.message and error.reason:  # a metav1.Status
        return f"{error.message} ({error.status} {error.reason})"
    if error.message:
        return f"{error.status} {phrase}: {error.message[:300]}"
    return f"{error.status} {phrase}"


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
