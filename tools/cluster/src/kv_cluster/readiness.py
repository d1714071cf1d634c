"""Why a pod is not ready, in the words of the component itself.

A workload's replica counts say only that it is not ready. The component knows why: its
readiness endpoint answers with the check that fails (e.g. `virtualmachines/*: not
synced (ApiError: 404 …)`), and the kubelet knows when a container cannot start (image
pull, crash loop with the last exit). `up` quotes these when it gives up waiting.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Probe", "fetch_probe", "pod_reason"]

_BODY_LIMIT = 600


@dataclass(frozen=True)
class Probe:
    """An httpGet readiness probe aimed at one pod."""

    scheme: str
    host: str
    port: int
    path: str


def fetch_probe(probe: Probe, timeout: float = 3.0) -> str:
    """GET the probe's URL from the host (pod IPs are reachable here); status and body.

    The certificate is not verified: this only reads a health body from the cluster's own
    pod for a diagnostic message, and the pod's serving name is not its IP.
    """
    if probe.scheme.upper() == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            probe.host, probe.port, timeout=timeout, context=context
        )
    else:
        conn = http.client.HTTPConnection(probe.host, probe.port, timeout=timeout)
    try:
        conn.request("GET", probe.path)
        resp = conn.getresponse()
        body = resp.read(_BODY_LIMIT).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException) as exc:
        return f"{probe.path}: {type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return f"{probe.path} {resp.status}: {body}"


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _waiting(status: dict[str, Any]) -> str | None:
    waiting = (status.get("state") or {}).get("waiting")
    if not waiting:
        return None
    text = str(waiting.get("reason", "Waiting"))
    if waiting.get("message"):
        text += f" ({waiting['message']})"
    last = (status.get("lastState") or {}).get("terminated")
    if last:
        text += f"; last exit {last.get('exitCode')} {last.get('reason', '')}".rstrip()
    return text


def _probe_of(pod: dict[str, Any], container: str) -> Probe | None:
    ip = (pod.get("status") or {}).get("podIP")
    for spec in (pod.get("spec") or {}).get("containers") or []:
        get = (spec.get("readinessProbe") or {}).get("httpGet")
        if spec.get("name") != container or not get or not ip:
            continue
        port = get.get("port")
        if not isinstance(port, int):  # a named port: look it up among the container's
            named = [p for p in spec.get("ports") or [] if p.get("name") == port]
            port = named[0].get("containerPort") if named else None
        if isinstance(port, int):
            return Probe(get.get("scheme", "HTTP"), ip, port, get.get("path", "/"))
    return None


def pod_reason(pod: dict[str, Any], fetch: Callable[[Probe], str] = fetch_probe) -> str | None:
    """None for a Ready pod; else why not: each container's waiting reason, or the body of
    its readiness probe when it runs but is not ready, or the pod's phase."""
    if _ready(pod):
        return None
    status = pod.get("status") or {}
    reasons = []
    for container in status.get("containerStatuses") or []:
        name = container.get("name", "?")
        waiting = _waiting(container)
        if waiting:
            reasons.append(f"{name}: {waiting}")
        elif not container.get("ready"):
            probe = _probe_of(pod, name)
            reasons.append(f"{name}: {fetch(probe) if probe else 'not ready (no httpGet probe)'}")
    if not reasons:
        pending = [c.get("message") or c.get("reason") for c in status.get("conditions") or []]
        reasons.append(f"{status.get('phase', 'Unknown')}: " + "; ".join(filter(None, pending)))
    return f"pod {pod['metadata']['name']}: " + " | ".join(reasons)
