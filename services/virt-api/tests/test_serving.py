"""virt-api started with the flags the cluster tooling passes: it serves, authenticates to
the API server with the token file only, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

AUTH_CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _serving(process: asyncio.subprocess.Process) -> None:
    """Wait for virt-api's "serving" log line (or its exit, which fails the test)."""
    assert process.stderr is not None
    async with asyncio.timeout(30):
        while line := await process.stderr.readline():
            if b"virt-api serving" in line:
                return
    raise AssertionError(f"virt-api exited with {await process.wait()} before serving")


async def test_serves_with_the_token_file_and_stops_on_sigterm(
    authority: Callable[[str], Any], fake_api: Any, tmp_path: Path
) -> None:
    serving_ca, proxy_ca = authority("serving"), authority("front-proxy")
    server = serving_ca.issue("server", "virt-api", server=True)
    fake_api.objects[AUTH_CONFIGMAP] = {
        "data": {
            "requestheader-client-ca-file": proxy_ca.pem,
            "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
        }
    }
    fake_api.objects["/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1"] = {
        "metadata": {"name": "vm1", "namespace": "default"},
        "spec": {"runStrategy": "Halted", "template": {}},
    }
    kubeconfig = tmp_path / "admin.kubeconfig"
    kubeconfig.write_text(
        "current-context: admin\n"
        "contexts: [{name: admin, context: {cluster: local, user: admin}}]\n"
        f"clusters: [{{name: local, cluster: {{server: '{fake_api.url}'}}}}]\n"
        "users: [{name: admin, user: {token: admin-token}}]\n"
    )
    token = tmp_path / "virt-api.token"
    token.write_text("service-account-token\n")
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "virt_api",
        "--bind=127.0.0.1",
        f"--port={port}",
        f"--tls-cert={server.cert}",
        f"--tls-key={server.key}",
        f"--kubeconfig={kubeconfig}",
        f"--token-file={token}",
        "--kubevirt-groups=system:masters",
        "--source-digest=test",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await _serving(process)
        proxy = proxy_ca.issue("proxy", "front-proxy-client")
        tls = ssl.create_default_context(cafile=str(serving_ca.path))
        tls.load_cert_chain(str(proxy.cert), str(proxy.key))
        base = f"https://localhost:{port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session:
            async with session.get(f"{base}/healthz") as response:
                assert response.status == 200
            start = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm1/start"
            async with session.put(base + start, headers={"X-Remote-User": "alice"}) as response:
                assert response.status == 202
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    paths = [path for _, path, _, _ in fake_api.calls]
    assert AUTH_CONFIGMAP in paths
    assert any(path.endswith("/subjectaccessreviews") for path in paths)
    assert set(fake_api.credentials) == {"Bearer service-account-token"}
