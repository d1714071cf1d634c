"""The install strategy rendered from a KubeVirt CR's spec."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
import yaml
from virt_operator.fakes import kubevirt
from virt_operator.patches import PatchError
from virt_operator.strategy import InstallSpec, render, split_image
from virt_operator.wellknown import (
    IDENTIFIER_ANNOTATION,
    MANAGED_BY_LABEL,
    REGISTRY_ANNOTATION,
    VERSION_ANNOTATION,
)


def spec_of(**fields: object) -> InstallSpec:
    return InstallSpec.from_kubevirt(kubevirt(**fields), registry="reg.example/kv", tag="v1")


def test_every_object_is_labelled_and_stamped_and_pods_carry_the_stamp() -> None:
    strategy = render(spec_of())
    objects = [*strategy.static_objects(), *strategy.registrations(b"ca"), strategy.config_map]
    for obj in objects:
        meta = obj["metadata"]
        assert meta["labels"][MANAGED_BY_LABEL] == "virt-operator", meta["name"]
        assert meta["annotations"][VERSION_ANNOTATION] == "v1"
        assert meta["annotations"][REGISTRY_ANNOTATION] == "reg.example/kv"
    for workload in strategy.workloads():
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations[IDENTIFIER_ANNOTATION] == strategy.spec.identifier


def test_images_pull_policy_and_the_launcher_image_follow_the_spec() -> None:
    strategy = render(
        spec_of(imageRegistry="other.example/x", imageTag="v9", imagePullPolicy="Never")
    )
    for workload in strategy.workloads():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        name = workload["metadata"]["name"]
        assert container["image"] == f"other.example/x/{name}:v9"
        assert container["imagePullPolicy"] == "Never"
    args = strategy.virt_controller["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--launcher-image=other.example/x/virt-launcher:v9" in args
    assert "--exporter-image=other.example/x/virt-exportserver:v9" in args
    assert "--image-pull-policy=Never" in args
    assert strategy.spec.version == "v9"


def test_replicas_and_node_placement() -> None:
    placement = {
        "nodeSelector": {"infra": "yes"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
    }
    strategy = render(
        spec_of(
            infra={"replicas": 3, "nodePlacement": placement},
            workloads={"nodePlacement": {"nodeSelector": {"vms": "yes"}}},
        )
    )
    api_pod = strategy.virt_api["spec"]["template"]["spec"]
    assert (
        strategy.virt_api["spec"]["replicas"] == strategy.virt_controller["spec"]["replicas"] == 3
    )
    assert api_pod["nodeSelector"] == {"infra": "yes"}
    assert {"key": "k", "operator": "Exists"} in api_pod["tolerations"]
    assert strategy.virt_handler["spec"]["template"]["spec"]["nodeSelector"] == {"vms": "yes"}


def test_configuration_is_not_part_of_the_install_but_the_tag_is() -> None:
    plain = spec_of()
    configured = spec_of(configuration={"developerConfiguration": {"useEmulation": True}})
    assert plain.identifier == configured.identifier
    assert spec_of(imageTag="v2").identifier != plain.identifier


def test_customize_components_json_and_merge_patches() -> None:
    patches = [
        {
            "resourceName": "virt-handler",
            "resourceType": "DaemonSet",
            "type": "json",
            "patch": json.dumps(
                [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--x=1"}]
            ),
        },
        {
            "resourceName": "*",
            "resourceType": "Deployment",
            "type": "merge",
            "patch": json.dumps({"metadata": {"labels": {"patched": "yes"}}}),
        },
    ]
    strategy = render(spec_of(customizeComponents={"patches": patches}))
    assert "--x=1" in strategy.virt_handler["spec"]["template"]["spec"]["containers"][0]["args"]
    assert strategy.virt_api["metadata"]["labels"]["patched"] == "yes"
    assert strategy.virt_controller["metadata"]["labels"]["patched"] == "yes"


def test_a_patch_that_does_not_apply_is_an_error_naming_it() -> None:
    bad = {
        "resourceName": "virt-api",
        "resourceType": "Deployment",
        "type": "json",
        "patch": json.dumps([{"op": "replace", "path": "/spec/nothing", "value": 1}]),
    }
    with pytest.raises(PatchError, match="Deployment/virt-api"):
        render(spec_of(customizeComponents={"patches": [bad]}))


def test_the_strategy_config_map_holds_the_manifests_gzip_base64() -> None:
    strategy = render(spec_of())
    cm = strategy.config_map
    assert cm["metadata"]["name"] == f"kubevirt-install-strategy-{strategy.spec.identifier}"
    assert "kubevirt.io/install-strategy" in cm["metadata"]["labels"]
    docs = list(yaml.safe_load_all(gzip.decompress(base64.b64decode(cm["data"]["manifests"]))))
    kinds = {d["kind"] for d in docs}
    assert {"CustomResourceDefinition", "Deployment", "DaemonSet", "ClusterRole"} <= kinds
    # The KubeVirt CRD comes with the operator, not from it.
    assert "kubevirts.kubevirt.io" not in {d["metadata"]["name"] for d in docs}


def test_registrations_carry_the_ca_bundle() -> None:
    regs = render(spec_of()).registrations(b"PEM")
    bundle = base64.b64encode(b"PEM").decode()
    for doc in regs:
        if doc["kind"] == "APIService":
            assert doc["spec"]["caBundle"] == bundle
        else:
            assert all(h["clientConfig"]["caBundle"] == bundle for h in doc["webhooks"])
    names = {d["metadata"]["name"] for d in regs}
    assert {"virt-api-mutator", "virt-api-validator", "virt-operator-validator"} <= names


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("docker.io/kubevirt-py/virt-operator:v3", ("docker.io/kubevirt-py", "v3")),
        ("10.95.0.1:26405/kubevirt-py/virt-operator:abc", ("10.95.0.1:26405/kubevirt-py", "abc")),
        ("reg:5000/kv/virt-operator", ("reg:5000/kv", "devel")),
    ],
)
def test_the_operator_image_gives_the_default_registry_and_tag(
    ref: str, expected: tuple[str, str]
) -> None:
    assert split_image(ref) == expected
