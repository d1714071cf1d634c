"""inferFromVolume: matchers from a PVC's default-instancetype/-preference labels, the
failure policies, and upstream's matcher checks (pkg/instancetype/infer, webhooks/vm)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from kubevirt_api.instancetypes import (
    DEFAULT_INSTANCETYPE_KIND_LABEL,
    DEFAULT_INSTANCETYPE_LABEL,
    DEFAULT_PREFERENCE_LABEL,
    InferenceError,
    infer_matchers,
    matcher_causes,
)

PVCS: dict[tuple[str, str], Mapping[str, str]] = {
    ("ns1", "labelled"): {
        DEFAULT_INSTANCETYPE_LABEL: "u1.medium",
        DEFAULT_INSTANCETYPE_KIND_LABEL: "VirtualMachineInstancetype",
        DEFAULT_PREFERENCE_LABEL: "fedora",
    },
    ("ns1", "bare"): {},
}


async def labels_of(name: str, namespace: str) -> Mapping[str, str] | None:
    return PVCS.get((namespace, name))


def vm(volume: dict[str, Any], policy: str | None = None, **matchers: Any) -> dict[str, Any]:
    infer: dict[str, Any] = {"inferFromVolume": "root"}
    if policy:
        infer["inferFromVolumeFailurePolicy"] = policy
    return {
        "metadata": {"name": "vm1", "namespace": "ns1"},
        "spec": {
            "instancetype": dict(infer),
            "preference": dict(infer),
            **matchers,
            "template": {
                "spec": {
                    "domain": {"devices": {}, "memory": {"guest": "512Mi"}},
                    "volumes": [{"name": "root", **volume}],
                }
            },
        },
    }


PVC = {"persistentVolumeClaim": {"claimName": "labelled"}}


async def test_the_pvcs_labels_become_the_matchers() -> None:
    out = await infer_matchers(labels_of, vm(PVC))
    assert out["spec"]["instancetype"] == {
        "name": "u1.medium",
        "kind": "VirtualMachineInstancetype",
    }
    assert out["spec"]["preference"] == {"name": "fedora"}
    # Reject (the default): the template keeps its memory.
    assert out["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "512Mi"}


async def test_with_ignore_an_inferred_instancetype_drops_the_templates_memory() -> None:
    out = await infer_matchers(labels_of, vm(PVC, "Ignore"))
    assert out["spec"]["instancetype"]["name"] == "u1.medium"
    assert "memory" not in out["spec"]["template"]["spec"]["domain"]


async def test_a_missing_label_refuses_or_with_ignore_drops_the_matcher() -> None:
    bare = {"persistentVolumeClaim": {"claimName": "bare"}}
    with pytest.raises(InferenceError) as refused:
        await infer_matchers(labels_of, vm(bare))
    assert str(refused.value) == (
        "unable to find required instancetype.kubevirt.io/default-instancetype label on the volume"
    )
    out = await infer_matchers(labels_of, vm(bare, "Ignore"))
    assert "instancetype" not in out["spec"]
    assert "preference" not in out["spec"]
    assert out["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "512Mi"}


async def test_a_volume_type_without_labels_is_ignorable_and_a_datavolume_names_cdi() -> None:
    disk = {"containerDisk": {"image": "img:1"}}
    with pytest.raises(InferenceError) as refused:
        await infer_matchers(labels_of, vm(disk))
    assert (
        str(refused.value) == "unable to infer defaults from volume root as type is not supported"
    )
    assert "instancetype" not in (await infer_matchers(labels_of, vm(disk, "Ignore")))["spec"]
    with pytest.raises(InferenceError) as cdi:
        await infer_matchers(labels_of, vm({"dataVolume": {"name": "dv1"}}))
    assert "need CDI (the Containerized Data Importer)" in str(cdi.value)


async def test_a_missing_volume_or_pvc_is_never_ignored() -> None:
    missing = vm({"persistentVolumeClaim": {"claimName": "nope"}}, "Ignore")
    with pytest.raises(InferenceError) as no_pvc:
        await infer_matchers(labels_of, missing)
    assert str(no_pvc.value) == 'persistentvolumeclaims "nope" not found'
    other = vm(PVC, "Ignore")
    other["spec"]["instancetype"]["inferFromVolume"] = "data"
    with pytest.raises(InferenceError) as no_volume:
        await infer_matchers(labels_of, other)
    assert str(no_volume.value) == "unable to find volume data to infer defaults"


async def test_a_vm_without_inference_is_returned_as_it_is() -> None:
    plain = {"spec": {"instancetype": {"name": "u1.small"}}}
    assert await infer_matchers(labels_of, plain) is plain


def test_upstreams_matcher_checks() -> None:
    both = {"spec": {"instancetype": {"name": "a", "kind": "k", "inferFromVolume": "root"},
                     "preference": {"inferFromVolumeFailurePolicy": "Sometimes"}}}  # fmt: skip
    causes = [(c.field, c.message, c.type.value) for c in matcher_causes(both)]
    assert causes == [
        ("spec.instancetype.name", "Name already set, should be cleared before setting "
         "inferFromVolume", "FieldValueNotSupported"),
        ("spec.instancetype.kind", "Kind already set, should be cleared before setting "
         "inferFromVolume", "FieldValueNotSupported"),
        ("spec.preference", "Either Name or InferFromVolume should be provided within the "
         "PreferenceMatcher", "FieldValueNotFound"),
        ("spec.preference.inferFromVolumeFailurePolicy",
         "Invalid value 'Sometimes' for InferFromVolumeFailurePolicy", "FieldValueInvalid"),
    ]  # fmt: skip
    assert matcher_causes({"spec": {"instancetype": {"name": "u1.small"}}}) == []
