"""A host-side HTTPS server for the routing tests: what virt-api is to the apiserver."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kv_cluster import CertificateAuthority

# (method, path, headers, body, peer cert subject CN) -> (status, JSON body)
Handler = Callable[[str, str, dict[str, str], bytes, str | None], tuple[int, Any]]


@dataclass
class HostServer:
    """A running HTTPS server on the cluster's host address."""

    host: str
    port: int
    ca_pem: bytes
    requests: list[str] = field(default_factory=list)


def _serve(
    host: str,
    handler: Handler,
    cert: Path,
    key: Path,
    client_ca: Path | None,
    requests: list[str],
) -> ThreadingHTTPServer:
    class _Handler(BaseHTTPRequestHandler):
        def _dispatch(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]
            cn = None
            if peer:
                for rdn in peer.get("subject", ()):
                    for attr, value in rdn:
                        if attr == "commonName":
                            cn = value
            requests.append(f"{method} {self.path}")
            # A header sent several times (X-Remote-Group) arrives joined with ", ".
            headers: dict[str, str] = {}
            for key, value in self.headers.items():
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            status, payload = handler(method, self.path, headers, body, cn)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(str(client_ca))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    return server


@pytest.fixture
def host_server(tmp_path: Path) -> Iterator[Callable[..., HostServer]]:
    """Factory: start an HTTPS server on `host` serving `dns_name` with a fresh CA."""
    servers: list[ThreadingHTTPServer] = []

    def start(
        host: str, dns_name: str, handler: Handler, client_ca: Path | None = None
    ) -> HostServer:
        ca = CertificateAuthority.load_or_create(tmp_path, "test-ca", "kvt-test-ca")
        paths = ca.issue(tmp_path, "server", dns_name, server=True, dns_names=[dns_name])
        requests: list[str] = []
        server = _serve(host, handler, paths.cert, paths.key, client_ca, requests)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return HostServer(host, server.server_address[1], ca.cert_pem, requests)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
