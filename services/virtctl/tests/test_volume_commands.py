"""addvolume/removevolume: the options virt-api receives, the VM-then-VMI fallback, the
flag checks with upstream's words, and the retry of a concurrent change."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from virtctl.cli import main

if TYPE_CHECKING:
    from conftest import Routes

SUBRESOURCES = "/apis/subresources.kubevirt.io/v1/namespaces/team-a"
CLAIM = "/api/v1/namespaces/team-a/persistentvolumeclaims/pvc1"
NOT_FOUND = (404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"})


def puts(api: Routes) -> list[tuple[str, Any]]:
    return [(r[1], r[3]) for r in api.requests if r[0] == "PUT"]


def test_addvolume_plugs_the_claim_into_the_vm(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["addvolume", "vm1", "--volume-name=pvc1", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 0
    assert api.requests[0][:2] == ("GET", CLAIM)
    assert puts(api) == [
        (
            f"{SUBRESOURCES}/virtualmachines/vm1/addvolume",
            {
                "name": "pvc1",
                "disk": {"disk": {"bus": "scsi"}, "serial": "pvc1"},
                "volumeSource": {"persistentVolumeClaim": {"claimName": "pvc1"}},
            },
        )
    ]
    out = capsys.readouterr().out
    assert out == "Successfully submitted add volume request to VM vm1 for volume pvc1\n"


def test_addvolume_flags_shape_the_disk(api: Routes, tmp_path: Path) -> None:
    argv = [
        "addvolume", "vm1", "--volume-name=pvc1", "--disk-name=data", "--serial=S-1",
        "--cache=writeback", "--disk-type=lun", "--bus=scsi", "--dry-run",
        "--kubeconfig", api.kubeconfig(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    ((_, body),) = puts(api)
    assert body == {
        "name": "data",
        "disk": {"lun": {"bus": "scsi"}, "serial": "S-1", "cache": "writeback"},
        "volumeSource": {"persistentVolumeClaim": {"claimName": "pvc1"}},
        "dryRun": ["All"],
    }


def test_without_a_vm_the_standalone_vmi_is_asked(api: Routes, tmp_path: Path) -> None:
    api.answers[("PUT", f"{SUBRESOURCES}/virtualmachines/vm1/removevolume")] = NOT_FOUND
    argv = ["removevolume", "vm1", "--volume-name=pvc1", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 0
    assert puts(api) == [
        (f"{SUBRESOURCES}/virtualmachines/vm1/removevolume", {"name": "pvc1"}),
        (f"{SUBRESOURCES}/virtualmachineinstances/vm1/removevolume", {"name": "pvc1"}),
    ]


def test_persist_is_accepted_but_deprecated(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["removevolume", "vm1", "--volume-name=pvc1", "--persist"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 0
    assert "--persist is deprecated and has no effect" in capsys.readouterr().err
    assert [path for path, _ in puts(api)] == [f"{SUBRESOURCES}/virtualmachines/vm1/removevolume"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--bus=sata"],
            "Invalid bus type 'sata' for disk. Only 'scsi' and 'virtio' are supported.",
        ),
        (["--disk-type=lun", "--bus=virtio"], "Invalid bus type 'virtio' for LUN disk."),
        (["--disk-type=cdrom"], "Invalid disk type 'cdrom'. Only LUN and Disk are supported."),
        (["--cache=unsafe"], "invalid cache value unsafe"),
        (["--disk-name=" + "d" * 64], "Invalid disk name"),
    ],
)
def test_bad_flags_are_refused_before_any_call(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    argv = ["addvolume", "vm1", "--volume-name=pvc1", *flags]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("virtctl: error adding volume, ")
    assert message in err
    assert api.requests == []


def test_a_missing_claim_is_named(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers[("GET", CLAIM)] = NOT_FOUND
    argv = ["addvolume", "vm1", "--volume-name=pvc1", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 1
    assert "Volume pvc1 is not a DataVolume or PersistentVolumeClaim" in capsys.readouterr().err
    assert puts(api) == []


def test_a_long_claim_name_without_a_disk_name_is_refused(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["addvolume", "vm1", f"--volume-name={'c' * 64}"]
    assert main([*argv, "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    assert "Use in conjunction with --disk-name" in capsys.readouterr().err


def test_a_claim_name_no_serial_may_carry_gets_no_serial(api: Routes, tmp_path: Path) -> None:
    api.answers[("GET", "/api/v1/namespaces/team-a/persistentvolumeclaims/my.claim")] = (200, {})
    argv = ["addvolume", "vm1", "--volume-name=my.claim", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 0
    ((_, body),) = puts(api)
    assert body["disk"] == {"disk": {"bus": "scsi"}}


def test_a_concurrent_change_is_retried_and_a_refusal_is_not(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(
        [
            (409, {"kind": "Status", "code": 409, "reason": "Conflict",
                   "message": "the VM changed meanwhile, retry: testing value failed"}),
            (202, {}),
        ]
    )  # fmt: skip

    def handle(method: str, path: str, body: Any) -> tuple[int, Any]:
        return next(answers) if method == "PUT" else (200, {})

    api.handle = handle
    argv = ["addvolume", "vm1", "--volume-name=pvc1", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 0
    assert len(puts(api)) == 2

    refusal = "Unable to remove volume [pvc1] because it does not exist"
    api.handle = lambda method, path, body: (
        409,
        {"kind": "Status", "code": 409, "reason": "Conflict", "message": refusal},
    )
    argv = ["removevolume", "vm1", "--volume-name=pvc1", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == f"virtctl: error removing volume, {refusal} (409 Conflict)\n"
