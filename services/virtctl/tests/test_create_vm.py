"""`virtctl create vm`: upstream's cases (pkg/virtctl/create/vm/vm_test.go) that need no CDI."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from virtctl.validation import validate

from .conftest import Run

NAME = re.compile(r"^vm-[bcdfghjklmnpqrstvwxz2456789]{5}$")


def _vm(run: Run, *argv: str) -> dict[str, Any]:
    result = run("create", "vm", *argv)
    assert result.code == 0, result.err
    vm: dict[str, Any] = yaml.safe_load(result.out)
    assert validate(vm) == [], "the manifest must pass `virtctl validate`"
    return vm


def _spec(vm: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = vm["spec"]["template"]["spec"]
    return spec


def _fails(run: Run, *argv: str) -> str:
    result = run("create", "vm", *argv)
    assert result.code == 1, result.out
    assert result.out == ""
    return result.err


def test_defaults_random_name_always_180s_and_512mi(run: Run) -> None:
    vm = _vm(run)
    assert vm["apiVersion"] == "kubevirt.io/v1"
    assert vm["kind"] == "VirtualMachine"
    assert NAME.match(vm["metadata"]["name"])
    assert "namespace" not in vm["metadata"]
    assert vm["spec"]["runStrategy"] == "Always"
    assert _spec(vm)["terminationGracePeriodSeconds"] == 180
    assert _spec(vm)["domain"]["memory"] == {"guest": "512Mi"}
    assert "instancetype" not in vm["spec"]
    assert "preference" not in vm["spec"]


def test_two_runs_get_two_names(run: Run) -> None:
    assert _vm(run)["metadata"]["name"] != _vm(run)["metadata"]["name"]


def test_name_namespace_run_strategy_grace_period_and_memory(run: Run) -> None:
    vm = _vm(
        run,
        "--name=my-vm",
        "-n",
        "my-ns",
        "--run-strategy=rerunonfailure",
        "--termination-grace-period=123",
        "--memory=1Gi",
    )
    assert vm["metadata"] == {"name": "my-vm", "namespace": "my-ns"}
    assert vm["spec"]["runStrategy"] == "RerunOnFailure"  # matched case-insensitively
    assert _spec(vm)["terminationGracePeriodSeconds"] == 123
    assert _spec(vm)["domain"]["memory"] == {"guest": "1Gi"}


@pytest.mark.parametrize(
    ("flag", "name", "kind"),
    [
        ("my-instancetype", "my-instancetype", None),
        (
            "virtualmachineclusterinstancetype/my-clusterinstancetype",
            "my-clusterinstancetype",
            "virtualmachineclusterinstancetype",
        ),
        (
            "VirtualMachineInstancetype/my-instancetype",
            "my-instancetype",
            "virtualmachineinstancetype",
        ),
    ],
)
def test_instancetype_drops_memory(run: Run, flag: str, name: str, kind: str | None) -> None:
    vm = _vm(run, "--instancetype", flag)
    expected = {"name": name} | ({"kind": kind} if kind else {})
    assert vm["spec"]["instancetype"] == expected
    assert "memory" not in _spec(vm)["domain"]


@pytest.mark.parametrize(
    ("flag", "name", "kind"),
    [
        ("my-preference", "my-preference", None),
        (
            "virtualmachineclusterpreference/my-clusterpreference",
            "my-clusterpreference",
            "virtualmachineclusterpreference",
        ),
        ("virtualmachinepreference/my-preference", "my-preference", "virtualmachinepreference"),
    ],
)
def test_preference_keeps_memory(run: Run, flag: str, name: str, kind: str | None) -> None:
    vm = _vm(run, "--preference", flag)
    assert vm["spec"]["preference"] == {"name": name} | ({"kind": kind} if kind else {})
    assert _spec(vm)["domain"]["memory"] == {"guest": "512Mi"}


def test_implicit_inference_from_a_pvc_is_best_effort_and_keeps_memory(run: Run) -> None:
    vm = _vm(run, "--volume-pvc=src:my-pvc")
    ignore = {"inferFromVolume": "my-pvc", "inferFromVolumeFailurePolicy": "Ignore"}
    assert vm["spec"]["instancetype"] == ignore
    assert vm["spec"]["preference"] == ignore
    assert _spec(vm)["domain"]["memory"] == {"guest": "512Mi"}


def test_explicit_inference_is_strict_and_drops_memory(run: Run) -> None:
    vm = _vm(run, "--volume-pvc=src:my-pvc", "--infer-instancetype", "--infer-preference=true")
    assert vm["spec"]["instancetype"] == {"inferFromVolume": "my-pvc"}
    assert vm["spec"]["preference"] == {"inferFromVolume": "my-pvc"}
    assert "memory" not in _spec(vm)["domain"]


def test_inference_from_a_named_volume_and_from_the_first_boot_volume(run: Run) -> None:
    vm = _vm(
        run,
        "--volume-pvc=src:first",
        "--volume-pvc=src:second,bootorder:1",
        "--infer-instancetype-from=first",
    )
    assert vm["spec"]["instancetype"] == {"inferFromVolume": "first"}
    # The preference follows the lowest boot order, not the first volume.
    assert vm["spec"]["preference"]["inferFromVolume"] == "second"


def test_a_containerdisk_cannot_carry_inference_labels(run: Run) -> None:
    vm = _vm(run, "--volume-containerdisk=src:my.registry/my-image:my-tag")
    assert "instancetype" not in vm["spec"]
    assert "preference" not in vm["spec"]
    assert _spec(vm)["domain"]["memory"] == {"guest": "512Mi"}


def test_memory_stops_instancetype_inference_but_not_preference_inference(run: Run) -> None:
    vm = _vm(run, "--memory=1Gi", "--volume-pvc=src:my-pvc")
    assert "instancetype" not in vm["spec"]
    assert vm["spec"]["preference"]["inferFromVolume"] == "my-pvc"


def test_inference_switched_off(run: Run) -> None:
    vm = _vm(run, "--volume-pvc=src:p", "--infer-instancetype=false", "--infer-preference=false")
    assert "instancetype" not in vm["spec"]
    assert "preference" not in vm["spec"]


@pytest.mark.parametrize(
    ("param", "name", "boot_order"),
    [
        ("src:my.registry/my-image:my-tag", "", None),
        ("src:my.registry/my-image:my-tag,name:my-cd", "my-cd", None),
        ("src:my.registry/my-image:my-tag,bootorder:1", "", 1),
        ("src:my.registry/my-image:my-tag,name:my-cd,bootorder:2", "my-cd", 2),
    ],
)
def test_containerdisk_volume(run: Run, param: str, name: str, boot_order: int | None) -> None:
    vm = _vm(run, "--name=my-vm", f"--volume-containerdisk={param}")
    name = name or "my-vm-containerdisk-0"
    assert _spec(vm)["volumes"] == [
        {"name": name, "containerDisk": {"image": "my.registry/my-image:my-tag"}}
    ]
    disks = _spec(vm)["domain"]["devices"].get("disks")
    assert disks == ([{"name": name, "bootOrder": boot_order}] if boot_order else None)


@pytest.mark.parametrize(
    ("param", "name", "boot_order"),
    [
        ("src:my-pvc", "my-pvc", None),
        ("src:my-pvc,name:my-direct-pvc", "my-direct-pvc", None),
        ("src:my-pvc,bootorder:1", "my-pvc", 1),
        ("src:my-pvc,name:my-direct-pvc,bootorder:2", "my-direct-pvc", 2),
    ],
)
def test_pvc_volume(run: Run, param: str, name: str, boot_order: int | None) -> None:
    vm = _vm(run, f"--volume-pvc={param}")
    assert _spec(vm)["volumes"] == [
        {"name": name, "persistentVolumeClaim": {"claimName": "my-pvc"}}
    ]
    disks = _spec(vm)["domain"]["devices"].get("disks")
    assert disks == ([{"name": name, "bootOrder": boot_order}] if boot_order else None)


@pytest.mark.parametrize(
    ("param", "reference"),
    [
        ("src:my-src", "configMap"),
        ("src:my-src,type:configMap", "configMap"),
        ("src:my-src,type:secret", "secret"),
    ],
)
def test_sysprep_volume(run: Run, param: str, reference: str) -> None:
    vm = _vm(run, f"--volume-sysprep={param}")
    assert _spec(vm)["volumes"] == [
        {"name": "sysprepdisk", "sysprep": {reference: {"name": "my-src"}}}
    ]


def _cloud_init(vm: dict[str, Any], key: str = "cloudInitNoCloud") -> dict[str, Any]:
    (volume,) = [v for v in _spec(vm)["volumes"] if v["name"] == "cloudinitdisk"]
    assert set(volume) == {"name", key}
    source: dict[str, Any] = volume[key]
    return source


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ((), "cloudInitNoCloud"),
        (("--cloud-init=nocloud",), "cloudInitNoCloud"),
        (("--cloud-init=configdrive",), "cloudInitConfigDrive"),
    ],
)
def test_user_and_ssh_keys_in_generated_user_data(
    run: Run, extra: tuple[str, ...], key: str
) -> None:
    vm = _vm(run, "--user=my-user", "--ssh-key=ssh-ed25519 AAAA1,ssh-ed25519 AAAA2", *extra)
    assert _cloud_init(vm, key) == {
        "userData": "#cloud-config\nuser: my-user\nssh_authorized_keys:\n"
        "  - ssh-ed25519 AAAA1\n  - ssh-ed25519 AAAA2"
    }


def test_ssh_keys_from_several_flags(run: Run) -> None:
    vm = _vm(run, "--ssh-key=k1", "--ssh-key=k2,k3")
    assert (
        _cloud_init(vm)["userData"] == "#cloud-config\nssh_authorized_keys:\n  - k1\n  - k2\n  - k3"
    )


def test_password_file_is_read_stripped_and_warned_about(run: Run, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    result = run("create", "vm", "--user=me", f"--password-file={secret}")
    assert result.code == 0
    assert "WARNING: --password-file: The password is stored in cleartext" in result.err
    vm = yaml.safe_load(result.out)
    assert _cloud_init(vm)["userData"] == (
        "#cloud-config\nuser: me\npassword: s3cret\nchpasswd: { expire: False }"
    )


def test_ga_manage_ssh_adds_the_selinux_boolean(run: Run) -> None:
    vm = _vm(run, "--ga-manage-ssh")
    assert _cloud_init(vm)["userData"] == (
        "#cloud-config\nruncmd:\n  - [ setsebool, -P, 'virt_qemu_ga_manage_ssh', 'on' ]"
    )


def test_empty_generated_user_data_makes_no_volume(run: Run) -> None:
    assert "volumes" not in _spec(_vm(run, "--ga-manage-ssh=false"))


def test_cloud_init_none_makes_no_volume_and_warns_about_ignored_flags(run: Run) -> None:
    result = run("create", "vm", "--cloud-init=none", "--ga-manage-ssh")
    assert result.code == 0
    assert "volumes" not in _spec(yaml.safe_load(result.out))
    assert "--cloud-init: was set to none" in result.err


@pytest.mark.parametrize(
    ("extra", "key"),
    [((), "cloudInitNoCloud"), (("--cloud-init=configdrive",), "cloudInitConfigDrive")],
)
def test_base64_user_and_network_data(run: Run, extra: tuple[str, ...], key: str) -> None:
    user = base64.b64encode(b"#cloud-config\nuser: me\n").decode()
    network = base64.b64encode(b"version: 2\n").decode()
    vm = _vm(run, f"--cloud-init-user-data={user}", f"--cloud-init-network-data={network}", *extra)
    assert _cloud_init(vm, key) == {"userDataBase64": user, "networkDataBase64": network}


def test_network_data_alone_keeps_generated_user_data(run: Run) -> None:
    network = base64.b64encode(b"version: 2\n").decode()
    vm = _vm(run, f"--cloud-init-network-data={network}")
    assert _cloud_init(vm) == {"userData": "#cloud-config", "networkDataBase64": network}


@pytest.mark.parametrize(
    "param",
    [
        "src:my-keys,user:myuser",
        "type:ssh,src:my-keys,user:myuser",
        "type:ssh,src:my-keys,method:ga,user:myuser",
    ],
)
def test_ssh_access_credential_through_the_agent(run: Run, param: str) -> None:
    vm = _vm(run, f"--access-cred={param}")
    assert _spec(vm)["accessCredentials"] == [
        {
            "sshPublicKey": {
                "source": {"secret": {"secretName": "my-keys"}},
                "propagationMethod": {"qemuGuestAgent": {"users": ["myuser"]}},
            }
        }
    ]
    # The agent may manage SSH only with the SELinux boolean set (upstream sets it).
    assert "virt_qemu_ga_manage_ssh" in _cloud_init(vm)["userData"]


def test_ssh_access_credential_takes_the_user_flag(run: Run) -> None:
    vm = _vm(run, "--user=cloud-user", "--access-cred=type:ssh,src:my-keys")
    method = _spec(vm)["accessCredentials"][0]["sshPublicKey"]["propagationMethod"]
    assert method == {"qemuGuestAgent": {"users": ["cloud-user"]}}
    assert _cloud_init(vm)["userData"].startswith("#cloud-config\nuser: cloud-user\nruncmd:")


@pytest.mark.parametrize(
    ("param", "extra", "method", "key"),
    [
        ("src:my-keys,method:nocloud", (), {"noCloud": {}}, "cloudInitNoCloud"),
        ("src:my-keys,method:configdrive", (), {"configDrive": {}}, "cloudInitConfigDrive"),
        (
            "type:ssh,src:my-keys,method:configdrive",
            ("--cloud-init=configdrive",),
            {"configDrive": {}},
            "cloudInitConfigDrive",
        ),
    ],
)
def test_ssh_access_credential_through_cloud_init(
    run: Run, param: str, extra: tuple[str, ...], method: dict[str, Any], key: str
) -> None:
    vm = _vm(run, f"--access-cred={param}", *extra)
    assert _spec(vm)["accessCredentials"][0]["sshPublicKey"]["propagationMethod"] == method
    assert _cloud_init(vm, key) == {"userData": "#cloud-config"}


def test_password_access_credential(run: Run) -> None:
    vm = _vm(run, "--access-cred=type:password,src:my-pws")
    assert _spec(vm)["accessCredentials"] == [
        {
            "userPassword": {
                "source": {"secret": {"secretName": "my-pws"}},
                "propagationMethod": {"qemuGuestAgent": {}},
            }
        }
    ]


@pytest.mark.parametrize(
    ("argv", "flag", "says"),
    [
        (
            ["--run-strategy=Sometimes"],
            "run-strategy",
            "supported values are: Always, Manual, Halted, Once, RerunOnFailure",
        ),
        (["--memory=lots"], "memory", "invalid quantity 'lots'"),
        (
            ["--instancetype=foo/bar"],
            "instancetype",
            'invalid instancetype kind "foo", supported values are: virtualmachineinstancetype, virtualmachineclusterinstancetype',
        ),
        (["--instancetype=a/b/c"], "instancetype", "invalid count 2 of slashes"),
        (["--instancetype=virtualmachineinstancetype/"], "instancetype", "name cannot be empty"),
        (
            ["--preference=virtualmachineinstancetype/x"],
            "preference",
            "supported values are: virtualmachinepreference, virtualmachineclusterpreference",
        ),
        (["--volume-containerdisk=name:x"], "volume-containerdisk", "src must be specified"),
        (["--volume-containerdisk="], "volume-containerdisk", "params may not be empty"),
        (
            ["--volume-containerdisk=src"],
            "volume-containerdisk",
            "params need to have at least one colon: src",
        ),
        (
            ["--volume-containerdisk=src:i,color:red"],
            "volume-containerdisk",
            "unknown param(s): color:red",
        ),
        (
            ["--volume-containerdisk=src:i,bootorder:0"],
            "volume-containerdisk",
            "bootorder must be greater than 0",
        ),
        (
            ["--volume-containerdisk=src:i,bootorder:one"],
            "volume-containerdisk",
            'failed to parse param "bootorder"',
        ),
        (
            ["--volume-containerdisk=src:i,name:Bad_Name"],
            "volume-containerdisk",
            'invalid name "Bad_Name"',
        ),
        (
            ["--volume-containerdisk=src:i,name:x", "--volume-pvc=src:x"],
            "volume-pvc",
            'there is already a volume with name "x"',
        ),
        (
            ["--volume-containerdisk=src:i,bootorder:1", "--volume-pvc=src:p,bootorder:1"],
            "volume-pvc",
            "bootorder 1 was specified multiple times",
        ),
        (
            ["--volume-pvc=src:my-ns/my-pvc"],
            "volume-pvc",
            'not allowed to specify namespace of pvc "my-pvc"',
        ),
        (
            ["--volume-sysprep=src:s,type:floppy"],
            "volume-sysprep",
            "supported values are: configmap, secret",
        ),
        (["--volume-sysprep=src:ns/s"], "volume-sysprep", "not allowed to specify namespace"),
        (["--infer-instancetype"], "infer-instancetype", "at least one volume is needed"),
        (
            ["--volume-pvc=src:p", "--infer-preference-from=nope"],
            "infer-preference-from",
            'there is no volume with name "nope"',
        ),
        (
            ["--volume-containerdisk=src:i", "--infer-instancetype"],
            "infer-instancetype",
            "works only with datasources, datavolumes or pvcs",
        ),
        (["--cloud-init=weird"], "cloud-init", "supported values are: nocloud, configdrive, none"),
        (
            ["--access-cred=src:k"],
            "access-cred",
            'user must be specified with access credential ssh method ga ("--user" flag or param "user")',
        ),
        (
            ["--access-cred=type:ssh,src:k,method:pigeon"],
            "access-cred",
            "supported values are: ga, nocloud, configdrive",
        ),
        (
            ["--access-cred=type:ssh,src:k,method:nocloud,user:u"],
            "access-cred",
            "user cannot be specified",
        ),
        (
            ["--access-cred=src:k,method:nocloud", "--cloud-init=configdrive"],
            "access-cred",
            "have to match: nocloud vs configdrive",
        ),
        (
            ["--access-cred=type:password,src:k,method:nocloud"],
            "access-cred",
            "supported values are: ga",
        ),
        (["--access-cred=type:magic,src:k"], "access-cred", "supported values are: ssh, password"),
        (
            ["--access-cred=type:ssh,src:ns/k,user:u"],
            "access-cred",
            'not allowed to specify namespace of secret "k"',
        ),
        (["--password-file=/nonexistent/file"], "password-file", "/nonexistent/file"),
    ],
)
def test_a_bad_value_names_the_flag_and_what_is_valid(
    run: Run, argv: list[str], flag: str, says: str
) -> None:
    err = _fails(run, *argv)
    assert f'failed to parse "--{flag}" flag' in err
    assert says in err
    assert err.count("\n") == 1, "one line"


@pytest.mark.parametrize(
    "flag", ["volume-import", "volume-datasource", "volume-clone-pvc", "volume-blank"]
)
def test_datavolume_flags_are_refused_for_lack_of_cdi(run: Run, flag: str) -> None:
    err = _fails(run, f"--{flag}=type:ds,src:my-ds")
    assert f'"--{flag}"' in err
    assert "CDI" in err
    assert "--volume-containerdisk or --volume-pvc" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--memory=1Gi", "--instancetype=u1.small"],
            "--instancetype: not allowed with argument --memory",
        ),
        (
            ["--instancetype=u1.small", "--infer-instancetype"],
            "not allowed with argument --instancetype",
        ),
        (
            ["--preference=fedora", "--infer-preference-from=x"],
            "not allowed with argument --preference",
        ),
        (
            ["--cloud-init-user-data=Zm9v", "--ssh-key=k"],
            "--cloud-init-user-data and --ssh-key cannot be used together",
        ),
        (["--infer-instancetype=maybe"], "invalid boolean 'maybe'"),
    ],
)
def test_flags_that_exclude_each_other_are_a_usage_error(
    run: Run, argv: list[str], says: str
) -> None:
    result = run("create", "vm", *argv)
    assert result.code == 2
    assert says in result.err
    assert result.out == ""
