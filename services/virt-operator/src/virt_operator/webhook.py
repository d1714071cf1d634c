"""The operator's validating webhook: BlockUninstallIfWorkloadsExist (`OP/webhooks`).

Deleting the KubeVirt CR is refused while VMIs, VMs or VMI replica sets exist, when its
uninstallStrategy says so and it is Deployed; every other request passes. Served over TLS
with the `kubevirt-operator-certs` pair the operator itself issues: each replica reads the
Secret through the API (no volume), so a host process serves it as a pod does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from kube_runtime import KubeClient, get_or_none
from kubevirt_api.resources import (
    KUBEVIRTS,
    VIRTUAL_MACHINE_INSTANCE_REPLICASETS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
)
from service_kit import ReloadingContext, TLSFiles, get_logger, server_context

from .apply import Api
from .resources import SECRETS
from .wellknown import Phase, UninstallStrategy

__all__ = ["UNINSTALL_MESSAGE", "WebhookServer", "admit_deletion", "webhook_app"]

log = get_logger(__name__)

UNINSTALL_MESSAGE = (
    "Rejecting the uninstall request, since there are still {} present. Either delete all "
    "KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."
)
_WORKLOADS = (
    (VIRTUAL_MACHINE_INSTANCES, "Virtual Machine Instances"),
    (VIRTUAL_MACHINES, "Virtual Machines"),
    (VIRTUAL_MACHINE_INSTANCE_REPLICASETS, "Virtual Machine Instance Replica Sets"),
)
CERT_SECRET = "kubevirt-operator-certs"


async def admit_deletion(request: Mapping[str, Any], api: Api) -> str | None:
    """None to allow the AdmissionRequest, else why it is refused (upstream's message).

    The CR is read from the API server, not a cache: a strategy set a moment before the
    delete must count (upstream reads it live too)."""
    name, namespace = request.get("name"), str(request.get("namespace") or "")
    if name:
        kv = await get_or_none(api, KUBEVIRTS, str(name), namespace)
    else:
        found = (await api.list(KUBEVIRTS, namespace, limit=1)) or {}
        items = found.get("items") or []
        kv = items[0] if items else None
    if kv is None:
        return None
    strategy = (kv.get("spec") or {}).get("uninstallStrategy") or ""
    if strategy != UninstallStrategy.BLOCK_IF_WORKLOADS_EXIST.value:
        return None
    if (kv.get("status") or {}).get("phase") != Phase.DEPLOYED.value:
        return None
    for resource, words in _WORKLOADS:
        found = await api.list(resource, None, limit=1)
        if (found or {}).get("items"):
            return UNINSTALL_MESSAGE.format(words)
    return None


def webhook_app(api: Api) -> web.Application:
    """`POST /kubevirt-validate-delete` (AdmissionReview v1)."""

    async def validate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review.get("request") or {}
        try:
            refusal = await admit_deletion(req, api)
        except Exception as exc:  # an answer, not a 500: the apiserver shows the message
            refusal = f"cannot check for workloads: {exc}"
        response: dict[str, Any] = {"uid": req.get("uid"), "allowed": refusal is None}
        if refusal is not None:
            response["status"] = {"code": 400, "message": refusal, "reason": "BadRequest"}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app = web.Application()
    app.router.add_post("/kubevirt-validate-delete", validate)
    return app


def _write(directory: Path, cert: bytes, key: bytes) -> None:
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(cert)


class WebhookServer:
    """Serves `app` on `bind:port` once the operator's certificate exists, and follows its
    rotation (polling the Secret every `interval` seconds)."""

    def __init__(
        self,
        app: web.Application,
        client: KubeClient,
        namespace: str,
        bind: str,
        port: int,
        interval: float = 5.0,
    ) -> None:
        self.app = app
        self.client = client
        self.namespace = namespace
        self.bind = bind
        self.port = port
        self.interval = interval

    async def _pair(self) -> tuple[bytes, bytes] | None:
        secret = await get_or_none(self.client, SECRETS, CERT_SECRET, self.namespace)
        data = (secret or {}).get("data") or {}
        if not data.get("tls.crt") or not data.get("tls.key"):
            return None
        return base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])

    async def run(self, stop: asyncio.Event) -> None:
        runner = web.AppRunner(self.app)
        await runner.setup()
        context: ReloadingContext | None = None
        seen: tuple[bytes, bytes] | None = None
        with tempfile.TemporaryDirectory(prefix="virt-operator-webhook-") as tmp:
            directory = Path(tmp)
            files = TLSFiles(directory / "tls.crt", directory / "tls.key")
            try:
                while not stop.is_set():
                    try:
                        pair = await self._pair()
                    except Exception as exc:
                        log.warning("cannot read the webhook certificate", error=repr(exc))
                        pair = None
                    if pair is not None and pair != seen:
                        await asyncio.to_thread(_write, directory, *pair)
                        if context is None:
                            context = await asyncio.to_thread(
                                ReloadingContext, files, server_context
                            )
                            site = web.TCPSite(
                                runner, self.bind, self.port, ssl_context=context.context
                            )
                            await site.start()
                            log.info("webhook serving", port=self.port)
                        else:
                            await asyncio.to_thread(context.reload_if_changed)
                        seen = pair
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.interval)
            finally:
                await runner.cleanup()
