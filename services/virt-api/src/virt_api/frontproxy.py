"""Trust forwarded identities only from the API server's front proxy.

The aggregator proxies `subresources.kubevirt.io` requests with a client certificate
signed by the requestheader CA and puts the caller in X-Remote-* headers. The TLS layer
verifies the signature (only that CA is trusted for client certificates); here we check
that a certificate was presented at all and that its CN is an allowed front-proxy name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from kube_runtime import CONFIGMAPS, KubeClient

__all__ = [
    "AUTH_CONFIGMAP",
    "FrontProxyConfig",
    "Identity",
    "UnauthenticatedError",
    "identify",
    "load_front_proxy_config",
]

# (namespace, name) of the ConfigMap the API server publishes for aggregated APIs.
AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


class UnauthenticatedError(Exception):
    """The request did not come from the front proxy (or carried no identity)."""


@dataclass(frozen=True, slots=True)
class FrontProxyConfig:
    """What the front proxy's requests look like (from extension-apiserver-authentication)."""

    ca_pem: str = ""
    allowed_names: frozenset[str] = frozenset()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


@dataclass(frozen=True, slots=True)
class Identity:
    """The end user the front proxy speaks for."""

    user: str
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    uid: str = ""


def _json_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, str) or not value:
        return ()
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        return ()
    return tuple(v for v in decoded if isinstance(v, str)) if isinstance(decoded, list) else ()


async def load_front_proxy_config(api: KubeClient) -> FrontProxyConfig:
    """Read kube-system/extension-apiserver-authentication, as every aggregated API does."""
    namespace, name = AUTH_CONFIGMAP
    configmap = await api.get(CONFIGMAPS, name, namespace)
    data: Mapping[str, Any] = configmap.get("data") or {} if isinstance(configmap, Mapping) else {}
    ca = data.get("requestheader-client-ca-file")
    if not isinstance(ca, str) or "BEGIN CERTIFICATE" not in ca:
        raise ValueError("extension-apiserver-authentication has no requestheader-client-ca-file")
    return FrontProxyConfig(
        ca_pem=ca,
        allowed_names=frozenset(_json_list(data.get("requestheader-allowed-names"))),
        username_headers=_json_list(data.get("requestheader-username-headers"))
        or ("X-Remote-User",),
        group_headers=_json_list(data.get("requestheader-group-headers")) or ("X-Remote-Group",),
        extra_prefixes=_json_list(data.get("requestheader-extra-headers-prefix"))
        or ("X-Remote-Extra-",),
    )


def _peer_common_name(request: web.Request) -> str | None:
    transport = request.transport
    if transport is None:
        return None
    cert = transport.get_extra_info("peercert")
    if not isinstance(cert, Mapping):
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def identify(request: web.Request, config: FrontProxyConfig) -> Identity:
    """The forwarded identity, or UnauthenticatedError unless the front proxy sent the request."""
    common_name = _peer_common_name(request)
    if common_name is None:
        raise UnauthenticatedError(
            "no client certificate from the front proxy; forwarded identities are refused"
        )
    if config.allowed_names and common_name not in config.allowed_names:
        raise UnauthenticatedError(
            f"client certificate CN {common_name!r} is not an allowed front-proxy name"
        )
    user = next((request.headers[h] for h in config.username_headers if h in request.headers), "")
    if not user:
        raise UnauthenticatedError("the front proxy sent no user header")
    groups: list[str] = []
    for header in config.group_headers:
        groups.extend(request.headers.getall(header, []))
    extra: dict[str, tuple[str, ...]] = {}
    for name in request.headers:
        for prefix in config.extra_prefixes:
            if name.lower().startswith(prefix.lower()):
                key = unquote(name[len(prefix) :].lower())
                extra[key] = tuple(request.headers.getall(name, []))
    return Identity(user=user, groups=tuple(groups), extra=extra)
