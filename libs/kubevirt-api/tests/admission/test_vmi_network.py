"""VMI create: networks and interfaces."""

from __future__ import annotations

from typing import Any

from kubevirt_api.admission import ClusterConfig, validate_vmi_create


def fields(vmi: dict[str, Any]) -> dict[str, str]:
    got: dict[str, str] = {}
    for c in validate_vmi_create(vmi, ClusterConfig()):
        got[c.field] = f"{got.get(c.field, '')} {c.message}".strip()
    return got


def test_two_pod_networks(vmi: dict[str, Any]) -> None:
    vmi["spec"]["networks"].append({"name": "second", "pod": {}})
    vmi["spec"]["domain"]["devices"]["interfaces"].append({"name": "second", "bridge": {}})
    assert "only one pod network" in fields(vmi)["spec.networks[1].pod"]


def test_interface_without_network(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"].append({"name": "orphan", "bridge": {}})
    assert "add a network" in fields(vmi)["spec.domain.devices.interfaces[1].name"]


def test_network_without_interface(vmi: dict[str, Any]) -> None:
    vmi["spec"]["networks"].append({"name": "blue", "multus": {"networkName": "blue-net"}})
    assert "spec.networks[1].name" in fields(vmi)


def test_masquerade_only_on_pod_network(vmi: dict[str, Any]) -> None:
    vmi["spec"]["networks"].append({"name": "blue", "multus": {"networkName": "blue-net"}})
    vmi["spec"]["domain"]["devices"]["interfaces"].append({"name": "blue", "masquerade": {}})
    assert (
        "only allowed on the pod network"
        in fields(vmi)["spec.domain.devices.interfaces[1].masquerade"]
    )


def test_interface_model_lists_valid_models(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0]["model"] = "vmxnet3"
    message = fields(vmi)["spec.domain.devices.interfaces[0].model"]
    assert "virtio" in message
    assert "e1000" in message


def test_probe_needs_exactly_one_handler_and_pod_network(vmi: dict[str, Any]) -> None:
    vmi["spec"]["readinessProbe"] = {"httpGet": {"port": 80}, "tcpSocket": {"port": 22}}
    vmi["spec"]["livenessProbe"] = {}
    got = fields(vmi)
    assert "exactly one" in got["spec.readinessProbe"]
    assert "found none" in got["spec.livenessProbe"]


def test_sriov_needs_multus(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0] = {"name": "default", "sriov": {}}
    assert "multus" in fields(vmi)["spec.domain.devices.interfaces[0].sriov"]


def test_discontinued_bindings_point_to_plugins(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0] = {"name": "default", "slirp": {}}
    assert "discontinued" in fields(vmi)["spec.domain.devices.interfaces[0].slirp"]


def test_bridge_on_pod_network_can_be_forbidden_by_config(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0] = {"name": "default", "bridge": {}}
    assert validate_vmi_create(vmi, ClusterConfig()) == []
    config = ClusterConfig.from_kubevirt(
        {"spec": {"configuration": {"network": {"permitBridgeInterfaceOnPodNetwork": False}}}}
    )
    causes = validate_vmi_create(vmi, config)
    assert [c.field for c in causes] == ["spec.domain.devices.interfaces[0].bridge"]


def test_forwarded_ports(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0]["ports"] = [
        {"name": "http", "port": 80},
        {"name": "http", "port": 0, "protocol": "SCTP"},
        {"name": "Not_Valid", "port": 70000},
    ]
    got = fields(vmi)
    base = "spec.domain.devices.interfaces[0].ports"
    assert "used twice" in got[f"{base}[1].name"]
    assert "required" in got[f"{base}[1].port"]
    assert "TCP or UDP" in got[f"{base}[1].protocol"]
    assert "IANA" in got[f"{base}[2].name"]
    assert "65535" in got[f"{base}[2].port"]


def test_interface_name_format(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["interfaces"][0]["name"] = "bad name"
    vmi["spec"]["networks"][0]["name"] = "bad name"
    assert "letters, digits" in fields(vmi)["spec.domain.devices.interfaces[0].name"]


def test_one_multus_default_network_and_no_pod_network_beside_it(vmi: dict[str, Any]) -> None:
    for name in ("main", "other"):
        vmi["spec"]["networks"].append(
            {"name": name, "multus": {"networkName": f"{name}-net", "default": True}}
        )
        vmi["spec"]["domain"]["devices"]["interfaces"].append({"name": name, "bridge": {}})
    got = fields(vmi)
    assert "only have one default network" in got["spec.networks[2].multus.default"]
    assert "pod network cannot be defined" in got["spec.networks"]


def test_a_multus_default_network_alone_is_fine(vmi: dict[str, Any]) -> None:
    vmi["spec"]["networks"] = [{"name": "main", "multus": {"networkName": "n", "default": True}}]
    vmi["spec"]["domain"]["devices"]["interfaces"] = [{"name": "main", "bridge": {}}]
    assert fields(vmi) == {}
