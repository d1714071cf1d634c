"""Volume hotplug, the handler's half: which disks to mount, the phases, the bind itself."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from virt_handler import mountns
from virt_handler.hotplug import (
    BLOCK_UNSUPPORTED,
    dump_path,
    dumps_to_take,
    hotplug_status,
    plan_volumes,
)
from virt_handler.status import MemoryDumpView

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


def _dump_vmi(status: list[dict[str, Any]]) -> dict[str, Any]:
    volume = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}
    return {
        "metadata": {"name": "vm"},
        "spec": {"volumes": [volume]},
        "status": {"volumeStatus": status},
    }


def test_a_memory_dump_volume_is_a_directory_and_goes_in_progress_then_completed() -> None:
    now = dt.datetime(2026, 12, 2, 15, 4, 5, tzinfo=dt.UTC)
    attached = {
        "name": "dump",
        "phase": "AttachedToNode",
        "hotplugVolume": ATTACH,
        "memoryDumpVolume": {"claimName": "dump"},
    }
    work = plan_volumes(_dump_vmi([attached]))
    assert (work.mount, work.dumps) == ({"dump": "hp-volume-1"}, frozenset({"dump"}))
    (entry,) = (
        hotplug_status(_dump_vmi([attached]), ["dump"], [], {}, dumps=work.dumps, now=now) or []
    )
    assert entry["phase"] == "MemoryDumpInProgress"
    file_name = "vm-dump-20261202-150405.memory.dump"
    assert entry["memoryDumpVolume"] == {"claimName": "dump", "targetFileName": file_name}
    assert dumps_to_take([entry], None) == [("dump", file_name)]
    assert dump_path("dump", file_name) == f"/var/run/kubevirt/hotplug-disks/dump/{file_name}"
    # The launcher is writing it: still in progress, asked again (it ignores a repeat).
    writing = MemoryDumpView(file_name, start_timestamp="2026-12-02T15:04:06Z")
    (entry,) = (
        hotplug_status(_dump_vmi([entry]), ["dump"], [], {}, dumps=work.dumps, dump=writing) or []
    )
    assert (entry["phase"], entry["memoryDumpVolume"]["startTimestamp"]) == (
        "MemoryDumpInProgress",
        "2026-12-02T15:04:06Z",
    )
    done = MemoryDumpView(file_name, "2026-12-02T15:04:06Z", "2026-12-02T15:04:09Z", completed=True)
    (entry,) = (
        hotplug_status(_dump_vmi([entry]), ["dump"], [], {}, dumps=work.dumps, dump=done) or []
    )
    assert entry["phase"] == "MemoryDumpCompleted"
    assert entry["memoryDumpVolume"]["endTimestamp"] == "2026-12-02T15:04:09Z"
    assert dumps_to_take([entry], done) == []
    # A dump of another file (an older request) does not complete this one.
    other = MemoryDumpView("old.memory.dump", completed=True, failed=True, failure_reason="x")
    progress = dict(entry, phase="MemoryDumpInProgress")
    assert (
        hotplug_status(_dump_vmi([progress]), ["dump"], [], {}, dumps=work.dumps, dump=other)
        is None
    )


def test_a_failed_dump_says_why_and_its_volume_is_unmounted_as_a_directory() -> None:
    entry = {
        "name": "dump",
        "phase": "MemoryDumpInProgress",
        "hotplugVolume": ATTACH,
        "memoryDumpVolume": {"claimName": "dump", "targetFileName": "f.memory.dump"},
    }
    failed = MemoryDumpView(
        "f.memory.dump",
        end_timestamp="e",
        completed=True,
        failed=True,
        failure_reason="failed to dump domain memory: disk full",
    )
    (out,) = (
        hotplug_status(_dump_vmi([entry]), ["dump"], [], {}, dumps=frozenset({"dump"}), dump=failed)
        or []
    )
    assert out["phase"] == "MemoryDumpFailed"
    assert (
        out["message"] == "Memory dump to pvc dump failed: failed to dump domain memory: disk full"
    )
    # Taken out of the spec by the controller: unmounted, still known as a directory.
    gone = {
        "metadata": {"name": "vm"},
        "spec": {},
        "status": {"volumeStatus": [dict(out, phase="Detaching")]},
    }
    work = plan_volumes(gone)
    assert (work.unmount, work.dumps) == (("dump",), frozenset({"dump"}))


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


def test_a_directory_is_bound_writable_and_removed_on_unmount(
    tmp_path: Path, other_namespace: int
) -> None:
    # A memory dump's claim: the launcher writes into the directory, the claim gets the file.
    (tmp_path / "src").mkdir()
    source_ns = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs none {tmp_path / 'src'} && touch {tmp_path / 'ready'} "
            "&& exec sleep 60",
        ]
    )
    try:
        while not (tmp_path / "ready").exists():
            assert source_ns.poll() is None
            time.sleep(0.05)
        (tmp_path / "hotplug").mkdir()
        target = str(tmp_path / "hotplug" / "dump")
        bind = ("mount", "--source-pid", str(source_ns.pid), "--source", str(tmp_path / "src"))
        into = ("--target-pid", str(other_namespace), "--target", target, "--uid", "107")
        done = _mountns(*bind, *into)
        assert (done.returncode, done.stdout.strip()) == (0, "mounted"), done.stderr
        _in_namespace(other_namespace, "sh", "-c", f"echo dumped > {target}/vm.memory.dump")
        seen = _in_namespace(source_ns.pid, "cat", str(tmp_path / "src" / "vm.memory.dump"))
        assert seen == "dumped\n"
        assert _mountns(*bind, *into).stdout.strip() == "present"
        undo = ("umount", "--target-pid", str(other_namespace), "--target", target)
        assert _mountns(*undo).stdout.strip() == "unmounted"
        assert not Path(target).exists()
    finally:
        source_ns.kill()
        source_ns.wait()
