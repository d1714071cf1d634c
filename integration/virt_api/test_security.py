"""Only the front proxy may speak for users, and each call is authorized for that user."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

VM = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "guarded"},
    "spec": {
        "runStrategy": "Halted",
        "template": {
            "spec": {
                "domain": {
                    "devices": {"disks": [{"name": "r", "disk": {}}]},
                    "resources": {"requests": {"memory": "64Mi"}},
                },
                "volumes": [{"name": "r", "containerDisk": {"image": "img"}}],
            }
        },
    },
}


def test_user_without_rbac_gets_403_and_with_edit_succeeds(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    virtctl: Callable[..., Any],
    user_kubeconfig: Callable[[str], Path],
    get_json: Callable[..., Any],
) -> None:
    assert apply(VM).returncode == 0
    config = user_kubeconfig("nobody")
    refused = virtctl(config, "start", "guarded")
    assert refused.returncode == 1
    assert 'cannot update resource "virtualmachines/start"' in refused.stderr, refused.stderr
    assert "403" in refused.stderr
    assert get_json("vm", "guarded", "-n", namespace)["spec"]["runStrategy"] == "Halted"

    kube.kubectl.run(
        "create",
        "rolebinding",
        "nobody-edit",
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:nobody",
        "-n",
        namespace,
    )
    allowed = virtctl(config, "start", "guarded")
    assert allowed.returncode == 0, allowed.stderr
    assert get_json("vm", "guarded", "-n", namespace)["spec"]["runStrategy"] == "Always"


def _put_direct(
    virt_api: Any, namespace: str, context: ssl.SSLContext
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPSConnection(virt_api.host, virt_api.port, context=context, timeout=10)
    try:
        conn.request(
            "PUT",
            f"/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachines/guarded/start",
            body=b"{}",
            headers={
                "X-Remote-User": "system:admin",
                "X-Remote-Group": "system:masters",
                "Content-Type": "application/json",
            },
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _client_context(virt_api: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(virt_api.ca))
    context.check_hostname = False  # we dial the host address; the cert names the Service
    return context


def test_forged_remote_user_without_front_proxy_cert_is_refused(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    get_json: Callable[..., Any],
) -> None:
    assert apply(VM).returncode == 0
    status, body = _put_direct(virt_api, namespace, _client_context(virt_api))
    assert status == 401
    assert "front proxy" in body["message"]
    assert get_json("vm", "guarded", "-n", namespace)["spec"]["runStrategy"] == "Halted"


def test_forged_remote_user_with_another_cas_cert_fails_tls(
    virt_api: Any, kube: Any, namespace: str
) -> None:
    cluster = kube.require_local()
    admin = (
        cluster.layout.pki
    )  # the cluster CA's admin client cert: valid, but not the front proxy's
    context = _client_context(virt_api)
    context.load_cert_chain(str(admin / "admin.crt"), str(admin / "admin.key"))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _put_direct(virt_api, namespace, context)
