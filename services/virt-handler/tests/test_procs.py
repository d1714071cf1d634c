"""Finding a pod's (or one container's) process by its cgroup, as the network setup and
the hotplug bind do."""

from __future__ import annotations

from pathlib import Path

from virt_handler.procs import find_pod_process

POD = "0a1b2c3d-0000-4000-8000-000000000001"
CID = "f" * 64


def _proc(tmp_path: Path, pid: int, cgroup: str) -> None:
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "cgroup").write_text(cgroup)


def test_the_pods_process_and_the_containers(tmp_path: Path) -> None:
    _proc(tmp_path, 10, "0::/system.slice/containerd.service\n")
    _proc(tmp_path, 20, f"0::/kubepods/pod{POD}/{'e' * 64}\n")  # the sandbox
    systemd = POD.replace("-", "_")
    _proc(
        tmp_path, 30, f"0::/kubepods.slice/kubepods-pod{systemd}.slice/cri-containerd-{CID}.scope\n"
    )
    (tmp_path / "self").mkdir()
    assert find_pod_process(POD, proc=str(tmp_path)) in (20, 30)
    assert find_pod_process(POD, CID, str(tmp_path)) == 30
    assert find_pod_process(POD, "a" * 64, str(tmp_path)) is None
    assert find_pod_process("other", proc=str(tmp_path)) is None
