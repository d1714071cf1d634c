"""The node's cgroup root is nested under our own cgroup; only dirs we made are removed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kv_cluster.cgroups import CgroupError, CgroupRoot, own_cgroup

PROC = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"


def test_own_cgroup_is_the_memory_one() -> None:
    assert own_cgroup(PROC) == "/process_api/abc"


def _fake_fs(root: Path) -> None:
    for name in ("cpu", "memory", "cpuset"):
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").write_text("")
    (root / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    (root / "memory" / "process_api" / "abc").mkdir(parents=True)  # not ours
    (root / "unified").mkdir()


def test_ensure_then_remove_touches_only_what_it_created(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    _fake_fs(fs)
    root = CgroupRoot("/process_api/abc/kv/node", tmp_path / "record.json", fs=fs)
    root.ensure()
    for name in ("cpu", "memory", "cpuset"):
        assert (fs / name / "process_api" / "abc" / "kv" / "node").is_dir()
    assert not (fs / "unified" / "process_api").exists()
    assert (
        fs / "cpuset" / "process_api" / "abc" / "kv" / "node" / "cpuset.cpus"
    ).read_text() == "0-1\n"
    removed = root.remove()
    assert str(fs / "memory" / "process_api" / "abc" / "kv") in removed
    assert (fs / "memory" / "process_api" / "abc").is_dir()  # existed before: kept
    assert not (fs / "cpu" / "process_api").exists()  # made by us: removed


def test_paths_with_dotdot_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CgroupError):
        CgroupRoot("/a/../b", tmp_path / "r.json")
