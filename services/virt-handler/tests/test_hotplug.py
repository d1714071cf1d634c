"""Volume hotplug, the handler's half: which disks to mount, the phases, the bind itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from virt_handler import mountns
from virt_handler.hotplug import BLOCK_UNSUPPORTED, hotplug_status, plan_volumes

ATTACH = {"attachPodName": "hp-volume-1", "attachPodUID": "u"}


def _vmi(spec: list[str], status: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec": {
            "volumes": [
                {"name": v, "persistentVolumeClaim": {"claimName": v, "hotpluggable": True}}
                for v in spec
            ]
        },
        "status": {"volumeStatus": status},
    }


def test_attached_volumes_are_mounted_and_detaching_ones_unmounted() -> None:
    vmi = _vmi(
        ["data", "pending", "blk"],
        [
            {
                "name": "blk",
                "phase": "AttachedToNode",
                "hotplugVolume": ATTACH,
                "persistentVolumeClaimInfo": {"volumeMode": "Block"},
            },
            {"name": "data", "phase": "AttachedToNode", "hotplugVolume": ATTACH},
            {"name": "old", "phase": "Detaching", "hotplugVolume": ATTACH},
            {"name": "pending", "phase": "Bound"},
        ],
    )
    work = plan_volumes(vmi)
    assert work.mount == {"data": "hp-volume-1"}
    assert work.unmount == ("old",)
    assert work.block == ("blk",)


def test_phases_mounted_then_ready_with_the_guest_device_then_unmounted() -> None:
    vmi = _vmi(["data"], [{"name": "data", "phase": "AttachedToNode", "hotplugVolume": ATTACH}])
    (entry,) = hotplug_status(vmi, ["data"], [], {}) or []
    assert entry["phase"] == "MountedToPod"
    (entry,) = hotplug_status(vmi, ["data"], [], {"data": "sda"}) or []
    assert (entry["phase"], entry["target"]) == ("Ready", "sda")
    ready = _vmi(["data"], [entry])
    assert hotplug_status(ready, ["data"], [], {"data": "sda"}) is None  # nothing to write
    gone = _vmi([], [dict(entry, phase="Detaching")])
    (entry,) = hotplug_status(gone, [], ["data"], {}) or []
    assert (entry["phase"], entry["target"]) == ("UnMountedFromPod", "")


def test_a_block_volume_says_it_is_not_supported() -> None:
    vmi = _vmi(["blk"], [{"name": "blk", "phase": "AttachedToNode", "hotplugVolume": ATTACH}])
    (entry,) = hotplug_status(vmi, [], [], {}, ["blk"]) or []
    assert entry["message"] == BLOCK_UNSUPPORTED
    assert entry["phase"] == "AttachedToNode"


@pytest.fixture
def other_namespace() -> Iterator[int]:
    """A process in a mount namespace of its own (as a launcher's container is)."""
    process = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "60"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def _mountns(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, mountns.__file__, *args], capture_output=True, text=True, check=False
    )


def _in_namespace(pid: int, *argv: str) -> str:
    return subprocess.run(
        ["nsenter", "-t", str(pid), "-m", *argv], capture_output=True, text=True, check=True
    ).stdout


def test_the_bind_shows_only_in_the_target_namespace_and_is_undone(
    tmp_path: Path, other_namespace: int
) -> None:
    # The source lives in a namespace of its own too, as in the attachment pod's container:
    # a tmpfs only that namespace has mounted.
    (tmp_path / "src").mkdir()
    source_ns = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs none {tmp_path / 'src'} && "
            f"echo 'guest data' > {tmp_path / 'src' / 'disk.img'} && touch {tmp_path / 'ready'} "
            "&& exec sleep 60",
        ]
    )
    try:
        while not (tmp_path / "ready").exists():
            assert source_ns.poll() is None
            time.sleep(0.05)
        assert not (tmp_path / "src" / "disk.img").exists()  # not in this namespace
        (tmp_path / "hotplug").mkdir()
        target = str(tmp_path / "hotplug" / "data.img")
        bind = (
            "mount",
            "--source-pid",
            str(source_ns.pid),
            "--source",
            str(tmp_path / "src" / "disk.img"),
        )
        into = ("--target-pid", str(other_namespace), "--target", target, "--uid", "107")
        done = _mountns(*bind, *into)
        assert (done.returncode, done.stdout.strip()) == (0, "mounted"), done.stderr
        assert _in_namespace(other_namespace, "cat", target) == "guest data\n"
        assert Path(target).read_text() == ""  # here it is the empty file under the mount
        assert _mountns(*bind, *into).stdout.strip() == "present"
        undo = ("umount", "--target-pid", str(other_namespace), "--target", target)
        assert _mountns(*undo).stdout.strip() == "unmounted"
        assert not Path(target).exists()
        assert _mountns(*undo).stdout.strip() == "absent"
    finally:
        source_ns.kill()
        source_ns.wait()


def test_a_link_in_place_of_the_disk_is_refused(tmp_path: Path, other_namespace: int) -> None:
    (tmp_path / "disk.img").symlink_to("/etc/hostname")
    (tmp_path / "hotplug").mkdir()
    done = _mountns(
        "mount",
        "--source-pid",
        str(os.getpid()),
        "--source",
        str(tmp_path / "disk.img"),
        "--target-pid",
        str(other_namespace),
        "--target",
        str(tmp_path / "hotplug" / "d.img"),
        "--uid",
        "107",
    )
    assert done.returncode == 1
    assert "symbolic links" in done.stderr
    assert not (tmp_path / "hotplug" / "d.img").exists()
