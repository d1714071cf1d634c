"""The launcher pod rendered from a typed VMI: what virt-launcher, the scheduler and
virt-handler rely on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_api import ClusterConfig, Quantity, VirtualMachineInstance, load
from virt_controller.config import ControllerConfig
from virt_controller.image_delivery import uses_image_volumes
from virt_controller.launcher_pod import RenderError, render_launcher_pod
from virt_controller.overhead import memory_overhead

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"


def vmi(spec: dict[str, Any] | None = None, **meta: Any) -> VirtualMachineInstance:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm-a", "namespace": "ns", "uid": "uid-1", **meta},
        "spec": spec or {"domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}}},
    }
    return load(VirtualMachineInstance, body)


def compute(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    return container


def test_identity_owner_and_labels() -> None:
    pod = render_launcher_pod(vmi(labels={"app": "x"}), ControllerConfig())
    meta = pod["metadata"]
    assert meta["generateName"] == "virt-launcher-vm-a-"
    assert meta["labels"]["kubevirt.io"] == "virt-launcher"
    assert meta["labels"]["kubevirt.io/created-by"] == "uid-1"
    assert meta["labels"]["app"] == "x"
    (owner,) = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "name": "vm-a",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert pod["spec"]["readinessGates"] == [
        {"conditionType": "kubevirt.io/virtual-machine-unpaused"}
    ]


def test_launcher_arguments_match_its_cli() -> None:
    # The contract with the launcher's CLI, checked against its own parser.
    launcher = pytest.importorskip("virt_launcher.args")
    # Its argparse layer only: the full check wants the directories to exist.
    parser = launcher._parser()

    pod = render_launcher_pod(vmi(spec=None), ControllerConfig())
    container = compute(pod)
    assert container["command"] == ["python3", "-m", "virt_launcher"]
    args = parser.parse_args(container["args"])
    assert (args.name, args.namespace, args.uid) == (
        "vm-a",
        "ns",
        "uid-1",
    )
    assert str(args.sockets_dir) == "/var/run/kubevirt/sockets"
    assert args.grace_period_seconds == 30
    assert pod["spec"]["terminationGracePeriodSeconds"] == 45
    mounts = {m["mountPath"]: m["name"] for m in compute(pod)["volumeMounts"]}
    for path in (
        args.sockets_dir,
        args.private_dir,
        args.ephemeral_disk_dir,
        args.container_disk_dir,
    ):
        assert str(path) in mounts
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert all("emptyDir" in volumes[name] for name in mounts.values())


def test_runs_as_uid_107_without_privileges() -> None:
    pod = render_launcher_pod(vmi(), ControllerConfig())
    ctx = pod["spec"]["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsNonRoot"], ctx["fsGroup"]) == (107, True, 107)
    sc = compute(pod)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # Upstream's requiredCapabilities: the DHCP server's UDP 67.
    assert sc["capabilities"]["add"] == ["NET_BIND_SERVICE"]


def test_interface_ports_become_compute_container_ports() -> None:
    devices = {
        "interfaces": [
            {"name": "default", "masquerade": {}, "ports": [
                {"name": "http", "port": 80},
                {"port": 53, "protocol": "UDP"},
            ]},
            {"name": "second", "bridge": {}, "ports": [{"port": 8080, "protocol": "TCP"}]},
        ]
    }  # fmt: skip
    spec = {"domain": {"devices": devices, "resources": {"requests": {"memory": "1Gi"}}}}
    assert compute(render_launcher_pod(vmi(spec), ControllerConfig()))["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 53, "protocol": "UDP"},
        {"containerPort": 8080, "protocol": "TCP"},
    ]
    assert "ports" not in compute(render_launcher_pod(vmi(), ControllerConfig()))


def test_memory_request_is_guest_plus_overhead_and_devices_in_limits() -> None:
    v = vmi()
    pod = render_launcher_pod(v, ControllerConfig())
    res = compute(pod)["resources"]
    expected = Quantity.parse("1Gi").to_int() + memory_overhead(v)
    assert Quantity.parse(res["requests"]["memory"]).to_int() == expected
    assert res["requests"]["cpu"] == "100m"  # 1 vCPU / cpuAllocationRatio 10
    assert res["limits"]["devices.kubevirt.io/kvm"] == "1"
    assert res["limits"]["devices.kubevirt.io/tun"] == "1"
    assert res["limits"]["devices.kubevirt.io/vhost-net"] == "1"


def test_emulation_requests_no_kvm_and_no_vhost_net() -> None:
    pod = render_launcher_pod(vmi(), ControllerConfig(cluster=ClusterConfig(use_emulation=True)))
    limits = compute(pod)["resources"]["limits"]
    assert "devices.kubevirt.io/kvm" not in limits
    assert "devices.kubevirt.io/vhost-net" not in limits


def test_limits_get_the_overhead_too() -> None:
    v = vmi({"domain": {"devices": {}, "resources": {"limits": {"memory": "512Mi"}}}})
    res = compute(render_launcher_pod(v, ControllerConfig()))["resources"]
    want = Quantity.parse("512Mi").to_int() + memory_overhead(v)
    assert Quantity.parse(res["limits"]["memory"]).to_int() == want
    assert Quantity.parse(res["requests"]["memory"]).to_int() == want


def test_scheduling_fields_pass_through() -> None:
    spec = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}},
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "priorityClassName": "high",
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())["spec"]
    assert pod["nodeSelector"] == {"kubevirt.io/schedulable": "true", "disk": "ssd"}
    assert pod["tolerations"] == spec["tolerations"]
    assert pod["affinity"] == spec["affinity"]
    assert pod["topologySpreadConstraints"] == spec["topologySpreadConstraints"]
    assert pod["priorityClassName"] == "high"


def test_container_disks_are_copied_by_init_containers() -> None:
    spec = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}},
        "volumes": [
            {"name": "root", "containerDisk": {"image": "registry/disk:1"}},
            {
                "name": "data",
                "containerDisk": {"image": "registry/data:1", "path": "/images/d.qcow2"},
            },
        ],
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())["spec"]
    inits = {c["name"]: c for c in pod["initContainers"]}
    assert inits["volumeroot"]["image"] == "registry/disk:1"
    assert "/var/run/kubevirt/container-disks/root/disk.img" in inits["volumeroot"]["command"][2]
    assert (
        "/var/run/kubevirt/container-disks/data/images/d.qcow2" in inits["volumedata"]["command"][2]
    )
    assert inits["volumeroot"]["securityContext"]["runAsUser"] == 107


def test_bad_container_disk_path_names_the_field() -> None:
    spec = {
        "domain": {"devices": {}},
        "volumes": [{"name": "root", "containerDisk": {"image": "i", "path": "/../etc/shadow"}}],
    }
    with pytest.raises(RenderError) as err:
        render_launcher_pod(vmi(spec), ControllerConfig())
    assert err.value.path == "spec.volumes[0].containerDisk.path"


def test_kernel_boot_image_gets_its_own_volume() -> None:
    spec = {
        "domain": {
            "devices": {},
            "firmware": {
                "kernelBoot": {
                    "container": {
                        "image": "k:1",
                        "kernelPath": "/boot/vmlinuz",
                        "initrdPath": "/boot/initrd",
                    }
                }
            },
        }
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())["spec"]
    binary, init = pod["initContainers"]
    # Scratch images have no shell: the first init container brings a static one.
    assert binary["name"] == "container-disk-binary"
    assert init["command"][0] == "/var/run/kubevirt-init/sh"
    assert init["name"] == "kernel-boot"
    assert "/var/run/kubevirt/kernel-boot/boot/vmlinuz" in init["command"][2]
    assert {"name": "kernel-boot", "mountPath": "/var/run/kubevirt/kernel-boot"} in compute(
        {"spec": pod}
    )["volumeMounts"]


_IMAGE_VOLUMES = ControllerConfig(cluster=ClusterConfig(feature_gates=frozenset({"ImageVolume"})))
_IMAGES_SPEC = {
    "domain": {
        "devices": {},
        "firmware": {"kernelBoot": {"container": {"image": "k:1", "kernelPath": "/boot/vmlinuz"}}},
    },
    "volumes": [
        {"name": "root", "containerDisk": {"image": "registry/disk:1"}},
        {
            "name": "data",
            "containerDisk": {
                "image": "registry/data:1",
                "path": "/images/d.qcow2",
                "imagePullPolicy": "Always",
                "imagePullSecret": "pull",
            },
        },
    ],
}


def test_with_the_image_volume_gate_images_are_mounted_not_copied() -> None:
    pod = render_launcher_pod(vmi(_IMAGES_SPEC), _IMAGE_VOLUMES)["spec"]
    assert "initContainers" not in pod
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["root"]["image"] == {
        "reference": "registry/disk:1",
        "pullPolicy": "IfNotPresent",
    }
    assert volumes["data"]["image"] == {"reference": "registry/data:1", "pullPolicy": "Always"}
    assert volumes["kernel-boot"]["image"]["reference"] == "k:1"
    assert "kubevirt-init" not in volumes
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    mounts = compute({"spec": pod})["volumeMounts"]
    # Where the copies would be: the kernel at kernel-boot/boot/vmlinuz, a containerDisk
    # with a path at <volume>/<path>, read-only, inside the container-disks emptyDir.
    for name, where in (
        ("root", "/var/run/kubevirt/container-disks/root"),
        ("data", "/var/run/kubevirt/container-disks/data"),
        ("kernel-boot", "/var/run/kubevirt/kernel-boot"),
    ):
        assert {"name": name, "mountPath": where, "readOnly": True} in mounts
    order = [m["name"] for m in mounts]
    assert order.index("container-disks") < order.index("root")


def test_a_migration_target_gets_its_images_the_way_its_source_did() -> None:
    source = render_launcher_pod(vmi(_IMAGES_SPEC), _IMAGE_VOLUMES)
    assert uses_image_volumes(source)
    copied = render_launcher_pod(vmi(_IMAGES_SPEC), _IMAGE_VOLUMES, image_volumes=False)
    assert not uses_image_volumes(copied)
    assert [c["name"] for c in copied["spec"]["initContainers"]] == [
        "container-disk-binary",
        "volumeroot",
        "volumedata",
        "kernel-boot",
    ]


def test_an_image_volume_may_not_take_a_launcher_volume_name() -> None:
    spec = {
        "domain": {"devices": {}},
        "volumes": [{"name": "private", "containerDisk": {"image": "registry/disk:1"}}],
    }
    render_launcher_pod(vmi(spec), ControllerConfig())  # a copy is only a directory
    with pytest.raises(RenderError) as err:
        render_launcher_pod(vmi(spec), _IMAGE_VOLUMES)
    assert err.value.path == "spec.volumes[0].name"
    assert "reserved" in err.value.message


def _vmi_examples() -> list[Path]:
    """Upstream's vmi-*.yaml files that hold a VMI (a preset and a replica set do not)."""
    return [
        p
        for p in sorted(EXAMPLES.glob("vmi-*.yaml"))
        if yaml.safe_load(p.read_text()).get("kind") == "VirtualMachineInstance"
    ]


@pytest.mark.parametrize("path", _vmi_examples(), ids=lambda p: p.name)
def test_every_upstream_vmi_example_renders(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    body["metadata"].update({"uid": "u", "namespace": body["metadata"].get("namespace", "ns")})
    pod = render_launcher_pod(load(VirtualMachineInstance, body), ControllerConfig())
    assert compute(pod)["resources"]["requests"]["memory"]
    # The controller hands over the stored VMI too, to spare a dump: the same pod.
    typed = load(VirtualMachineInstance, body)
    assert render_launcher_pod(typed, ControllerConfig(), raw=body) == pod


def test_claims_host_disks_and_config_volumes_are_mounted_where_the_launcher_reads() -> None:
    spec = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}},
        "volumes": [
            {"name": "root", "persistentVolumeClaim": {"claimName": "root-pvc"}},
            {"name": "dv", "dataVolume": {"name": "my-dv"}},
            {
                "name": "host",
                "hostDisk": {"path": "/data/disk.img", "type": "DiskOrCreate", "capacity": "1Gi"},
            },
            {"name": "cfg", "configMap": {"name": "app-config"}},
            {"name": "sec", "secret": {"secretName": "app-secret"}},
            {
                "name": "meta",
                "downwardAPI": {
                    "fields": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                },
            },
        ],
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in compute(pod)["volumeMounts"]}
    assert volumes["root"]["persistentVolumeClaim"]["claimName"] == "root-pvc"
    assert mounts["root"] == "/var/run/kubevirt-private/vmi-disks/root"
    assert volumes["dv"]["persistentVolumeClaim"]["claimName"] == "my-dv"
    assert volumes["host"]["hostPath"] == {"path": "/data", "type": "DirectoryOrCreate"}
    assert mounts["host"] == "/var/run/kubevirt-private/vmi-disks/host"
    assert volumes["cfg"]["configMap"]["name"] == "app-config"
    assert mounts["cfg"] == "/var/run/kubevirt-private/config-map/cfg"
    assert volumes["sec"]["secret"]["secretName"] == "app-secret"
    assert mounts["meta"] == "/var/run/kubevirt-private/downwardapi/meta"
    assert volumes["meta"]["downwardAPI"]["items"][0]["path"] == "labels"


def test_a_volume_named_like_a_launcher_dir_is_refused() -> None:
    spec = {
        "domain": {"devices": {}},
        "volumes": [{"name": "sockets", "persistentVolumeClaim": {"claimName": "x"}}],
    }
    with pytest.raises(RenderError, match="reserved"):
        render_launcher_pod(vmi(spec), ControllerConfig())


def test_cloud_init_and_access_credential_secrets_are_mounted_read_only() -> None:
    spec = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}},
        "volumes": [
            {
                "name": "cloudinit",
                "cloudInitNoCloud": {
                    "secretRef": {"name": "user-data"},
                    "networkDataSecretRef": {"name": "net-data"},
                },
            }
        ],
        "accessCredentials": [
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": "my-keys"}},
                    "propagationMethod": {"noCloud": {}},
                }
            },
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": "my-keys"}},
                    "propagationMethod": {"configDrive": {}},
                }
            },
        ],
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["cloudinit-udata"]["secret"] == {"secretName": "user-data"}
    assert volumes["cloudinit-ndata"]["secret"] == {"secretName": "net-data"}
    assert volumes["my-keys-access-cred"]["secret"] == {"secretName": "my-keys"}
    assert [v["name"] for v in pod["spec"]["volumes"]].count("my-keys-access-cred") == 1
    mounts = [m for m in compute(pod)["volumeMounts"] if m["name"] in volumes]
    by_path = {m["mountPath"]: m for m in mounts if m.get("readOnly")}
    base = "/var/run/kubevirt-private/secret"
    assert by_path[f"{base}/cloudinit/userdata"]["subPath"] == "userdata"
    assert by_path[f"{base}/cloudinit/userData"]["name"] == "cloudinit-udata"
    assert by_path[f"{base}/cloudinit/networkdata"]["name"] == "cloudinit-ndata"
    assert by_path[f"{base}/cloudinit/networkData"]["subPath"] == "networkData"
    assert "subPath" not in by_path[f"{base}/my-keys-access-cred"]


def test_a_secret_volume_clashing_with_a_rendered_one_is_refused() -> None:
    spec = {
        "domain": {"devices": {}},
        "volumes": [
            {"name": "ci", "cloudInitNoCloud": {"secretRef": {"name": "s"}}},
            {"name": "ci-udata", "secret": {"secretName": "other"}},
        ],
    }
    with pytest.raises(RenderError, match="ci-udata"):
        render_launcher_pod(vmi(spec), ControllerConfig())


def test_a_service_account_volume_runs_the_pod_as_that_account_with_its_token() -> None:
    spec = {
        "domain": {"devices": {}},
        "volumes": [{"name": "sa", "serviceAccount": {"serviceAccountName": "robot"}}],
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig())
    assert pod["spec"]["serviceAccountName"] == "robot"
    assert pod["spec"]["automountServiceAccountToken"] is True
    plain = render_launcher_pod(vmi(), ControllerConfig())
    assert "serviceAccountName" not in plain["spec"]
    assert plain["spec"]["automountServiceAccountToken"] is False


def test_a_block_claim_is_a_device_at_dev_volume_not_a_mount() -> None:
    spec = {
        "domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}}},
        "volumes": [
            {"name": "fs", "persistentVolumeClaim": {"claimName": "fs-pvc"}},
            {"name": "raw", "persistentVolumeClaim": {"claimName": "raw-pvc", "readOnly": True}},
        ],
    }
    pod = render_launcher_pod(vmi(spec), ControllerConfig(), block_volumes=frozenset({"raw"}))
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["raw"]["persistentVolumeClaim"] == {"claimName": "raw-pvc", "readOnly": True}
    assert compute(pod)["volumeDevices"] == [{"name": "raw", "devicePath": "/dev/raw"}]
    mounts = {m["name"]: m["mountPath"] for m in compute(pod)["volumeMounts"]}
    assert "raw" not in mounts
    assert mounts["fs"] == "/var/run/kubevirt-private/vmi-disks/fs"
    assert "volumeDevices" not in compute(render_launcher_pod(vmi(spec), ControllerConfig()))
