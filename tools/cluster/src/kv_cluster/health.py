"""HTTPS health probes against components, authenticated with a client certificate."""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from kv_cluster.pki import CertPaths

__all__ = ["Health", "TlsClient", "probe", "wait_until"]


@dataclass(frozen=True)
class Health:
    """The outcome of one probe: `ok`, and what was seen (body or error) for the user."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class TlsClient:
    """Who we are (client cert) and whom we trust (CA) when probing a component."""

    ca: str
    client: CertPaths | None = None

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        if self.client is not None:
            ctx.load_cert_chain(str(self.client.cert), str(self.client.key))
        return ctx


def probe(
    host: str,
    port: int,
    path: str,
    tls: TlsClient | None,
    *,
    timeout: float = 3.0,
    expect: Callable[[str], bool] | None = None,
) -> Health:
    """GET https://host:port/path (http:// when `tls` is None); healthy on HTTP 200 (and
    `expect(body)` when given)."""
    conn = (
        http.client.HTTPConnection(host, port, timeout=timeout)
        if tls is None
        else http.client.HTTPSConnection(host, port, timeout=timeout, context=tls.context())
    )
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read(4096).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        return Health(False, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
    if resp.status != 200:
        return Health(False, f"HTTP {resp.status}: {body[:300]}")
    if expect is not None and not expect(body):
        return Health(False, body[:300])
    return Health(True, body[:300])


def wait_until(
    check: Callable[[], Health],
    *,
    timeout: float,
    interval: float = 0.25,
    still_running: Callable[[], bool] | None = None,
) -> Health:
    """Poll `check` until healthy or `timeout`; stop early when `still_running()` turns False."""
    deadline = time.monotonic() + timeout
    last = check()
    while not last.ok and time.monotonic() < deadline:
        if still_running is not None and not still_running():
            return Health(False, f"process exited ({last.detail})")
        time.sleep(interval)
        last = check()
    return last
