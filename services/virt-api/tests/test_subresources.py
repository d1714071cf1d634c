"""VM subresources end to end through the app: patches sent, bodies checked, pods deleted."""

from __future__ import annotations

from typing import Any

from kube_runtime import ApiError

VM_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1"
VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1"


def seed(api: Any, strategy: str = "Always", vmi_phase: str | None = "Running") -> None:
    api.objects[VM_PATH] = {
        "metadata": {"name": "vm1"},
        "spec": {"runStrategy": strategy, "template": {}},
        "status": {"created": True},
    }
    if vmi_phase is not None:
        api.objects[VMI_PATH] = {
            "metadata": {"name": "vm1", "uid": "u1"},
            "spec": {},
            "status": {"phase": vmi_phase},
        }


async def test_forced_restart_deletes_the_launcher_pod(proxied: Any, fake_api: Any) -> None:
    seed(fake_api)
    fake_api.objects["/api/v1/namespaces/ns1/pods"] = {
        "items": [{"metadata": {"name": "virt-launcher-vm1-abcde"}}]
    }
    async with proxied.session.put(
        proxied.url("virtualmachines", "vm1", "restart"), json={"gracePeriodSeconds": 0}
    ) as response:
        assert response.status == 202
    selector = next(q for m, p, _, q in fake_api.calls if m == "GET" and p.endswith("/pods"))
    assert selector == {
        "labelSelector": "kubevirt.io=virt-launcher,kubevirt.io/created-by=u1",
        "fieldSelector": "status.phase=Running",
    }
    deletes = [(p, b) for m, p, b, _ in fake_api.calls if m == "DELETE"]
    assert deletes == [
        (
            "/api/v1/namespaces/ns1/pods/virt-launcher-vm1-abcde",
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 1},
        )
    ]


async def test_restart_with_positive_grace_is_a_bad_request(proxied: Any, fake_api: Any) -> None:
    seed(fake_api)
    async with proxied.session.put(
        proxied.url("virtualmachines", "vm1", "restart"), json={"gracePeriodSeconds": 30}
    ) as response:
        assert response.status == 400
        assert "gracePeriodSeconds=0" in (await response.json())["message"]
    assert fake_api.patches() == []


async def test_dry_run_is_passed_to_the_api_server(proxied: Any, fake_api: Any) -> None:
    seed(fake_api)
    async with proxied.session.put(
        proxied.url("virtualmachines", "vm1", "stop"), json={"dryRun": ["All"]}
    ) as response:
        assert response.status == 202
    assert fake_api.patches()[0][2] == {"dryRun": "All"}


async def test_bad_bodies_are_400(proxied: Any, fake_api: Any) -> None:
    seed(fake_api, "Halted", None)
    deep = b"[" * 60000
    for body in (b"[1,2]", b"{nope", b'{"dryRun": "yes"}', b'{"paused": "true"}', deep):
        async with proxied.session.put(
            proxied.url("virtualmachines", "vm1", "start"), data=body
        ) as response:
            assert response.status == 400, body
    assert fake_api.patches() == []


async def test_failed_json_patch_test_is_a_conflict(proxied: Any, fake_api: Any) -> None:
    seed(fake_api, "Halted", None)
    fake_api.patch_error = ApiError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request: testing value /spec/runStrategy failed",
    )
    async with proxied.session.put(proxied.url("virtualmachines", "vm1", "start")) as response:
        assert response.status == 409
        assert "retry" in (await response.json())["message"]


async def test_missing_vm_is_404(proxied: Any) -> None:
    async with proxied.session.put(proxied.url("virtualmachines", "ghost", "start")) as response:
        assert response.status == 404
        assert '"ghost" not found' in (await response.json())["message"]


async def test_migrate_creates_a_migration(proxied: Any, fake_api: Any) -> None:
    seed(fake_api)
    async with proxied.session.put(
        proxied.url("virtualmachines", "vm1", "migrate"), json={"addedNodeSelector": {"zone": "b"}}
    ) as response:
        assert response.status == 202
    post = next((p, b) for m, p, b, _ in fake_api.calls if m == "POST" and "migrations" in p)
    assert post[1]["spec"] == {"vmiName": "vm1", "addedNodeSelector": {"zone": "b"}}
    assert post[1]["metadata"] == {"generateName": "kubevirt-migrate-vm-"}


async def test_discovery_and_openapi_need_no_identity(proxied: Any) -> None:
    async with proxied.session.get(f"{proxied.base}/apis/subresources.kubevirt.io/v1") as response:
        names = {r["name"] for r in (await response.json())["resources"]}
        assert {"virtualmachines/start", "virtualmachineinstances/console"} <= names
    async with proxied.session.get(f"{proxied.base}/openapi/v2") as response:
        paths = (await response.json())["paths"]
        assert (
            "/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}/start"
            in paths
        )


async def test_evacuate_cancel_removes_the_mark_it_was_told_of(proxied: Any, fake_api: Any) -> None:
    fake_api.objects[VMI_PATH] = {"status": {"nodeName": "n1", "evacuationNodeName": "n1"}}
    body = {"evacuationNodeName": "n1", "dryRun": ["All"]}
    for resource in ("virtualmachines", "virtualmachineinstances"):
        async with proxied.session.put(
            proxied.url(resource, "vm1", "evacuate/cancel"), json=body
        ) as response:
            assert response.status == 200
    ((path, ops, query), _) = fake_api.patches()
    assert path == VMI_PATH
    assert ops == [
        {"op": "test", "path": "/status/evacuationNodeName", "value": "n1"},
        {"op": "remove", "path": "/status/evacuationNodeName"},
    ]
    assert query["dryRun"] == "All"
    fake_api.objects[VMI_PATH] = {"status": {"nodeName": "n1"}}
    async with proxied.session.put(
        proxied.url("virtualmachineinstances", "vm1", "evacuate/cancel"), json=body
    ) as response:
        assert response.status == 200
    assert len(fake_api.patches()) == 2  # nothing to cancel: no write


async def test_a_method_or_path_no_route_serves_answers_a_status(proxied: Any) -> None:
    # Found by schemathesis (integration/virt_api/test_schema_fuzz.py): aiohttp's own 405
    # and 404 were plain text, which kubectl and virtctl cannot read a message from.
    start = proxied.url("virtualmachines", "vm1", "start")
    async with proxied.session.request("TRACE", start) as response:
        assert response.status == 405
        assert response.headers["Allow"] == "PUT"
        body = await response.json()
        assert body["kind"] == "Status"
        assert (body["code"], body["reason"]) == (405, "MethodNotAllowed")
        assert body["message"]
    async with proxied.session.put(proxied.url("virtualmachines", "vm1", "nosuch")) as response:
        assert response.status == 404
        body = await response.json()
        assert (body["kind"], body["code"], body["reason"]) == ("Status", 404, "NotFound")


async def test_a_name_the_api_server_refuses_is_a_bad_request(proxied: Any, fake_api: Any) -> None:
    # Found by schemathesis: a name with a '%' is refused by the API server with a 400,
    # which virt-api answered as its own 500.
    refusal = "Name parameter invalid: \"a%b\": may not contain '%'"
    fake_api.get_error = ApiError(400, "BadRequest", refusal)
    for resource, action in (
        ("virtualmachines", "start"),
        ("virtualmachineinstances", "pause"),
    ):
        async with proxied.session.put(proxied.url(resource, "a%25b", action)) as response:
            assert response.status == 400
            assert refusal in (await response.json())["message"]
