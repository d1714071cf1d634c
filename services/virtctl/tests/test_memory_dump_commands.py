"""memory-dump get/remove: the subresource calls, the claim created, upstream's messages,
and download refused with where the dump is."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from virtctl.cli import main

if TYPE_CHECKING:
    from conftest import Routes

SUBRESOURCES = "/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachines/vm1"
VM = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachines/vm1"
VMI = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/vm1"
CLAIMS = "/api/v1/namespaces/team-a/persistentvolumeclaims"
NOT_FOUND = (404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"})


def writes(api: Routes) -> list[tuple[str, str, Any]]:
    return [(r[0], r[1], r[3]) for r in api.requests if r[0] in ("PUT", "POST")]


def dump(api: Routes, tmp_path: Path, *argv: str) -> int:
    return main(["memory-dump", *argv, "--kubeconfig", api.kubeconfig(tmp_path)])


def test_get_submits_the_claim(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1") == 0
    assert writes(api) == [("PUT", f"{SUBRESOURCES}/memorydump", {"claimName": "pvc1"})]
    assert capsys.readouterr().out == "Successfully submitted memory dump request of VM vm1\n"


def test_get_without_a_claim_lets_virt_api_reuse_the_associated_one(
    api: Routes, tmp_path: Path
) -> None:
    assert dump(api, tmp_path, "get", "vm1") == 0
    assert writes(api) == [("PUT", f"{SUBRESOURCES}/memorydump", {"claimName": ""})]


def test_a_refusal_is_reported_with_upstreams_prefix(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = "memory dump request for pvc [pvc1] already in progress"
    api.answers[("PUT", f"{SUBRESOURCES}/memorydump")] = (
        409,
        {"kind": "Status", "code": 409, "reason": "Conflict", "message": message},
    )
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1") == 1
    err = capsys.readouterr().err
    assert err == f"virtctl: error dumping vm memory, {message} (409 Conflict)\n"


def _stopped_claim_world(api: Routes, memory: str = "1Gi") -> None:
    api.answers[("GET", VM)] = (200, {"metadata": {"name": "vm1"}, "status": {}})
    api.answers[("GET", f"{CLAIMS}/pvc1")] = NOT_FOUND
    api.answers[("GET", VMI)] = (
        200,
        {"spec": {"domain": {"resources": {"requests": {"memory": memory}}}}},
    )


def test_create_claim_makes_a_claim_sized_for_the_vmi_then_dumps(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_claim_world(api)
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1", "--create-claim") == 0
    # (1Gi + 100Mi) * 1.055, aligned up to 1Mi.
    assert writes(api) == [
        (
            "POST",
            CLAIMS,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "pvc1",
                    "namespace": "team-a",
                    "labels": {"cdi.kubevirt.io/applyStorageProfile": "true"},
                },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1186Mi"}},
                },
            },
        ),
        ("PUT", f"{SUBRESOURCES}/memorydump", {"claimName": "pvc1"}),
    ]
    assert capsys.readouterr().out.splitlines() == [
        "Using default 5.5% filesystem overhead for pvc size",
        "PVC team-a/pvc1 created",
        "Successfully submitted memory dump request of VM vm1",
    ]


def test_create_claim_takes_the_storage_class_and_access_mode(api: Routes, tmp_path: Path) -> None:
    _stopped_claim_world(api, memory="4Gi")
    argv = ["--create-claim", "--storage-class=fast", "--access-mode=ReadWriteMany"]
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1", *argv) == 0
    spec = writes(api)[0][2]["spec"]
    assert spec == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "4427Mi"}},
        "storageClassName": "fast",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--create-claim"], "missing claim name"),
        (
            ["--claim-name=pvc1", "--create-claim", "--access-mode=ReadOnlyMany"],
            "cannot dump memory to a readonly pvc, use either ReadWriteOnce or ReadWriteMany "
            "if supported",
        ),
        (
            ["--claim-name=pvc1", "--create-claim", "--access-mode=rwo"],
            "invalid access mode, use either ReadWriteOnce or ReadWriteMany if supported",
        ),
    ],
)
def test_bad_flags_are_refused_before_any_call(
    api: Routes,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert dump(api, tmp_path, "get", "vm1", *argv) == 1
    assert capsys.readouterr().err == f"virtctl: {message}\n"
    assert api.requests == []


def test_create_claim_refuses_a_vm_with_an_association(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_claim_world(api)
    api.answers[("GET", VM)] = (
        200,
        {"status": {"memoryDumpRequest": {"claimName": "old", "phase": "Completed"}}},
    )
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1", "--create-claim") == 1
    assert capsys.readouterr().err == (
        "virtctl: please remove current memory dump association before creating a new claim "
        "for a new memory dump\n"
    )
    assert writes(api) == []


def test_create_claim_refuses_an_existing_claim(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_claim_world(api)
    api.answers[("GET", f"{CLAIMS}/pvc1")] = (200, {"metadata": {"name": "pvc1"}})
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1", "--create-claim") == 1
    assert capsys.readouterr().err == (
        "virtctl: PVC team-a/pvc1 already exists, check if it should be created if not "
        "remove create flag\n"
    )
    assert writes(api) == []


def test_create_claim_needs_the_running_vmi(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stopped_claim_world(api)
    api.answers[("GET", VMI)] = NOT_FOUND
    assert dump(api, tmp_path, "get", "vm1", "--claim-name=pvc1", "--create-claim") == 1
    assert 'virtualmachineinstances.kubevirt.io "vm1" not found' in capsys.readouterr().err
    assert writes(api) == []


def test_remove_submits_the_dissociation(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dump(api, tmp_path, "remove", "vm1") == 0
    assert writes(api) == [("PUT", f"{SUBRESOURCES}/removememorydump", None)]
    out = capsys.readouterr().out
    assert out == "Successfully submitted remove memory dump association of VM vm1\n"


def test_a_refused_remove_says_so(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = "can't remove memory dump association for vm vm1, no association found"
    api.answers[("PUT", f"{SUBRESOURCES}/removememorydump")] = (
        409,
        {"kind": "Status", "code": 409, "reason": "Conflict", "message": message},
    )
    assert dump(api, tmp_path, "remove", "vm1") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"virtctl: error removing memory dump association, {message}")


@pytest.mark.parametrize(
    "argv",
    [
        ["download", "vm1", "--output=dump.gz"],
        ["download", "vm1", "--output=dump", "--format=raw", "--port-forward", "--local-port=5000"],
        ["get", "vm1", "--claim-name=pvc1", "--create-claim", "--output=dump.gz"],
    ],
)
def test_download_is_refused_before_anything_changes(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert dump(api, tmp_path, *argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("virtctl: downloading a memory dump is not supported by this virtctl")
    assert "memory dump claim" in err
    assert api.requests == []


def test_an_unknown_action_is_a_usage_error(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dump(api, tmp_path, "dump", "vm1") == 2
    assert "invalid choice: 'dump'" in capsys.readouterr().err
