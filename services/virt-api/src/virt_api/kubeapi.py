"""A small async client for the Kubernetes API: only the calls virt-api makes.

It speaks plain JSON over aiohttp so JSON patches and status subresources need no
generated code; credentials come from a kubeconfig or the pod's service account.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import yaml

__all__ = ["ApiStatusError", "ClientConfig", "KubeApi", "KubeClient"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiStatusError(Exception):
    """The API server answered with a non-2xx status; `body` is its metav1.Status if any."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("message", "") if isinstance(body, Mapping) else str(body)[:200]
        super().__init__(f"{status}: {message}")
        self.status = status
        self.body = body
        self.message = str(message)


class KubeApi(Protocol):
    """The seam between virt-api's logic and the API server (a fake in unit tests)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body or raise ApiStatusError."""
        ...


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where the API server is and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that verifies the API server (unless `insecure`)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    @classmethod
    def from_service_account(cls) -> ClientConfig:
        """The in-cluster configuration of a pod.

        Raises ValueError outside a pod (no KUBERNETES_SERVICE_HOST), OSError when the
        service account token cannot be read.
        """
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        if not host:
            raise ValueError("not in a pod (KUBERNETES_SERVICE_HOST is unset); pass --kubeconfig")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = (SERVICE_ACCOUNT_DIR / "token").read_text().strip()
        return cls(f"https://{host}:{port}", str(SERVICE_ACCOUNT_DIR / "ca.crt"), token=token)

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None
    ) -> ClientConfig:
        """Read one context of a kubeconfig; inline `*-data` fields go to private files.

        Raises ValueError naming what is wrong with the file, OSError when it cannot be read.
        """
        base = Path(path).resolve().parent
        try:
            config = yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: not YAML: {error}") from None
        if not isinstance(config, Mapping):
            raise ValueError(f"{path}: not a kubeconfig")
        name = context or config.get("current-context")

        def pick(section: str, wanted: object) -> Mapping[str, Any]:
            for entry in config.get(section) or []:
                if isinstance(entry, Mapping) and entry.get("name") == wanted:
                    body = entry.get(section[:-1])
                    if isinstance(body, Mapping):
                        return body
            raise ValueError(f"{path}: no {section[:-1]} named {wanted!r}")

        ctx = pick("contexts", name)
        cluster = pick("clusters", ctx.get("cluster"))
        user = pick("users", ctx.get("user"))
        private = Path(tempfile.mkdtemp(prefix="virt-api-kubeconfig-"))

        def material(file_key: str, data_key: str, body: Mapping[str, Any]) -> str | None:
            if body.get(data_key):
                target = private / data_key
                target.write_bytes(base64.b64decode(body[data_key]))
                target.chmod(0o600)
                return str(target)
            if body.get(file_key):
                return str(base / str(body[file_key]))
            return None

        if not cluster.get("server"):
            raise ValueError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
        return cls(
            server=str(cluster["server"]),
            ca_file=material("certificate-authority", "certificate-authority-data", cluster),
            cert_file=material("client-certificate", "client-certificate-data", user),
            key_file=material("client-key", "client-key-data", user),
            token=str(user["token"]) if user.get("token") else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )


class KubeClient:
    """KubeApi over one aiohttp session; close() it when done."""

    def __init__(self, config: ClientConfig, *, timeout: float = 10.0) -> None:
        self._config = config
        headers = {"Accept": "application/json", "User-Agent": "virt-api/kubevirt-py"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._session = aiohttp.ClientSession(
            base_url=config.server,
            headers=headers,
            connector=aiohttp.TCPConnector(ssl=config.ssl_context()),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def close(self) -> None:
        """Release the connection pool."""
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body or raise ApiStatusError."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self._session.request(
            method, path, data=data, headers=headers, params=params
        ) as response:
            text = await response.text()
            try:
                decoded: Any = json.loads(text) if text else None
            except json.JSONDecodeError:
                decoded = text
            if response.status >= 300:
                raise ApiStatusError(response.status, decoded)
            return decoded
