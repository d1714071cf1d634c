"""The launcher-pod contract: the names and paths controller, launcher and handler share."""

from __future__ import annotations

from virt_domain import LauncherLayout
from virt_domain import launcher_pod as contract


def test_the_launcher_command_line_carries_every_directory_and_the_identity() -> None:
    dirs = contract.LauncherDirs(sockets_dir="/s", private_dir="/p")
    args = contract.launcher_args("vm", "ns", "uid-1", grace_period_seconds=45, dirs=dirs)

    values = dict(zip(args[::2], args[1::2], strict=True))
    assert values == {
        "--name": "vm",
        "--namespace": "ns",
        "--uid": "uid-1",
        "--sockets-dir": "/s",
        "--private-dir": "/p",
        "--ephemeral-disk-dir": "/var/run/kubevirt-ephemeral-disks",
        "--container-disk-dir": "/var/run/kubevirt/container-disks",
        "--kernel-boot-dir": "/var/run/kubevirt/kernel-boot",
        "--libvirt-dir": "/var/run/libvirt",
        "--notify-socket": "/s/domain-notify-pipe.sock",
        "--grace-period-seconds": "45",
    }
    assert set(values) == {str(flag) for flag in contract.Flag}


def test_an_explicit_notify_socket_wins() -> None:
    args = contract.launcher_args("vm", "ns", "u", grace_period_seconds=0, notify_socket="/n.sock")
    assert args[args.index("--notify-socket") + 1] == "/n.sock"


def test_the_pods_directories_are_upstreams() -> None:
    mounts = {v.name: v.mount_path for v in contract.VOLUMES}
    assert mounts == {
        "private": "/var/run/kubevirt-private",
        "public": "/var/run/kubevirt",
        "sockets": "/var/run/kubevirt/sockets",
        "ephemeral-disks": "/var/run/kubevirt-ephemeral-disks",
        "container-disks": "/var/run/kubevirt/container-disks",
        "libvirt-runtime": "/var/run/libvirt",
        "hotplug-disks": "/var/run/kubevirt/hotplug-disks",
    }
    assert contract.LAUNCHER_DIRS.sockets_dir == contract.SOCKETS.mount_path
    assert {"kernel-boot", "kubevirt-init", "private"} <= contract.RESERVED_VOLUMES


def test_socket_names_are_upstreams() -> None:
    assert (contract.INIT_SOCKET, contract.READY_SOCKET) == ("launcher-init-sock", "launcher-sock")
    assert contract.NOTIFY_SOCKET == "domain-notify-pipe.sock"
    assert contract.serial_socket() == "virt-serial0"
    assert contract.serial_log() == "virt-serial0-log"
    assert contract.VNC_SOCKET == "virt-vnc"


def test_the_converters_layout_is_derived_from_the_contract() -> None:
    assert LauncherLayout() == LauncherLayout.for_launcher(contract.LAUNCHER_DIRS)
    layout = LauncherLayout.for_launcher(contract.LauncherDirs(private_dir="/p"))
    assert layout.serial_socket("u") == "/p/u/virt-serial0"
    assert layout.serial_log("u") == "/p/u/virt-serial0-log"
    assert layout.vnc_socket("u") == "/p/u/virt-vnc"
    assert layout.cloud_init_dir == "/p/cloud-init"
    assert layout.nvram("vm") == "/p/libvirt/qemu/nvram/vm_VARS.fd"
    assert layout.filesystem_volume_image("d") == f"{layout.volume_mount_dir('d')}/disk.img"


def test_a_hotplugged_volumes_image_is_in_the_hotplug_disks_volume() -> None:
    layout = LauncherLayout.for_launcher(contract.LauncherDirs(private_dir="/p"))
    assert layout.hotplug_disk_image("data") == "/var/run/kubevirt/hotplug-disks/data.img"
    assert contract.HOTPLUG_DISKS.name in contract.RESERVED_VOLUMES
